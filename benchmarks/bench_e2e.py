"""Time-to-verdict benchmark of the mission suites: `python -m pytest`, N times, from no cluster.

Each run is a fresh pytest session that brings the local cluster up and tears it down (the
harness's session fixture does both), so a run's wall time is what a developer waits for a
verdict. Per run: the wall time of the pytest process, the cluster bring-up, the time of each
suite, the outcome counts, the exit code and the 10 slowest tests; over the runs: median,
min and max wall time and the longest streak of runs with 0 failures. Everything goes to
<out>/results.json; a Markdown block for docs/benchmarks.md to stdout and <out>/results.md.

    python benchmarks/bench_e2e.py [--runs 3] [--out DIR] [--pytest-args "-n 4 --csi-cluster kind"]
                                   [--marker mission] [--stop-on-failure] [--dry-run]

pytest's output goes to <out>/run-<i>/pytest.log, its JUnit XML beside it. This module is
also a pytest plugin (`-p benchmarks.bench_e2e`, part of the command) that writes when each
test phase started and stopped to <out>/run-<i>/timings.jsonl: the JUnit XML has durations
only, and under pytest-xdist a suite's elapsed time (its span) needs the timestamps.
Exit status 0 only if every run exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from csi_harness._internal.reporting import format_seconds

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "benchmarks.bench_e2e"
TIMINGS_ENV = "CSI_MOCK_BENCH_E2E_TIMINGS"
"""Where the plugin writes the test phases' timestamps; unset, it records nothing."""
DEFAULT_OUT = Path("/var/tmp/csi-mock-bench-e2e")
SLOWEST = 10
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")
EXIT_MEANINGS = {
    0: "all passed",
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}

# The harness's progress lines (csi_harness/_internal/pytest_plugin/,
# csi_harness/_internal/providers/local/cluster.py) and the
# totals line of its conformance summary (csi_harness/_internal/reporting.py), in the log and
# summary.md.
LOCAL_READY = re.compile(r"cluster ready in (\d+(?:\.\d+)?)s")
HARNESS_BRING_UP = re.compile(r"\(cluster bring-up ((?:\d+m )?\d+(?:\.\d+)?s)\)")
KIND_READY = re.compile(r"kind cluster ready: (.*)$", re.MULTILINE)
KIND_STEP = re.compile(r"(\S+) (\d+(?:\.\d+)?)s")
DURATION = re.compile(r"(?:(\d+)m )?(\d+(?:\.\d+)?)s")


@dataclass
class Case:
    """One JUnit testcase."""

    test: str
    """As a pytest node id: tests/e2e/test_topology.py::test_name[param]."""
    suite: str
    """The module, dotted as in the JUnit classname: tests.e2e.test_topology."""
    outcome: str
    seconds: float


@dataclass
class SuiteTime:
    suite: str
    tests: int
    seconds: float
    """The sum of its tests' JUnit times (setup, call and teardown)."""
    span: float | None
    """From its first test's setup start to its last test's teardown end."""


@dataclass
class Run:
    run: int
    command: list[str]
    exit_code: int
    wall: float
    bring_up: float | None
    bring_up_source: str | None
    outcomes: dict[str, int] | None
    """None when pytest wrote no JUnit XML."""
    tests_done: float | None = None
    """Seconds from the start to the last test's last phase: the verdict is known then,
    before the session tears its cluster down."""
    suites: list[SuiteTime] = field(default_factory=list)
    slowest: list[Case] = field(default_factory=list)
    log: str = ""

    @property
    def green(self) -> bool:
        return self.exit_code == 0


@dataclass
class Summary:
    runs: int
    green_runs: int
    consecutive_green: int
    """The longest streak of consecutive runs that exited 0."""
    median_wall: float
    min_wall: float
    max_wall: float
    median_run: int
    """The run whose wall time is the (lower) median: its suites and slowest tests are shown."""


# -- the plugin, inside the measured pytest session ----------------------------------
# Loaded with -p, every function of this module named pytest_* is taken for a hook:
# only these two may be.


