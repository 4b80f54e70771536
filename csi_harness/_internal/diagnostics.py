"""What the cluster and the driver looked like when a test failed.

``collect(target)`` gathers, each part on its own so that one broken source (an
apiserver that is down, a driver that hangs) costs only its own part:

* the events of the test's namespace and of the driver's, oldest first;
* the pods and claims of the test's namespace, every PV, VolumeAttachment, CSINode
  and CSIDriver, and the driver's CSIStorageCapacity objects: one line each for
  reading, the YAML for the files;
* the driver's call journal, controller and every node instance, one line a call;
* the last lines of every component's log: every process's where the cluster keeps
  them in a directory (the local provider), else the driver's components'.

``cluster_target(cluster)`` says where to look in a
``csi_harness._internal.providers.base.Cluster``. The
result holds short ``Section``s (what a terminal can show) and the full texts as
files; ``write`` puts the files in a directory. Nothing here knows about pytest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
)

from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE
from csi_harness._internal.providers.base import Cluster, Driver
from csi_mock.admin.client import AdminClient
from csi_mock.observe.calls import CallRecord

# Calls a healthy cluster makes all the time (capacity polling, probes, volume stats):
# a section shows them only when they failed. The journal files keep everything.
ROUTINE_METHODS = frozenset(
    {
        "Probe",
        "GetPluginInfo",
        "GetPluginCapabilities",
        "ControllerGetCapabilities",
        "NodeGetCapabilities",
        "GetCapacity",
        "NodeGetVolumeStats",
    }
)

# Logs in the order worth reading: the driver and its sidecars, the control plane
# that acts on volumes, the nodes, then the rest.
LOG_ORDER = (
    "csi-mock-controller",
    "csi-mock-node-",
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "snapshot-controller",
    "kube-scheduler",
    "kube-controller-manager",
    "kubelet-",
    "node-simulator",
    "kube-apiserver",
    "containerd-",
    "etcd",
)


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


class JournalSource(Protocol):
    """The part of an ``AdminClient`` the journal section reads."""

    def journal(self, *, limit: int) -> Sequence[CallRecord]: ...


class ComponentLogs(Protocol):
    """Where the component logs come from."""

    @property
    def location(self) -> str:
        """Where they are, for the overview."""
        ...

    def components(self) -> list[str]:
        """The components that have a log (may raise OSError)."""
        ...

    def tail(self, component: str, max_bytes: int) -> str:
        """The last ``max_bytes`` of the component's log, from a whole line on."""
        ...


@dataclass(frozen=True)
class LogDirectory:
    """A ``<component>.log`` file per process in one directory (the local provider)."""

    path: Path

    @property
    def location(self) -> str:
        return str(self.path)

    def components(self) -> list[str]:
        return [log.stem for log in self.path.glob("*.log")]

    def tail(self, component: str, max_bytes: int) -> str:
        return read_tail(self.path / f"{component}.log", max_bytes)


@dataclass(frozen=True)
class DriverLogs:
    """The logs of the driver's components, as the driver gives them
    (``Driver.component_log``), for clusters that keep no log directory."""

    driver: Driver

    @property
    def location(self) -> str:
        return f"the components of driver {self.driver.spec.name}"

    def components(self) -> list[str]:
        return self.driver.components()

    def tail(self, component: str, max_bytes: int) -> str:
        data = self.driver.component_log(component).encode()
        return _from_a_whole_line(data[-max_bytes:], cut=len(data) > max_bytes)


@dataclass(frozen=True)
class ClusterTarget:
    """Where to look: the cluster's API, its logs, the driver's admin APIs."""

    kubeconfig: Path
    logs: ComponentLogs | None
    """None: no logs to read (no log directory and no driver)."""
    admin: Mapping[str, JournalSource] = field(default_factory=dict)
    """Driver instance ("controller" or a node name) -> a client of its admin API."""
    namespace: str | None = None
    """The test's namespace, when it has one."""
    driver_name: str | None = None
    driver_namespace: str = DRIVER_NAMESPACE


@contextlib.contextmanager
def cluster_target(
    cluster: Cluster, namespace: str | None = None, driver: Driver | None = None
) -> Iterator[ClusterTarget]:
    """Where to look in ``cluster`` (and the test's ``namespace``): component logs
    from its log directory, else from the driver; the admin clients of every instance
    of the driver, closed when the context ends. ``driver``: the test's, when it has
    one of its own (None: the cluster's current driver)."""
    own = driver is not None and driver is not cluster.driver
    driver = driver if driver is not None else cluster.driver
    logs: ComponentLogs | None = None
    if cluster.log_dir is not None:
        logs = LogDirectory(cluster.log_dir)
    elif driver is not None:
        logs = DriverLogs(driver)
    if own and driver is not None:
        clients: Mapping[str, AdminClient] = {i: driver.admin(i) for i in driver.instances()}
    else:
        clients = cluster.admin_instances()
    spec = driver.spec if driver is not None else cluster.default_driver
    try:
        yield ClusterTarget(
            kubeconfig=cluster.kubeconfig,
            logs=logs,
            admin=clients,
            namespace=namespace,
            driver_name=spec.name,
            driver_namespace=spec.namespace,
        )
    finally:
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.close()


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


