"""Collecting the diagnostics of one failure into short sections and full files
(what the package docstring lists), and writing the files."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml
from lightkube.core.exceptions import ApiError

from csi_harness._internal.diagnostics.failsafe import Skipped, describe_error, safely
from csi_harness._internal.diagnostics.formatting import (
    ROUTINE_METHODS,
    clip,
    format_event,
    format_record,
    is_routine,
    is_routine_log_line,
    last,
    log_rank,
    sorted_events,
)
from csi_harness._internal.diagnostics.listing import (
    EVENTS,
    OBJECT_KINDS,
    KubeLister,
    KubeReader,
    ObjectKind,
    connect_kube,
)
from csi_harness._internal.diagnostics.sources import ClusterTarget, JournalSource
from csi_mock.observe.calls import CallRecord


@dataclass(frozen=True)
class Limits:
    """How much a section shows; the files hold more."""

    events: int = 30
    """Events per namespace in a section (files: all)."""
    objects: int = 20
    """Objects per kind in a section (files: all, as YAML)."""
    journal: int = 25
    """Journal records in the section, all instances together."""
    journal_fetch: int = 2000
    """Records fetched per driver instance (and written to its file): with capacity
    polled every 2 s, a few minutes of calls."""
    log_lines: int = 40
    """Lines of each component log in its section."""
    log_bytes: int = 256 << 10
    """The tail of each component log copied to the files."""
    width: int = 300
    """Longer section lines are cut (files keep them whole)."""


@dataclass(frozen=True)
class Section:
    title: str
    text: str


@dataclass
class Diagnostics:
    sections: list[Section] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    """Relative path -> full content."""
    problems: list[str] = field(default_factory=list)
    """What could not be collected, and why."""
    seconds: float = 0.0


def collect(
    target: ClusterTarget,
    limits: Limits | None = None,
    *,
    kube: Callable[[Path], KubeLister] = connect_kube,
    files_at: str = "",
) -> Diagnostics:
    """Everything the package docstring lists, the overview section first; never
    raises for a broken source. ``files_at`` (where the files will be written) is
    named in the sections."""
    limits = limits or Limits()
    started = time.monotonic()
    result = Diagnostics()
    client = KubeReader(lambda: kube(target.kubeconfig))

    def where(name: str) -> str:
        return f"{files_at.rstrip('/')}/{name}" if files_at else name

    namespaces = [target.namespace] if target.namespace else []
    if target.driver_namespace not in namespaces:
        namespaces.append(target.driver_namespace)
    for namespace in namespaces:
        text = safely(
            f"events in {namespace}",
            partial(_events, client, namespace, limits, result, where),
            result.problems,
        )
        result.sections.append(Section(f"events {namespace}", text))
    result.sections.append(Section("objects", _objects(client, target, limits, result, where)))
    result.sections.append(Section("driver journal", _journals(target, limits, result, where)))
    result.sections.extend(_logs(target, limits, result, where))
    result.seconds = time.monotonic() - started
    overview = _overview(target, result, files_at, client.down)
    result.sections.insert(0, Section("overview", overview))
    return result


def _overview(
    target: ClusterTarget, result: Diagnostics, files_at: str, api_down: str | None
) -> str:
    lines = [
        f"driver {target.driver_name or '?'}, test namespace {target.namespace or '(none)'}, "
        f"collected in {result.seconds:.1f}s" + (f"; files in {files_at}" if files_at else ""),
        f"component logs: {target.logs.location if target.logs else '(none)'}",
    ]
    lines += [f"not collected: {problem}" for problem in result.problems]
    if api_down is not None:
        lines.append(f"the apiserver failed ({api_down}): no further API reads were tried")
    return "\n".join(lines)


def _events(
    client: KubeReader,
    namespace: str,
    limits: Limits,
    result: Diagnostics,
    where: Callable[[str], str],
) -> str:
    file = f"events-{namespace}.txt"
    lines = [format_event(e) for e in sorted_events(client.list(EVENTS, namespace=namespace))]
    result.files[file] = "\n".join(lines) + "\n" if lines else "(no events)\n"
    shown, count = last(lines, limits.events)
    header = (
        f"[{count} events in namespace {namespace}, oldest first, times UTC; all in {where(file)}]"
    )
    return "\n".join([header, *(clip(line, limits.width) for line in shown)])


def _objects(
    client: KubeReader,
    target: ClusterTarget,
    limits: Limits,
    result: Diagnostics,
    where: Callable[[str], str],
) -> str:
    lines = [f"[cluster objects, one line each; their YAML in {where('*.yaml')}]"]
    for kind in OBJECT_KINDS:
        namespace = kind.namespace(target)
        if kind.scope == "test" and namespace is None:
            continue
        title = f"{kind.label} in {namespace}" if namespace else kind.label
        produce = partial(_one_kind, client, kind, namespace, title, limits, result)
        lines.append(safely(title, produce, result.problems))
    return "\n".join(lines)


def _one_kind(
    client: KubeReader,
    kind: ObjectKind,
    namespace: str | None,
    title: str,
    limits: Limits,
    result: Diagnostics,
) -> str:
    try:
        objects = client.list(kind.resource, namespace=namespace)
    except ApiError as error:
        if kind.optional and error.status.code == 404:
            raise Skipped("this cluster does not serve the kind (no CRD)") from None
        raise
    result.files[f"{kind.label}.yaml"] = (
        yaml.safe_dump_all(objects, sort_keys=False) if objects else "# none\n"
    )
    described = [clip("  " + kind.describe(obj), limits.width) for obj in objects]
    shown, count = last(described, limits.objects)
    return "\n".join([f"{title}: {count}", *shown])


def _journals(
    target: ClusterTarget,
    limits: Limits,
    result: Diagnostics,
    where: Callable[[str], str],
) -> str:
    if not target.admin:
        return "(no driver deployed: no journal)"
    records: list[tuple[CallRecord, str]] = []
    notes: list[str] = []
    for instance, source in target.admin.items():

        def fetch(instance: str = instance, source: JournalSource = source) -> str:
            got = list(source.journal(limit=limits.journal_fetch))
            result.files[f"journal-{instance}.txt"] = (
                "\n".join(format_record(r) for r in got) + "\n" if got else "(empty)\n"
            )
            records.extend((r, instance) for r in got)
            return ""

        note = safely(f"journal of {instance}", fetch, result.problems)
        if note:
            notes.append(note)
    records.sort(key=lambda pair: (pair[0].time, pair[0].seq))
    interesting = [(r, i) for r, i in records if not is_routine(r)]
    lines = [format_record(r, i) for r, i in interesting]
    shown, count = last(lines, limits.journal)
    hidden = len(records) - len(interesting)
    header = (
        f"[{count} driver calls of all instances, oldest first, times UTC; "
        f"per instance in {where('journal-<instance>.txt')}]"
    )
    out = [header, *notes, *(clip(line, limits.width) for line in shown)]
    if hidden:
        out.append(
            f"({hidden} successful routine calls not shown: {', '.join(sorted(ROUTINE_METHODS))})"
        )
    return "\n".join(out)


def _logs(
    target: ClusterTarget, limits: Limits, result: Diagnostics, where: Callable[[str], str]
) -> list[Section]:
    source = target.logs
    if source is None:
        return [Section("logs", "(no component logs)")]
    try:
        components = sorted(source.components(), key=log_rank)
    except Exception as error:
        note = f"component logs in {source.location} ({describe_error(error)})"
        result.problems.append(note)
        return [Section("logs", f"(component logs: not collected, {describe_error(error)})")]
    if not components:
        return [Section("logs", f"(no component logs in {source.location})")]
    sections = []
    for component in components:

        def tail(component: str = component) -> str:
            text = source.tail(component, limits.log_bytes)
            file = f"logs/{component}.log"
            result.files[file] = text
            every = text.splitlines()
            kept = [line for line in every if not is_routine_log_line(line)]
            lines = kept[-limits.log_lines :] if limits.log_lines > 0 else []
            left_out = ", successful routine calls left out" if len(kept) < len(every) else ""
            header = f"[last {len(lines)} lines{left_out}; a longer tail in {where(file)}]"
            return "\n".join([header, *(clip(line, limits.width) for line in lines)])

        sections.append(
            Section(f"log {component}", safely(f"log {component}.log", tail, result.problems))
        )
    return sections


def write(
    diagnostics: Diagnostics, directory: Path, extra: Mapping[str, str] | None = None
) -> None:
    """The files of ``diagnostics`` (and ``extra`` ones) in ``directory``, replacing
    whatever an earlier run left there."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, content in {**diagnostics.files, **(extra or {})}.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