class TimingRecorder:
    """Appends each test phase's start and stop (epoch seconds) as a JSON line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        line = {"nodeid": report.nodeid, "when": report.when, "start": report.start}
        line["stop"] = report.stop
        with self.path.open("a") as sink:
            sink.write(json.dumps(line) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(TIMINGS_ENV)
    # Under xdist the controller receives every worker's reports; workers record nothing.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(TimingRecorder(Path(path)), "csi-mock-bench-e2e-timings")


# -- reading one run's files ---------------------------------------------------------


def module_of(classname: str) -> str:
    """The module of a JUnit classname: trailing CamelCase parts are test classes."""
    parts = classname.split(".")
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    return ".".join(parts)


def module_of_nodeid(nodeid: str) -> str:
    """tests/e2e/test_topology.py::test_x[a] -> tests.e2e.test_topology (as JUnit spells it)."""
    return nodeid.split("::", 1)[0].removesuffix(".py").replace("/", ".")


def read_junit(text: str) -> list[Case]:
    """The testcases of a pytest JUnit XML. An xfail is written as <skipped
    type="pytest.xfail">: counted as xfailed. A test with a failure and a teardown error
    counts as failed."""
    cases = []
    for testcase in ET.fromstring(text).iter("testcase"):
        classname = testcase.get("classname", "")
        suite = module_of(classname)
        classes = classname[len(suite) :].lstrip(".").split(".") if classname != suite else []
        path = suite.replace(".", "/") + ".py"
        test = "::".join([path, *filter(None, classes), testcase.get("name", "")])
        cases.append(Case(test, suite, outcome_of(testcase), float(testcase.get("time", 0))))
    return cases


def outcome_of(testcase: ET.Element) -> str:
    if testcase.find("failure") is not None:
        return "failed"
    if testcase.find("error") is not None:
        return "error"
    skipped = testcase.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def outcome_counts(cases: list[Case]) -> dict[str, int]:
    counts = dict.fromkeys(OUTCOMES, 0)
    for case in cases:
        counts[case.outcome] += 1
    return counts


def read_spans(text: str) -> dict[str, float]:
    """Suite -> seconds from its first phase's start to its last phase's stop, from the
    plugin's JSON lines."""
    bounds: dict[str, tuple[float, float]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        phase = json.loads(line)
        suite = module_of_nodeid(phase["nodeid"])
        start, stop = bounds.get(suite, (phase["start"], phase["stop"]))
        bounds[suite] = (min(start, phase["start"]), max(stop, phase["stop"]))
    return {suite: stop - start for suite, (start, stop) in bounds.items()}


def last_stop(text: str) -> float | None:
    """The epoch second the last test phase stopped, from the plugin's JSON lines."""
    stops = [json.loads(line)["stop"] for line in text.splitlines() if line.strip()]
    return max(stops, default=None)


def suite_times(cases: list[Case], spans: dict[str, float]) -> list[SuiteTime]:
    """Per suite, in the order the JUnit XML lists them."""
    suites: dict[str, SuiteTime] = {}
    for case in cases:
        suite = suites.setdefault(case.suite, SuiteTime(case.suite, 0, 0.0, spans.get(case.suite)))
        suite.tests += 1
        suite.seconds += case.seconds
    return list(suites.values())


def slowest(cases: list[Case], n: int = SLOWEST) -> list[Case]:
    return sorted(cases, key=lambda case: case.seconds, reverse=True)[:n]


def parse_duration(text: str) -> float:
    """The inverse of csi_harness._internal.reporting.format_seconds: "5m 51.6s" -> 351.6."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r}")
    return int(match[1] or 0) * 60 + float(match[2])


def bring_up_time(log: str, summary: str | None = None) -> tuple[float | None, str | None]:
    """(seconds, where they were read) for the cluster bring-up, or (None, None). The local
    provider's "cluster ready in 8.9s" first; then the harness's "(cluster bring-up 8.9s)"
    from the terminal summary in the log or from summary.md (kind and existing clusters
    too); then the sum of the steps of "kind cluster ready: create 60.1s, ...". Under
    pytest-xdist a line may appear once or not at all; with several, the longest counts."""
    if found := LOCAL_READY.findall(log):
        return max(float(s) for s in found), "log: cluster ready in"
    for text, source in ((log, "log: conformance summary"), (summary or "", "summary.md")):
        if found := HARNESS_BRING_UP.findall(text):
            return max(parse_duration(s) for s in found), source
    if found := KIND_READY.findall(log):
        steps = [sum(float(s) for _, s in KIND_STEP.findall(line)) for line in found]
        return round(max(steps), 1), "log: kind cluster ready"
    return None, None


def fresh_summary(reports: Path, since: float, keep: Path) -> str | None:
    """The harness's summary.md written after `since` (reports/summary.md for the local
    provider, reports/<provider>/summary.md for others), copied to `keep`. Another pytest
    session in this tree could have written it meanwhile: only a fallback."""
    candidates = [reports / "summary.md", *reports.glob("*/summary.md")]
    fresh = [path for path in candidates if path.is_file() and path.stat().st_mtime >= since]
    if not fresh:
        return None
    newest = max(fresh, key=lambda path: path.stat().st_mtime)
    shutil.copyfile(newest, keep)
    return keep.read_text()


# -- running -------------------------------------------------------------------------


def session_command(run_dir: Path, marker: str, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", PLUGIN]
    if marker:
        command += ["-m", marker]
    return [*command, f"--junitxml={run_dir / 'junit.xml'}", *extra]


def run_once(index: int, command: list[str], run_dir: Path, cwd: Path = ROOT) -> Run:
    """One pytest session, its output to run_dir/pytest.log, then its files read."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log, junit, timings = (run_dir / name for name in ("pytest.log", "junit.xml", "timings.jsonl"))
    python_path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = os.environ | {TIMINGS_ENV: str(timings), "PYTHONPATH": os.pathsep.join(python_path)}
    since = time.time()
    started = time.perf_counter()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink
        )
        try:
            exit_code = process.wait()
        except KeyboardInterrupt:
            # The terminal's SIGINT reached pytest too: let it tear its cluster down.
            process.wait()
            raise
    wall = time.perf_counter() - started
    summary = fresh_summary(cwd / "reports", since, run_dir / "summary.md")
    bring_up, source = bring_up_time(log.read_text(errors="replace"), summary)
    run = Run(index, command, exit_code, wall, bring_up, source, None, log=str(log))
    done = last_stop(timings.read_text()) if timings.is_file() else None
    run.tests_done = done - since if done is not None else None
    if junit.is_file():
        cases = read_junit(junit.read_text())
        spans = read_spans(timings.read_text()) if timings.is_file() else {}
        run.outcomes = outcome_counts(cases)
        run.suites = suite_times(cases, spans)
        run.slowest = slowest(cases)
    return run