class KubeLister(Protocol):
    """The part of ``lightkube.Client`` used here."""

    def list(self, res: Any, *, namespace: str | None = ...) -> Iterable[Any]: ...


def connect_kube(kubeconfig: Path) -> KubeLister:
    client: KubeLister = Client(KubeConfig.from_file(kubeconfig))
    return client


# -- fail-safe collection ------------------------------------------------------------


def describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def safely(what: str, produce: Callable[[], str], problems: list[str] | None = None) -> str:
    """``produce()``, or one line saying that ``what`` was not collected and why
    (noted in ``problems`` too, unless it was only skipped). Diagnostics must never
    replace the failure they are meant to explain."""
    try:
        return produce()
    except Skipped as skipped:
        return f"({what}: skipped, {skipped})"
    except Exception as error:
        note = f"{what} ({describe_error(error)})"
        if problems is not None:
            problems.append(note)
        return f"({what}: not collected, {describe_error(error)})"


class Skipped(Exception):
    """A part not tried because its source failed already."""


class _Kube:
    """Lists objects as plain dicts, without managedFields. After the first failure
    that is not an API answer (connection refused, timeout, bad kubeconfig) it stops
    trying, so a dead apiserver costs one timeout, not one per object kind."""

    def __init__(self, connect: Callable[[], KubeLister]) -> None:
        self._connect = connect
        self._client: KubeLister | None = None
        self.down: str | None = None
        """Why the apiserver is not tried any more."""

    def list(self, resource: Any, namespace: str | None = None) -> list[dict[str, Any]]:
        if self.down is not None:
            raise Skipped("the apiserver failed before")
        try:
            if self._client is None:
                self._client = self._connect()
            found = (
                self._client.list(resource)
                if namespace is None
                else self._client.list(resource, namespace=namespace)
            )
            return [_plain(obj, resource) for obj in found]
        except ApiError:
            raise
        except Exception as error:
            self.down = describe_error(error)
            raise


def _plain(obj: Any, resource: Any) -> dict[str, Any]:
    """The object as a dict, with the apiVersion and kind a list's items lack, and
    without managedFields."""
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    info = getattr(resource, "_api_info", None)
    if info is not None:
        group, version = info.resource.group, info.resource.version
        data = {
            "apiVersion": f"{group}/{version}" if group else version,
            "kind": info.resource.kind,
            **data,
        }
    return data


# -- formatting ----------------------------------------------------------------------


def clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def one_line(text: str) -> str:
    return " | ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_OLDEST = datetime.min.replace(tzinfo=UTC)


def event_time(event: Mapping[str, Any]) -> datetime:
    """When the event last happened: lastTimestamp, or the events.k8s.io fields
    (series, eventTime), or when the object was made."""
    for value in (
        _get(event, "lastTimestamp"),
        _get(event, "series", "lastObservedTime"),
        _get(event, "eventTime"),
        _get(event, "firstTimestamp"),
        _get(event, "metadata", "creationTimestamp"),
    ):
        parsed = _timestamp(value)
        if parsed is not None:
            return parsed
    return _OLDEST


def format_event(event: Mapping[str, Any]) -> str:
    """``12:00:03 Warning ProvisioningFailed PersistentVolumeClaim/data x3 [csi-provisioner]:
    message`` (times UTC)."""
    when = event_time(event)
    stamp = when.strftime("%H:%M:%S") if when is not _OLDEST else "--:--:--"
    involved = _get(event, "involvedObject") or {}
    subject = f"{involved.get('kind', '?')}/{involved.get('name', '?')}"
    count = _get(event, "count") or _get(event, "series", "count")
    times = f" x{count}" if isinstance(count, int) and count > 1 else ""
    source = (
        _get(event, "reportingComponent")
        or _get(event, "source", "component")
        or _get(event, "reportingController")
    )
    origin = f" [{source}]" if source else ""
    kind = _get(event, "type") or "?"
    reason = _get(event, "reason") or "?"
    message = one_line(_get(event, "message") or "")
    return f"{stamp} {kind} {reason} {subject}{times}{origin}: {message}"


def sorted_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(events, key=event_time)


