"""Failure diagnostics and the run summary of the conformance suites (pytest hooks).

Registered by ``csi_harness._internal.pytest_plugin`` in its ``pytest_configure``.

* ``@pytest.mark.scenario(feature, scenario)`` says what a test proves. End-to-end
  tests without it (marked ``e2e``, or using the ``cluster`` fixture) count as a
  scenario of their module. Both become the JUnit properties ``feature`` and
  ``scenario``.
* A test that uses the ``cluster`` fixture and fails (or errors in setup) gets
  the cluster's state attached to its report (``csi_harness._internal.diagnostics``): sections
  titled ``Captured stdout diagnostics: ...``, shown after its traceback and, with
  ``junit_logging = system-out``, written to the JUnit XML. The full texts go to
  ``reports/diagnostics/<test id>/``.
* At the end, a table of feature x scenario x result, grouped by feature, with
  counts and the session's wall time (cluster bring-up included), in the terminal
  and in ``reports/summary.md``.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from csi_harness._internal import diagnostics

MARKER = "scenario"
CLUSTER_FIXTURE = "cluster"
NAMESPACE_FIXTURE = "namespace"
DRIVER_FIXTURE = "driver"
BRING_UP_PROPERTY = "cluster_bring_up_seconds"
REPORTS_DIR = "reports"
E2E_MARKER = "e2e"
"""The pytest plugin's marker of a test that runs against a real cluster."""
SECTION_PREFIX = "Captured stdout diagnostics"
"""pytest puts sections whose title starts with "Captured stdout" in ``report.capstdout``,
which the JUnit XML writes as system-out."""

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_COLOURS = {
    "": {"bold": True},
    "passed": {"green": True},
    "failed": {"red": True, "bold": True},
    "error": {"red": True, "bold": True},
    "skipped": {"yellow": True},
    "xfailed": {"yellow": True},
    "xpassed": {"yellow": True, "bold": True},
}


@dataclass
class Result:
    feature: str
    scenario: str
    outcome: str = "passed"
    detail: str = ""
    """Why it was skipped or xfailed, what failed."""
    seconds: float | None = None
    """The call phase: the test itself, without fixtures."""
    diagnostics: str | None = None
    """The directory with the failure's diagnostics, relative to reports/."""


@dataclass
class RunRecord:
    reports: Path
    started: float = field(default_factory=time.monotonic)
    cluster_seconds: float | None = None
    results: dict[str, Result] = field(default_factory=dict)
    """nodeid -> result, in the order the tests ran."""


# -- which scenario a test is --------------------------------------------------------


def scenario_of(item: pytest.Item) -> tuple[str, str] | None:
    """(feature, scenario) from the marker (a parametrized test's scenario gets its
    parameter id); for another end-to-end test (marked ``e2e``, or using the
    ``cluster`` fixture), its module and its name; None for every other test."""
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        feature, scenario = _marker_arguments(item.nodeid, marker)
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            # One row per parameter set, named like pytest names the test.
            scenario = f"{scenario} [{callspec.id}]"
        return feature, scenario
    end_to_end = item.get_closest_marker(E2E_MARKER) is not None
    if end_to_end or CLUSTER_FIXTURE in getattr(item, "fixturenames", ()):
        return item.path.stem, item.name
    return None


def _marker_arguments(nodeid: str, marker: pytest.Mark) -> tuple[str, str]:
    arguments = dict(zip(("feature", "scenario"), marker.args, strict=False))
    arguments.update(marker.kwargs)
    feature, scenario = arguments.get("feature"), arguments.get("scenario")
    if (
        len(marker.args) + len(marker.kwargs) != 2
        or not isinstance(feature, str)
        or not isinstance(scenario, str)
        or not feature.strip()
        or not scenario.strip()
    ):
        raise pytest.UsageError(
            f"{nodeid}: @pytest.mark.scenario takes two non-empty strings, "
            f"(feature, scenario); got args={marker.args!r} kwargs={marker.kwargs!r}"
        )
    return feature.strip(), scenario.strip()