def progress_line(run: Run, runs: int) -> str:
    meaning = EXIT_MEANINGS.get(run.exit_code, "pytest's exit code")
    counts = ", ".join(f"{n} {o}" for o, n in (run.outcomes or {}).items() if n) or "no JUnit XML"
    bring_up = format_seconds(run.bring_up) or "?"
    line = (
        f"run {run.run}/{runs}: exit {run.exit_code} ({meaning}), {format_seconds(run.wall)}"
        f" wall, bring-up {bring_up}, last test done {format_seconds(run.tests_done) or '?'};"
        f" {counts}; log {run.log}"
    )
    if run.exit_code == 5:
        line += (
            "\n  no tests collected: does the marker select any test? (-m mission needs the"
            " mission suites marked `mission`; --marker '' drops -m, --pytest-args adds paths)"
        )
    return line


# -- summarising ---------------------------------------------------------------------


def longest_green_streak(exit_codes: list[int]) -> int:
    best = current = 0
    for code in exit_codes:
        current = current + 1 if code == 0 else 0
        best = max(best, current)
    return best


def summarise(runs: list[Run]) -> Summary:
    walls = [run.wall for run in runs]
    median_low = statistics.median_low(walls)
    return Summary(
        runs=len(runs),
        green_runs=sum(run.green for run in runs),
        consecutive_green=longest_green_streak([run.exit_code for run in runs]),
        median_wall=statistics.median(walls),
        min_wall=min(walls),
        max_wall=max(walls),
        median_run=next(run.run for run in runs if run.wall == median_low),
    )


def memory_gib(meminfo: str) -> float | None:
    match = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.MULTILINE)
    return round(int(match[1]) / 2**20, 1) if match else None