def _request_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def format_record(record: CallRecord, instance: str | None = None) -> str:
    """One journal record on one line, what happened before what it was about:
    ``12:00:03.123 [controller] CreateVolume RESOURCE_EXHAUSTED 0.3ms "no room"
    [fault rule-1] name=pvc-1 required_bytes=1073741824`` (times UTC)."""
    when = datetime.fromtimestamp(record.time, UTC)
    parts = [when.strftime("%H:%M:%S.") + f"{when.microsecond // 1000:03d}"]
    if instance is not None:
        parts.append(f"[{instance}]")
    parts += [record.method, record.code, f"{record.duration_ms:.1f}ms"]
    if record.message:
        parts.append(f'"{one_line(record.message)}"')
    if record.fault:
        parts.append(f"[fault {record.fault}]")
    parts += [f"{key}={_request_value(value)}" for key, value in record.request.items()]
    return " ".join(parts)


def is_routine(record: CallRecord) -> bool:
    return record.method in ROUTINE_METHODS and record.code == "OK"


def is_routine_log_line(line: str) -> bool:
    """A csi-mock call record (a JSON log line) of a routine call that succeeded."""
    if not line.startswith("{"):
        return False
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get("method") in ROUTINE_METHODS
        and data.get("code") == "OK"
    )


