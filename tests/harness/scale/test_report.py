"""The report: table, charts and the results file it can be made again from."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.scale.experiment import RunResult
from csi_harness._internal.scale.report import (
    BOUND_CHART,
    REPORT,
    UTILISATION_CHART,
    Spread,
    load_results,
    markdown_table,
    write_report,
)

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