def diagnostics_dirname(nodeid: str) -> str:
    """A directory name for a test: its node id with every unsafe run of characters
    turned into "_", shortened (with a hash, to stay unique) when long."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_.") or "test"
    if len(name) > 120:
        digest = hashlib.sha256(nodeid.encode()).hexdigest()[:10]
        name = f"{name[:100]}-{digest}"
    return name


# -- hooks ---------------------------------------------------------------------------

PLUGIN_NAME = "csi_harness_reporting"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scenario(feature, scenario): what the test proves, for the run summary "
        "and the JUnit properties",
    )
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(ConformanceReporter(config), PLUGIN_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if reporter is not None:
        config.pluginmanager.unregister(reporter, PLUGIN_NAME)


class ConformanceReporter:
    """The hooks, with this run's record (one instance per pytest config)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # Each provider's run keeps its own summary and diagnostics (CI runs two).
        provider = config.getoption("--csi-cluster", "local")
        reports = config.rootpath / REPORTS_DIR
        self.record = RunRecord(reports=reports if provider == "local" else reports / provider)
        self._bring_up_reported = not hasattr(config, "workerinput")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.record.started = time.monotonic()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            found = scenario_of(item)
            if found is not None:
                item.user_properties += [("feature", found[0]), ("scenario", found[1])]

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any]
    ) -> Generator[None, object, object]:
        # A fixture's error passes through here: keep this frame out of its traceback.
        __tracebackhide__ = True
        if fixturedef.argname != CLUSTER_FIXTURE:
            return (yield)
        started = time.monotonic()
        try:
            cluster = yield
        except BaseException:
            self.record.cluster_seconds = time.monotonic() - started
            raise
        if not getattr(cluster, "attached", False):  # an attached cluster was up already
            self.record.cluster_seconds = time.monotonic() - started
        return cluster

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self.record.cluster_seconds is not None and not self._bring_up_reported:
            # A pytest-xdist worker brought the cluster up: tell the controller, which
            # writes the summary, through the report (its only channel).
            report.user_properties.append((BRING_UP_PROPERTY, self.record.cluster_seconds))
            self._bring_up_reported = True
        if not (report.failed and report.when in ("setup", "call")):
            return report
        funcargs: dict[str, Any] = getattr(item, "funcargs", {})
        cluster = funcargs.get(CLUSTER_FIXTURE)
        if cluster is None:
            return report
        namespace = funcargs.get(NAMESPACE_FIXTURE)
        sections, written = self.diagnose(
            report,
            cluster,
            namespace if isinstance(namespace, str) else None,
            funcargs.get(DRIVER_FIXTURE),
        )
        for title, text in sections:
            report.sections.append((f"{SECTION_PREFIX}: {title}", text))
            # Again for the teardown report, whose "Captured stdout" sections the
            # JUnit XML writes as the test's system-out.
            item.add_report_section(f"diagnostics: {title}", "stdout", text)
        if written is not None:
            # The JUnit XML takes a test's properties from its teardown report too.
            item.user_properties.append(("diagnostics", written))
            report.user_properties.append(("diagnostics", written))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # The labels come from the report, not the item: that works under xdist too.
        labels = dict(report.user_properties)
        bring_up = labels.get(BRING_UP_PROPERTY)
        if isinstance(bring_up, float) and self.record.cluster_seconds is None:
            self.record.cluster_seconds = bring_up
        feature, scenario = labels.get("feature"), labels.get("scenario")
        if not isinstance(feature, str) or not isinstance(scenario, str):
            return
        result = self.record.results.setdefault(report.nodeid, Result(feature, scenario))
        merge(result, report)
        directory = labels.get("diagnostics")
        if isinstance(directory, str):
            result.diagnostics = directory

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        record = self.record
        if not record.results:
            return
        wall = time.monotonic() - record.started
        results = list(record.results.values())
        terminalreporter.write_sep("=", "conformance summary")
        for line, outcome in summary_lines(results, wall, record.cluster_seconds):
            terminalreporter.write_line(line, **_COLOURS.get(outcome, {}))
        path = record.reports / "summary.md"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(summary_markdown(results, wall, record.cluster_seconds))
        except OSError as error:
            terminalreporter.write_line(f"summary not written to {path}: {error}", red=True)
            return
        terminalreporter.write_line(f"summary written to {self._shown(path)}")

    def diagnose(
        self, report: pytest.TestReport, cluster: Any, namespace: str | None, driver: Any = None
    ) -> tuple[list[tuple[str, str]], str | None]:
        """The cluster's state as (title, text) sections, its files written under
        reports/diagnostics/<test id>/, and that directory relative to reports/
        (None when nothing was written)."""
        name = diagnostics_dirname(report.nodeid)
        directory = self.record.reports / "diagnostics" / name
        shown = self._shown(directory)
        try:
            with diagnostics.cluster_target(cluster, namespace, driver) as target:
                found = diagnostics.collect(target, files_at=shown)
        except Exception as error:
            # A fixture value that is no Cluster; collect() itself never raises.
            return [("overview", f"(not collected: {diagnostics.describe_error(error)})\n")], None
        written: str | None = f"diagnostics/{name}"
        try:
            diagnostics.write(found, directory, {"failure.txt": report.longreprtext + "\n"})
        except OSError as error:
            overview = found.sections[0]
            found.sections[0] = diagnostics.Section(
                overview.title, f"{overview.text}\n(files not written to {shown}: {error})"
            )
            written = None
        return [(s.title, s.text + "\n") for s in found.sections], written

    def _shown(self, path: Path) -> str:
        root = self.config.rootpath
        return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


