"""One run in words, as the report's tables and the charts' titles and legends say it:
its title, its outcome and its setup."""

from __future__ import annotations

from collections.abc import Sequence

from csi_harness._internal.scale.run_result import RunResult
from csi_mock.model.quantity import format_quantity


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def outcome(result: RunResult, *, markdown: bool = True) -> str:
    placed_in = _seconds(result.all_placed_after)
    placed = "" if result.all_placed_after is None else f", placed in {placed_in}"
    if result.all_running_after is not None:
        placed += f", running in {_seconds(result.all_running_after)}"
    if result.completed and not result.volumes:
        running = (
            ""
            if result.all_running_after is None
            else f", running in {_seconds(result.all_running_after)}"
        )
        return f"all {result.pods} pods placed in {placed_in}{running}"
    if result.completed:
        return f"all {result.pods} bound in {_seconds(result.all_bound_after)}{placed}"
    stuck = "**stuck**" if markdown else "STUCK"
    if not result.volumes or result.claims_left == 0:
        left = (
            f"{result.pods_not_running} of {result.pods} pods not running"
            if result.pods_left == 0 and result.pods_not_running
            else f"{result.pods_left} of {result.pods} pods not placed"
        )
        return f"{stuck}: {left} ({result.stop_reason})"
    return f"{stuck}: {result.claims_left} of {result.pods} unbound ({result.stop_reason})"


def run_title(result: RunResult, runs: int) -> str:
    """The variant's title, with the run's number when there was more than one."""
    return result.title if runs == 1 else f"{result.title}, run {result.run}"


def setup_line(result: RunResult) -> str:
    fill = result.requested_bytes / (result.pool_bytes * result.nodes)
    made = (
        f"{result.pods} Deployments of one pod"
        if result.workload == "deployments"
        else f"{result.pods} pods"
    )
    rate = (
        "as fast as the API server takes them"
        if result.create_qps is None
        else f"{result.create_qps:g} a second"
    )
    busy = (
        f" ({result.busy_nodes} of them busy: another pod asks for half their CPU and memory)"
        if result.busy_nodes
        else ""
    )
    ties = (
        f"; kube-scheduler breaks ties at random (a no-op extender, {result.tie_break_calls} calls)"
        if result.random_tie_break
        else ""
    )
    where = {
        "local": "simulated nodes",
        "kind": "nodes of a kind cluster",
        "existing": "nodes of an existing cluster",
    }.get(result.cluster, f"nodes ({result.cluster})")
    return (
        f"{result.nodes} {where}{busy} with a {format_quantity(result.pool_bytes)} pool "
        f"each, {result.provisioning} provisioning; {made} with one generic ephemeral volume of "
        f"{result.sizes} (seed {result.seed}), created {rate}: "
        f"{format_quantity(result.requested_bytes)} asked for, {fill:.1%} of all pools{ties}"
    )


def setup_of(results: Sequence[RunResult]) -> str:
    """The setup line of the first run with volumes (the baseline asks for nothing)."""
    return setup_line(next((r for r in results if r.volumes), results[0]))
