"""The report: tables (per run, and per variant over its runs against the baseline),
charts and the results file it can be made again from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from csi_harness._internal.scale.report import (
    BOUND_CHART,
    REPORT,
    UTILISATION_CHART,
    load_results,
    markdown_table,
    running_lines,
    summary_table,
    write_report,
)
from csi_harness._internal.scale.run_descriptions import setup_of
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.run_statistics import Range, Spread, summaries

GI = 1 << 30
PNG = b"\x89PNG\r\n\x1a\n"


def result(name: str, used: list[int], *, left: int = 0, exhausted: int = 0) -> RunResult:
    pods = 4
    bound = [1.0 + i for i in range(pods - left)]
    return RunResult(
        variant=name,
        title=name,
        nodes=len(used),
        pool_bytes=2 * GI,
        pods=pods,
        sizes="1Gi",
        seed=1,
        requested_bytes=pods * GI,
        storage_capacity=True,
        scheduler_gates={},
        bound_times=bound,
        all_bound_after=bound[-1] if not left else None,
        claims_left=left,
        stop_reason="all claims bound" if not left else "stuck: no claim bound for 60s",
        ended_after=70.0,
        create_volume_calls=pods - left + exhausted,
        create_volume_ok=pods - left,
        resource_exhausted=exhausted,
        exhausted_times=[2.0] * exhausted,
        reschedules=exhausted,
        claims_rescheduled=min(exhausted, 1),
        most_reschedules=exhausted,
        pool_used={f"node-{i + 2}": u for i, u in enumerate(used)},
        pool_total={f"node-{i + 2}": 2 * GI for i in range(len(used))},
    )


def test_spread_is_over_the_shares_of_each_pool() -> None:
    spread = Spread.of(result("r", [2 * GI, GI, 0]))
    assert (spread.minimum, spread.maximum) == (0.0, 1.0)
    assert spread.mean == pytest.approx(0.5)
    assert spread.stddev == pytest.approx(0.408, abs=1e-3)
    assert (spread.full_nodes, spread.empty_nodes) == (1, 1)
    assert spread.largest_free == 2 * GI


def test_the_table_says_which_run_was_stuck_and_with_how_many_left() -> None:
    table = markdown_table([result("on", [2 * GI, 2 * GI]), result("off", [GI, 0], left=3)])
    on, off = table.splitlines()[2:]
    assert "all 4 bound in 4.0 s" in on
    assert "**stuck**: 3 of 4 unbound" in off
    assert "| 0% / 25% / 50% |" in off
    assert off.endswith("| 2Gi |")  # the empty node's whole pool


def test_a_report_has_its_charts_and_can_be_made_again_from_its_results(tmp_path: Path) -> None:
    runs = [result("on", [2 * GI, 2 * GI]), result("off", [GI, GI], left=2, exhausted=5)]
    report = write_report(tmp_path, "title", "csi-harness scale kep1472", runs)
    assert report == tmp_path / REPORT
    for chart in (BOUND_CHART, UTILISATION_CHART):
        assert (tmp_path / chart).read_bytes().startswith(PNG)
    text = report.read_text()
    assert "csi-harness scale kep1472" in text and f"]({BOUND_CHART})" in text
    comparison, command, loaded = load_results(tmp_path / "results.json")
    assert (comparison, command) == ("title", "csi-harness scale kep1472")
    assert loaded == runs


def timed(name: str, run: int, placed: float | None, *, volumes: bool = True) -> RunResult:
    """A run whose pods were all placed after ``placed`` s (None: stuck), created in 2 s."""
    r = result(name, [GI], left=0 if placed is not None else 1, exhausted=run)
    return dataclasses.replace(
        r,
        run=run,
        volumes=volumes,
        create_seconds=2.0,
        all_placed_after=placed,
        pods_left=0 if placed is not None else 1,
    )


def test_a_variant_is_summed_up_as_the_median_and_range_of_its_completed_runs() -> None:
    runs = [timed("on", 1, 10.0), timed("on", 2, 30.0), timed("on", 3, 14.0)]
    (summary,) = summaries(runs)
    assert (summary.runs, summary.completed) == (3, 3)
    assert summary.placed == Range(14.0, 10.0, 30.0)
    assert summary.placed_after_creation == Range(12.0, 8.0, 28.0)
    assert summary.resource_exhausted == Range(2, 1, 3)
    assert summary.ratio is None  # no baseline ran


def test_a_stuck_run_counts_as_a_run_but_not_in_the_times() -> None:
    (summary,) = summaries([timed("off", 1, 20.0), timed("off", 2, None)])
    assert (summary.runs, summary.completed) == (2, 1)
    assert summary.placed == Range(20.0, 20.0, 20.0)
    assert summary.claims_left == Range(0.5, 0, 1)


def test_ratios_are_of_medians_against_the_run_without_volumes() -> None:
    runs = [
        timed("baseline", 1, 6.0, volumes=False),
        timed("on", 1, 12.0),
        timed("baseline", 2, 10.0, volumes=False),
        timed("on", 2, 20.0),
    ]
    baseline, on = summaries(runs)
    assert [baseline.variant, on.variant] == ["baseline", "on"]
    assert baseline.ratio == pytest.approx(1.0)
    assert on.ratio == pytest.approx(16.0 / 8.0)
    assert on.ratio_after_creation == pytest.approx(14.0 / 6.0)


def test_the_summary_table_and_results_file_carry_every_variant(tmp_path: Path) -> None:
    runs = [timed("baseline", 1, 5.0, volumes=False), timed("on", 1, 10.0), timed("on", 2, 12.0)]
    table = summary_table(runs).splitlines()
    assert len(table) == 4
    assert "| on | 2 of 2 | 11.0 s (10.0-12.0) | 2.20 |" in table[3]
    write_report(tmp_path, "title", "cmd", runs)
    data = json.loads((tmp_path / "results.json").read_text())
    assert [s["variant"] for s in data["summary"]] == ["baseline", "on"]
    assert data["summary"][1]["placed"] == {"median": 11.0, "low": 10.0, "high": 12.0}
    text = (tmp_path / REPORT).read_text()
    assert "| on, run 2 |" in text
    assert "| baseline, run 1 | all 4 pods placed in 5.0 s |" in text


def test_results_written_before_placement_was_measured_still_load(tmp_path: Path) -> None:
    old = result("on", [GI]).to_json()
    for new in ("provisioning", "workload", "volumes", "run", "placed_times", "pods_left"):
        del old[new]
    (tmp_path / "results.json").write_text(
        json.dumps({"comparison": "c", "command": "x", "results": [old]})
    )
    _, _, (loaded,) = load_results(tmp_path / "results.json")
    assert loaded.provisioning == "central" and loaded.volumes and loaded.run == 1


def test_the_report_names_busy_nodes_shared_gates_nominated_nodes_and_refusers(
    tmp_path: Path,
) -> None:
    gates = {"NominatedNodeNameForExpectation": False, "StorageCapacityScoring": False}
    stuck = dataclasses.replace(
        result("off", [2 * GI, GI], left=1, exhausted=3),
        busy_nodes=1,
        scheduler_gates=gates,
        unplaced_nominated={"node-2": 1},
        exhausted_by_instance={"node-2": 3},
    )
    other = dataclasses.replace(
        result("on", [2 * GI, 2 * GI]),
        busy_nodes=1,
        scheduler_gates={**gates, "StorageCapacityScoring": True},
    )
    text = write_report(tmp_path, "title", "cmd", [other, stuck]).read_text()
    assert "2 simulated nodes (1 of them busy: another pod asks for half" in text
    assert "feature gates of every run: NominatedNodeNameForExpectation=false\n" in text
    assert "- off: nominated node of the pods not placed: node-2 1" in text
    assert "- off: RESOURCE_EXHAUSTED by instance: node-2 3" in text


def test_on_real_nodes_the_report_says_where_and_when_every_pod_ran() -> None:
    ran = [
        dataclasses.replace(
            result("on", [GI, GI]),
            cluster="kind",
            until_running=True,
            all_placed_after=4.0 + run,
            all_running_after=6.0 + run,
            create_seconds=2.0,
            run=run,
        )
        for run in (1, 2, 3)
    ]
    stuck = dataclasses.replace(ran[0], pods_not_running=2, all_running_after=None, run=4)
    lines = running_lines([*ran, stuck])
    assert "- on: 8.0 s (7.0-9.0) from the first object, 6.0 s (5.0-7.0) from the last" in lines
    assert "not running" in markdown_table([stuck])
    assert "2 nodes of a kind cluster" in setup_of(ran)
    assert running_lines([result("local", [GI])]) == []
