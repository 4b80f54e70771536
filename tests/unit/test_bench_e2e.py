"""The time-to-verdict benchmark of the mission suites (benchmarks/bench_e2e.py): reading a
run's JUnit XML, log and timings, and summarising runs. One test runs a real, tiny pytest
session through the benchmark (no cluster: the harness plugin is switched off)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_e2e
from benchmarks.bench_e2e import Run, SuiteTime
from csi_harness._internal.reporting import format_seconds

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="2"
 tests="6" time="30.0">
<testcase classname="tests.e2e.test_capacity_tracking" name="test_binds" time="12.5"/>
<testcase classname="tests.e2e.test_capacity_tracking" name="test_pending[mirrored]" time="2.0">
 <failure message="claim got bound">assert 'Bound' == 'Pending'</failure></testcase>
<testcase classname="tests.e2e.test_skip_attach.TestFlip" name="test_flip" time="95.25">
 <skipped type="pytest.xfail" message="kubelet caches it"/></testcase>
<testcase classname="tests.e2e.test_skip_attach" name="test_zones" time="0.01">
 <skipped type="pytest.skip" message="needs two zones">skipped</skipped></testcase>
<testcase classname="tests.e2e.test_skip_attach" name="test_teardown" time="1.0">
 <error message="failed on teardown">boom</error></testcase>
<testcase classname="tests.e2e.test_volume_limits" name="test_limit" time="3.0"/>
</testsuite></testsuites>
"""

SUMMARY_MD = """# Conformance summary

37 tests in 5 features: 36 passed, 1 xfailed; session wall time 5m 51.6s (cluster bring-up 8.9s).
"""


def run(index: int, wall: float, exit_code: int = 0, **fields: Any) -> Run:
    outcomes = dict.fromkeys(bench_e2e.OUTCOMES, 0) | {"passed": 1}
    return Run(index, ["python"], exit_code, wall, 8.9, "log", outcomes, **fields)


def test_junit_cases_are_named_as_node_ids_with_their_module_as_suite() -> None:
    cases = bench_e2e.read_junit(JUNIT)

    assert [case.test for case in cases][1:3] == [
        "tests/e2e/test_capacity_tracking.py::test_pending[mirrored]",
        "tests/e2e/test_skip_attach.py::TestFlip::test_flip",
    ]
    assert cases[2].suite == "tests.e2e.test_skip_attach"
    assert cases[2].seconds == 95.25


def test_junit_outcomes_count_xfail_apart_from_skip() -> None:
    counts = bench_e2e.outcome_counts(bench_e2e.read_junit(JUNIT))

    assert counts == {"passed": 2, "failed": 1, "error": 1, "skipped": 1, "xfailed": 1}


def test_a_failed_test_with_a_teardown_error_counts_as_failed() -> None:
    xml = """<testsuite><testcase classname="t" name="x" time="1">
    <failure message="a"/><error message="b"/></testcase></testsuite>"""

    assert [case.outcome for case in bench_e2e.read_junit(xml)] == ["failed"]


def test_suite_times_sum_the_test_times_per_module_with_its_span() -> None:
    cases = bench_e2e.read_junit(JUNIT)

    suites = bench_e2e.suite_times(cases, {"tests.e2e.test_skip_attach": 90.0})

    for suite in suites:
        suite.seconds = round(suite.seconds, 2)
    assert suites == [
        SuiteTime("tests.e2e.test_capacity_tracking", 2, 14.5, None),
        SuiteTime("tests.e2e.test_skip_attach", 3, 96.26, 90.0),
        SuiteTime("tests.e2e.test_volume_limits", 1, 3.0, None),
    ]


def test_spans_run_from_a_suites_first_start_to_its_last_stop() -> None:
    # Two workers: the suites overlap in time.
    lines = [
        '{"nodeid": "tests/e2e/test_a.py::test_1", "when": "setup", "start": 100.0, "stop": 101}',
        '{"nodeid": "tests/e2e/test_b.py::test_1[x]", "when": "call", "start": 102, "stop": 150}',
        '{"nodeid": "tests/e2e/test_a.py::test_2", "when": "teardown", "start": 130, "stop": 140}',
        "",
    ]

    spans = bench_e2e.read_spans("\n".join(lines))

    assert spans == {"tests.e2e.test_a": 40.0, "tests.e2e.test_b": 48.0}


def test_slowest_are_the_longest_tests_longest_first() -> None:
    cases = bench_e2e.read_junit(JUNIT)

    assert [case.seconds for case in bench_e2e.slowest(cases, 3)] == [95.25, 12.5, 3.0]
    assert len(bench_e2e.slowest(cases)) == 6