def git_commit() -> str:
    """The short commit, with "+dirty" when tracked files differ from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout
    except OSError:
        return "unknown"
    return f"{commit}+dirty" if commit and status.strip() else commit or "unknown"


def machine() -> dict[str, object]:
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        meminfo = ""
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(meminfo),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "commit": git_commit(),
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }


def markdown(host: Mapping[str, object], command: str, runs: list[Run], summary: Summary) -> str:
    lines = [
        f"### Mission suites, time to verdict ({datetime.now():%Y-%m-%d})",
        "",
        f"{host['cores']} cores, {host['memory_gib']} GiB, Linux {host['kernel']},"
        f" Python {host['python']}, commit {host['commit']},"
        f" load average {host['load_average_at_start']} at start. Each run from no cluster:",
        f"`{command}`",
        "",
        "| run | exit | wall | bring-up | last test done | " + " | ".join(OUTCOMES) + " |",
        "| ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in OUTCOMES) + " |",
    ]
    for run in runs:
        counts = [str((run.outcomes or {}).get(o, "-")) for o in OUTCOMES]
        lines.append(
            f"| {run.run} | {run.exit_code} | {format_seconds(run.wall)}"
            f" | {format_seconds(run.bring_up) or '-'}"
            f" | {format_seconds(run.tests_done) or '-'} | " + " | ".join(counts) + " |"
        )
    lines += [
        "",
        f"**Median wall time {format_seconds(summary.median_wall)} of {summary.runs} runs"
        f" (min {format_seconds(summary.min_wall)}, max {format_seconds(summary.max_wall)});"
        f" {summary.green_runs} of {summary.runs} runs green;"
        f" {summary.consecutive_green} consecutive runs with 0 failures.**",
    ]
    median = next(run for run in runs if run.run == summary.median_run)
    if not median.suites:
        lines += ["", f"Run {median.run} (the median run) wrote no JUnit XML."]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        f"Per suite, run {median.run} (the median run):",
        "",
        "| suite | tests | sum of test times | span |",
        "| --- | ---: | ---: | ---: |",
    ]
    for suite in median.suites:
        lines.append(
            f"| {suite.suite} | {suite.tests} | {format_seconds(suite.seconds)}"
            f" | {format_seconds(suite.span) or '-'} |"
        )
    lines += [
        "",
        "A test's time is setup, call and teardown, so the first suite's includes the cluster"
        " bring-up and the last one's the teardown. With pytest-xdist (`-n`) tests run"
        " concurrently: suite times overlap and add up to more than the wall time; the span"
        " (first test's start to last test's end) is the suite's elapsed time.",
        "",
        f"Slowest {len(median.slowest)} tests, run {median.run}:",
        "",
        "| test | outcome | time |",
        "| --- | --- | ---: |",
    ]
    for case in median.slowest:
        lines.append(f"| `{case.test}` | {case.outcome} | {format_seconds(case.seconds)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="pytest sessions, one after another")
    parser.add_argument(
        "--out", type=Path, help=f"results directory (default {DEFAULT_OUT}/<timestamp>)"
    )
    parser.add_argument(
        "--pytest-args", default="", help='more pytest arguments, e.g. "-n 4 --csi-cluster kind"'
    )
    parser.add_argument(
        "--marker", default="mission", help="the -m expression ('' for none; default mission)"
    )
    parser.add_argument(
        "--stop-on-failure", action="store_true", help="stop after the first run not exiting 0"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    out = (args.out or DEFAULT_OUT / f"{datetime.now():%Y%m%d-%H%M%S}").resolve()
    extra = shlex.split(args.pytest_args)
    commands = [
        session_command(out / f"run-{i}", args.marker, extra) for i in range(1, args.runs + 1)
    ]
    if args.dry_run:
        print(f"# cwd {ROOT}; results in {out}")
        for command in commands:
            print(shlex.join(command))
        return 0
    host = machine()
    runs: list[Run] = []
    for i, command in enumerate(commands, start=1):
        try:
            run = run_once(i, command, out / f"run-{i}")
        except KeyboardInterrupt:
            print(f"run {i}/{args.runs}: interrupted, not counted", file=sys.stderr)
            break
        print(progress_line(run, args.runs), file=sys.stderr)
        runs.append(run)
        if args.stop_on_failure and not run.green:
            print(f"stopping after run {i}: --stop-on-failure", file=sys.stderr)
            break
    if not runs:
        return 130
    summary = summarise(runs)
    shown = ["python", *session_command(Path("OUT/run-N"), args.marker, extra)[1:]]
    text = markdown(host, shlex.join(shown), runs, summary)
    results = {
        "machine": host,
        "cwd": str(ROOT),
        "runs": [asdict(run) | {"green": run.green} for run in runs],
        "summary": asdict(summary),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(text)
    print(text)
    if len(runs) < args.runs and not args.stop_on_failure:
        print(f"interrupted: {len(runs)} of {args.runs} runs", file=sys.stderr)
        return 1
    if summary.green_runs < len(runs):
        print(
            f"{len(runs) - summary.green_runs} of {len(runs)} runs did not exit 0", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