# -- results -------------------------------------------------------------------------


def merge(result: Result, report: pytest.TestReport) -> None:
    """Fold one phase's report into the test's result: a failure in any phase wins,
    a skip or xfail in setup or call decides, teardown only adds errors."""
    xfail = getattr(report, "wasxfail", None)
    if report.when == "call":
        result.seconds = report.duration
    if report.failed:
        if report.when == "call":
            result.outcome, result.detail = "failed", _failure_message(report)
        elif result.outcome not in ("failed", "error"):
            result.outcome = "error"
            result.detail = f"{report.when} error: {_failure_message(report)}"
    elif report.skipped:
        if xfail is not None:
            result.outcome, result.detail = "xfailed", str(xfail)
        else:
            result.outcome, result.detail = "skipped", _skip_reason(report)
    elif report.when == "call" and xfail is not None:
        result.outcome, result.detail = "xpassed", str(xfail)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return reason.removeprefix("Skipped: ").removeprefix("Skipped")
    return str(longrepr or "")


def _failure_message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    text = str(message) if message else report.longreprtext.strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return diagnostics.clip(lines[0], 160) if lines else ""


# -- the summary ---------------------------------------------------------------------


def by_feature(results: Iterable[Result]) -> dict[str, list[Result]]:
    grouped: dict[str, list[Result]] = {}
    for result in results:
        grouped.setdefault(result.feature, []).append(result)
    return grouped


def counts(results: Iterable[Result]) -> str:
    """The outcomes counted, in a fixed order: "2 passed, 1 failed"."""
    tally = {outcome: 0 for outcome in OUTCOMES}
    for result in results:
        tally[result.outcome] = tally.get(result.outcome, 0) + 1
    return ", ".join(f"{n} {outcome}" for outcome, n in tally.items() if n)


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m {rest:04.1f}s"


def _totals(results: list[Result], wall: float, cluster_seconds: float | None) -> str:
    features = len({r.feature for r in results})
    line = (
        f"{_count(len(results), 'test')} in {_count(features, 'feature')}: {counts(results)}; "
        f"session wall time {format_seconds(wall)}"
    )
    if cluster_seconds is not None:
        line += f" (cluster bring-up {format_seconds(cluster_seconds)})"
    return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _detail(result: Result) -> str:
    detail = result.detail
    if result.diagnostics:
        detail = f"{detail} [{REPORTS_DIR}/{result.diagnostics}]".strip()
    return detail


def summary_lines(
    results: list[Result], wall: float, cluster_seconds: float | None
) -> list[tuple[str, str]]:
    """The terminal table: (line, outcome) pairs, the outcome choosing the colour
    ("" for the feature and total lines)."""
    width = max((len(r.scenario) for r in results), default=0) + 2
    lines: list[tuple[str, str]] = []
    for feature, group in by_feature(results).items():
        lines.append((f"{feature} ({counts(group)})", ""))
        for result in group:
            row = (
                f"  {result.scenario:<{width}}{result.outcome:<9}"
                f"{format_seconds(result.seconds):>7}  {_detail(result)}"
            )
            lines.append((row.rstrip(), result.outcome))
    lines.append((_totals(results, wall, cluster_seconds), ""))
    return lines


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def summary_markdown(results: list[Result], wall: float, cluster_seconds: float | None) -> str:
    lines = [
        "# Conformance summary",
        "",
        _totals(results, wall, cluster_seconds) + ".",
        "",
        "| feature | scenario | result | time | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for feature, group in by_feature(results).items():
        for index, result in enumerate(group):
            first = f"**{_cell(feature)}** ({counts(group)})" if index == 0 else ""
            detail = _cell(result.detail)
            if result.diagnostics:
                link = f"[diagnostics]({result.diagnostics}/)"
                detail = f"{detail} {link}".strip()
            cells = [
                first,
                _cell(result.scenario),
                result.outcome,
                format_seconds(result.seconds),
                detail,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