@pytest.mark.parametrize("seconds", [0.0, 8.9, 59.9, 60.0, 126.8, 351.6, 3725.0])
def test_parse_duration_reads_what_the_harness_writes(seconds: float) -> None:
    assert bench_e2e.parse_duration(format_seconds(seconds)) == pytest.approx(seconds)


def test_bring_up_is_read_from_the_local_providers_ready_line() -> None:
    log = "[csi-harness] cluster ready in 8.9s; KUBECONFIG=/var/tmp/x/kubeconfig\n"

    assert bench_e2e.bring_up_time(log, SUMMARY_MD) == (8.9, "log: cluster ready in")


def test_bring_up_falls_back_to_the_harness_summary_in_the_log_then_summary_md() -> None:
    log = "3 tests in 2 features: 3 passed; session wall time 4m 13.7s (cluster bring-up 2m 06.8s)"

    assert bench_e2e.bring_up_time(log) == (126.8, "log: conformance summary")
    assert bench_e2e.bring_up_time("no such line", SUMMARY_MD) == (8.9, "summary.md")


def test_bring_up_of_kind_is_the_sum_of_its_steps_when_nothing_else_says() -> None:
    log = "[csi-harness] kind cluster ready: image 0.2s, create 61.3s, load 10.0s\n"

    assert bench_e2e.bring_up_time(log) == (71.5, "log: kind cluster ready")


def test_bring_up_is_none_when_no_line_tells_it() -> None:
    assert bench_e2e.bring_up_time("collected 0 items\n", None) == (None, None)


def test_fresh_summary_ignores_a_summary_from_before_the_run(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "kind").mkdir(parents=True)
    (reports / "summary.md").write_text("old")
    os.utime(reports / "summary.md", (1000, 1000))
    keep = tmp_path / "kept.md"

    assert bench_e2e.fresh_summary(reports, 2000, keep) is None
    (reports / "kind" / "summary.md").write_text(SUMMARY_MD)
    assert bench_e2e.fresh_summary(reports, 2000, keep) == SUMMARY_MD
    assert keep.read_text() == SUMMARY_MD


@pytest.mark.parametrize(
    ("codes", "streak"),
    [([], 0), ([0, 0, 0], 3), ([1, 0, 0], 2), ([0, 1, 0, 0, 5], 2), ([1, 5], 0)],
)
def test_longest_green_streak(codes: list[int], streak: int) -> None:
    assert bench_e2e.longest_green_streak(codes) == streak


def test_summary_takes_the_median_wall_and_names_the_median_run() -> None:
    runs = [run(1, 400.0), run(2, 350.0, exit_code=1), run(3, 380.0), run(4, 390.0)]

    summary = bench_e2e.summarise(runs)

    assert (summary.median_wall, summary.min_wall, summary.max_wall) == (385.0, 350.0, 400.0)
    assert summary.median_run == 3  # the lower median of an even number of runs
    assert (summary.runs, summary.green_runs, summary.consecutive_green) == (4, 3, 2)


def test_markdown_shows_runs_summary_suites_of_the_median_run_and_slowest() -> None:
    cases = bench_e2e.read_junit(JUNIT)
    suites = bench_e2e.suite_times(cases, {})
    runs = [
        run(1, 351.6, suites=suites, slowest=bench_e2e.slowest(cases), tests_done=340.2),
        run(2, 500.0, exit_code=1),
    ]
    host = {"cores": 2, "memory_gib": 7.8, "kernel": "6.1.0", "python": "3.11.7"}
    host |= {"commit": "7b14f2a", "load_average_at_start": 0.5}

    text = bench_e2e.markdown(host, "python -m pytest -m mission", runs, bench_e2e.summarise(runs))

    assert "2 cores, 7.8 GiB, Linux 6.1.0, Python 3.11.7, commit 7b14f2a" in text
    assert "| 1 | 0 | 5m 51.6s | 8.9s | 5m 40.2s | 1 | 0 | 0 | 0 | 0 |" in text
    assert "| 2 | 1 | 8m 20.0s | 8.9s | - |" in text
    assert "**Median wall time 7m 05.8s of 2 runs (min 5m 51.6s, max 8m 20.0s)" in text
    assert "1 of 2 runs green; 1 consecutive runs with 0 failures.**" in text
    assert "| tests.e2e.test_skip_attach | 3 | 1m 36.3s | - |" in text
    assert "suite times overlap and add up to more than the wall time" in text
    assert "| `tests/e2e/test_skip_attach.py::TestFlip::test_flip` | xfailed | 1m 35.2s |" in text


def test_markdown_says_when_the_median_run_wrote_no_junit() -> None:
    runs = [run(1, 3.0, exit_code=4)]
    host = dict.fromkeys(["cores", "memory_gib", "kernel", "python", "commit"], "?")
    host["load_average_at_start"] = "?"

    text = bench_e2e.markdown(host, "python -m pytest", runs, bench_e2e.summarise(runs))

    assert text.endswith("Run 1 (the median run) wrote no JUnit XML.\n")