def read_tail(path: Path, max_bytes: int) -> str:
    """The last ``max_bytes`` of a file, from the first whole line on."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        data = f.read()
    return _from_a_whole_line(data, cut=size > max_bytes)


def _from_a_whole_line(data: bytes, *, cut: bool) -> str:
    """``data`` as text; when it is the end of a longer text (``cut``), from its first
    whole line on (the cut may be inside a line)."""
    if cut:
        data = data.partition(b"\n")[2]
    return data.decode(errors="replace")


def log_rank(component: str) -> tuple[int, str]:
    for rank, prefix in enumerate(LOG_ORDER):
        if component.startswith(prefix):
            return rank, component
    return len(LOG_ORDER), component


def last(lines: Sequence[str], limit: int) -> tuple[list[str], str]:
    """The last ``limit`` lines, and how many they are of all: "3" or "last 30 of 41"."""
    if len(lines) <= limit:
        return list(lines), f"{len(lines)}"
    return list(lines[-limit:]), f"last {limit} of {len(lines)}"


# -- object summaries ----------------------------------------------------------------


def _name(obj: Mapping[str, Any]) -> str:
    return str(_get(obj, "metadata", "name") or "?")


def describe_pod(pod: Mapping[str, Any]) -> str:
    parts = [_name(pod), str(_get(pod, "status", "phase") or "?")]
    parts.append(f"node={_get(pod, 'spec', 'nodeName') or '-'}")
    for condition in _get(pod, "status", "conditions") or []:
        if condition.get("status") != "True":
            detail = ": ".join(
                str(condition[key]) for key in ("reason", "message") if condition.get(key)
            )
            parts.append(f"{condition.get('type')}={condition.get('status')}({one_line(detail)})")
    for container in _get(pod, "status", "containerStatuses") or []:
        waiting = _get(container, "state", "waiting")
        if waiting:
            parts.append(f"{container.get('name')} waiting: {waiting.get('reason')}")
    return " ".join(parts)


def describe_claim(claim: Mapping[str, Any]) -> str:
    annotations = _get(claim, "metadata", "annotations") or {}
    parts = [
        _name(claim),
        str(_get(claim, "status", "phase") or "?"),
        f"class={_get(claim, 'spec', 'storageClassName') or '-'}",
        f"request={_get(claim, 'spec', 'resources', 'requests', 'storage') or '-'}",
        f"volume={_get(claim, 'spec', 'volumeName') or '-'}",
    ]
    selected = annotations.get("volume.kubernetes.io/selected-node")
    if selected:
        parts.append(f"selected-node={selected}")
    return " ".join(parts)


def describe_volume(pv: Mapping[str, Any]) -> str:
    claim = _get(pv, "spec", "claimRef") or {}
    parts = [
        _name(pv),
        str(_get(pv, "status", "phase") or "?"),
        str(_get(pv, "spec", "capacity", "storage") or "?"),
        f"claim={claim.get('namespace', '-')}/{claim.get('name', '-')}",
        f"class={_get(pv, 'spec', 'storageClassName') or '-'}",
        f"handle={_get(pv, 'spec', 'csi', 'volumeHandle') or '-'}",
    ]
    terms = _get(pv, "spec", "nodeAffinity", "required", "nodeSelectorTerms") or []
    expressions = [
        f"{e.get('key')} {e.get('operator')} {','.join(e.get('values') or [])}"
        for term in terms
        for e in term.get("matchExpressions") or []
    ]
    if expressions:
        parts.append(f"affinity=[{'; '.join(expressions)}]")
    return " ".join(parts)


def describe_attachment(attachment: Mapping[str, Any]) -> str:
    parts = [
        _name(attachment),
        f"node={_get(attachment, 'spec', 'nodeName') or '-'}",
        f"pv={_get(attachment, 'spec', 'source', 'persistentVolumeName') or '-'}",
        f"attached={_get(attachment, 'status', 'attached')}",
    ]
    for key in ("attachError", "detachError"):
        message = _get(attachment, "status", key, "message")
        if message:
            parts.append(f"{key}={one_line(message)}")
    return " ".join(parts)


def describe_capacity(capacity: Mapping[str, Any]) -> str:
    labels = _get(capacity, "nodeTopology", "matchLabels") or {}
    segment = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"
    return " ".join(
        [
            _name(capacity),
            f"class={_get(capacity, 'storageClassName') or '-'}",
            f"segment={segment}",
            f"capacity={_get(capacity, 'capacity') or '-'}",
            f"max={_get(capacity, 'maximumVolumeSize') or '-'}",
        ]
    )


def describe_csinode(csinode: Mapping[str, Any]) -> str:
    drivers = []
    for entry in _get(csinode, "spec", "drivers") or []:
        count = _get(entry, "allocatable", "count")
        keys = ",".join(entry.get("topologyKeys") or [])
        drivers.append(
            f"{entry.get('name')}(nodeID={entry.get('nodeID')}, count={count}, keys={keys})"
        )
    return f"{_name(csinode)} drivers: {'; '.join(drivers) or 'none'}"


def describe_csidriver(driver: Mapping[str, Any]) -> str:
    spec = _get(driver, "spec") or {}
    fields = ("attachRequired", "storageCapacity", "podInfoOnMount", "volumeLifecycleModes")
    return " ".join([_name(driver), *(f"{key}={spec.get(key)}" for key in fields)])


def plain_resource(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> Any:
    """A lightkube resource class whose objects are listed as plain dicts.

    lightkube's typed models refuse some real objects (a CSINode has
    ``spec.drivers: null`` while no driver is registered), and diagnostics must show
    exactly those. Unlike ``create_global_resource``, the class is not registered, so
    ``lightkube.codecs`` keeps decoding these kinds to the typed models elsewhere."""
    base = GenericNamespacedResource if namespaced else GenericGlobalResource
    api_info = create_api_info(group, version, kind, plural, verbs=["list"])
    return type(kind, (base,), {"_api_info": api_info})


STORAGE = "storage.k8s.io"
EVENTS = plain_resource("", "v1", "Event", "events", namespaced=True)


@dataclass(frozen=True)
class ObjectKind:
    label: str
    """Plural, as in the section and the file name."""
    resource: Any
    """The lightkube resource class (a ``plain_resource``)."""
    describe: Callable[[Mapping[str, Any]], str]
    scope: Literal["cluster", "test", "driver"]
    """Cluster-scoped, or listed in the test's namespace or in the driver's."""

    def namespace(self, target: ClusterTarget) -> str | None:
        if self.scope == "test":
            return target.namespace
        return target.driver_namespace if self.scope == "driver" else None


def _kind(
    label: str,
    group: str,
    kind: str,
    describe: Callable[[Mapping[str, Any]], str],
    scope: Literal["cluster", "test", "driver"],
) -> ObjectKind:
    resource = plain_resource(group, "v1", kind, label, namespaced=scope != "cluster")
    return ObjectKind(label, resource, describe, scope)


OBJECT_KINDS = (
    _kind("pods", "", "Pod", describe_pod, "test"),
    _kind("persistentvolumeclaims", "", "PersistentVolumeClaim", describe_claim, "test"),
    _kind("persistentvolumes", "", "PersistentVolume", describe_volume, "cluster"),
    _kind("volumeattachments", STORAGE, "VolumeAttachment", describe_attachment, "cluster"),
    _kind("csistoragecapacities", STORAGE, "CSIStorageCapacity", describe_capacity, "driver"),
    _kind("csinodes", STORAGE, "CSINode", describe_csinode, "cluster"),
    _kind("csidrivers", STORAGE, "CSIDriver", describe_csidriver, "cluster"),
)
"""What the objects section shows, in this order; "test" kinds only when the test
has a namespace."""


# -- collection ----------------------------------------------------------------------


def collect(
    target: ClusterTarget,
    limits: Limits | None = None,
    *,
    kube: Callable[[Path], KubeLister] = connect_kube,
    files_at: str = "",
) -> Diagnostics:
    """Everything the module docstring lists, the overview section first; never
    raises for a broken source. ``files_at`` (where the files will be written) is
    named in the sections."""
    limits = limits or Limits()
    started = time.monotonic()
    result = Diagnostics()
    client = _Kube(lambda: kube(target.kubeconfig))

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
    client: _Kube,
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
    client: _Kube,
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
    client: _Kube,
    kind: ObjectKind,
    namespace: str | None,
    title: str,
    limits: Limits,
    result: Diagnostics,
) -> str:
    objects = client.list(kind.resource, namespace=namespace)
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