def test_no_tests_collected_is_explained() -> None:
    line = bench_e2e.progress_line(run(1, 2.0, exit_code=5), 3)

    assert "exit 5 (no tests collected)" in line
    assert "does the marker select any test?" in line


def test_command_has_the_marker_junit_and_extra_arguments(tmp_path: Path) -> None:
    command = bench_e2e.session_command(tmp_path, "mission", ["-n", "4"])

    assert command[:3] == [sys.executable, "-m", "pytest"]
    assert command[-5:] == ["-m", "mission", f"--junitxml={tmp_path / 'junit.xml'}", "-n", "4"]
    assert bench_e2e.session_command(tmp_path, "", [])[3:] == [
        "-p",
        "no:cacheprovider",
        "-p",
        "benchmarks.bench_e2e",
        f"--junitxml={tmp_path / 'junit.xml'}",
    ]


def test_memory_is_read_from_meminfo() -> None:
    assert bench_e2e.memory_gib("MemTotal:        8141124 kB\nMemFree: 1 kB\n") == 7.8
    assert bench_e2e.memory_gib("") is None


def test_a_run_records_exit_wall_log_outcomes_and_spans(tmp_path: Path) -> None:
    # A real pytest session through the benchmark's plugin, without the harness (no cluster).
    suite = tmp_path / "test_tiny.py"
    suite.write_text(
        textwrap.dedent(
            """
            import time, pytest

            def test_ready():
                print("[csi-harness] cluster ready in 1.5s; KUBECONFIG=/dev/null")
                time.sleep(0.2)

            def test_fails():
                assert False

            @pytest.mark.xfail(reason="known")
            def test_known():
                assert False
            """
        )
    )
    run_dir = tmp_path / "run-1"
    extra = ["-p", "no:csi_harness", "-p", "no:asyncio", "-s", str(suite)]
    command = bench_e2e.session_command(run_dir, "", extra)

    result = bench_e2e.run_once(1, command, run_dir, cwd=tmp_path)

    assert result.exit_code == 1
    assert result.wall > 0.2
    assert (result.bring_up, result.bring_up_source) == (1.5, "log: cluster ready in")
    assert result.outcomes == {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "xfailed": 1}
    [tiny] = result.suites
    assert (tiny.suite, tiny.tests) == ("test_tiny", 3)
    assert tiny.span is not None and tiny.span >= 0.2
    # The last test's last phase ends inside the run, before pytest's own exit.
    assert result.tests_done is not None and 0.2 < result.tests_done < result.wall
    assert result.slowest[0].test == "test_tiny.py::test_ready"
    assert "1 failed, 1 passed, 1 xfailed" in (run_dir / "pytest.log").read_text()


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """run_once replaced: each run exits with the next of these codes."""
    codes: list[int] = []

    def run_once(index: int, command: list[str], run_dir: Path) -> Run:
        run_dir.mkdir(parents=True)
        return run(index, 300.0 + index, exit_code=codes[index - 1])

    monkeypatch.setattr(bench_e2e, "run_once", run_once)
    return codes


def main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["bench_e2e.py", *args])
    return bench_e2e.main()


def test_exit_status_is_0_only_when_every_run_exited_0(
    fake_runs: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_runs += [0, 0, 0, 0, 5]

    assert main(monkeypatch, "--runs", "3", "--out", str(tmp_path / "green")) == 0
    assert main(monkeypatch, "--runs", "5", "--out", str(tmp_path / "red")) == 1
    assert "| 5 | 5 | 5m 05.0s |" in (tmp_path / "red" / "results.md").read_text()
    assert '"consecutive_green": 4' in (tmp_path / "red" / "results.json").read_text()


def test_stop_on_failure_stops_after_the_first_red_run(
    fake_runs: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_runs += [0, 1, 0]

    assert main(monkeypatch, "--runs", "3", "--out", str(tmp_path), "--stop-on-failure") == 1
    assert sorted(path.name for path in tmp_path.glob("run-*")) == ["run-1", "run-2"]


def test_dry_run_prints_the_commands_and_runs_nothing(
    fake_runs: list[int],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("--dry-run", "--runs", "2", "--out", str(tmp_path / "out"), "--pytest-args", "-n 4")

    assert main(monkeypatch, *args) == 0
    commands = capsys.readouterr().out.splitlines()[1:]
    assert [command.split()[-3:] for command in commands] == [
        [f"--junitxml={tmp_path}/out/run-{i}/junit.xml", "-n", "4"] for i in (1, 2)
    ]
    assert not (tmp_path / "out").exists()
