"""A comparison's results as a person reads them: a Markdown table, two charts
(claims bound over time, utilisation per node), and the raw results as JSON so the
report can be made again (``write_report`` from ``results.json``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csi_harness._internal.scale.experiment import RunResult
from csi_mock.model.quantity import format_quantity

RESULTS = "results.json"
REPORT = "report.md"
BOUND_CHART = "bound-over-time.png"
UTILISATION_CHART = "utilisation.png"
FULL = 0.99
"""A node at or above this share of its pool counts as full."""


@dataclass(frozen=True)
class Spread:
    """How evenly a run used the nodes' pools (shares of each pool, 0..1)."""

    minimum: float
    maximum: float
    mean: float
    stddev: float
    full_nodes: int
    empty_nodes: int
    largest_free: int
    """Bytes free on the node with the most room left: the largest volume that still fits."""

    @classmethod
    def of(cls, result: RunResult) -> Spread:
        shares = list(result.utilisation().values()) or [0.0]
        return cls(
            minimum=min(shares),
            maximum=max(shares),
            mean=statistics.fmean(shares),
            stddev=statistics.pstdev(shares),
            full_nodes=sum(1 for s in shares if s >= FULL),
            empty_nodes=sum(1 for s in shares if s == 0),
            largest_free=max(
                (result.pool_total[n] - result.pool_used[n] for n in result.pool_total), default=0
            ),
        )


def save_results(
    directory: Path, comparison: str, command: str, results: Sequence[RunResult]
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RESULTS
    data = {
        "comparison": comparison,
        "command": command,
        "results": [r.to_json() for r in results],
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def load_results(path: Path) -> tuple[str, str, list[RunResult]]:
    data = json.loads(path.read_text())
    return data["comparison"], data["command"], [RunResult.from_json(r) for r in data["results"]]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _outcome(result: RunResult, *, markdown: bool = True) -> str:
    if result.completed:
        return f"all {result.pods} bound in {_seconds(result.all_bound_after)}"
    stuck = "**stuck**" if markdown else "STUCK"
    return f"{stuck}: {result.claims_left} of {result.pods} unbound ({result.stop_reason})"


def markdown_table(results: Sequence[RunResult]) -> str:
    header = (
        "| run | outcome | CreateVolume calls | RESOURCE_EXHAUSTED | reschedules "
        "(claims; most for one) | utilisation min / mean / max | stddev | full nodes "
        "| largest free |"
    )
    lines = [header, "|" + "---|" * 9]
    for r in results:
        spread = Spread.of(r)
        lines.append(
            f"| {r.title} | {_outcome(r)} | {r.create_volume_calls} | {r.resource_exhausted} "
            f"| {r.reschedules} ({r.claims_rescheduled}; {r.most_reschedules}) "
            f"| {spread.minimum:.0%} / {spread.mean:.0%} / {spread.maximum:.0%} "
            f"| {spread.stddev:.3f} | {spread.full_nodes} of {r.nodes} "
            f"| {format_quantity(spread.largest_free)} |"
        )
    return "\n".join(lines)


def setup_line(result: RunResult) -> str:
    fill = result.requested_bytes / (result.pool_bytes * result.nodes)
    return (
        f"{result.nodes} simulated nodes with a {format_quantity(result.pool_bytes)} pool each, "
        f"{result.pods} pods with one generic ephemeral volume of {result.sizes} "
        f"(seed {result.seed}): {format_quantity(result.requested_bytes)} asked for, "
        f"{fill:.1%} of all pools"
    )


def write_report(
    directory: Path, comparison: str, command: str, results: Sequence[RunResult]
) -> Path:
    """results.json, the two charts and report.md in ``directory``; returns report.md."""
    save_results(directory, comparison, command, results)
    plot_bound_over_time(directory / BOUND_CHART, results)
    plot_utilisation(directory / UTILISATION_CHART, results)
    notes = []
    for r in results:
        extra = ", ".join(f"{code} {n}" for code, n in sorted(r.other_errors.items()))
        if extra:
            notes.append(f"- {r.title}: other CreateVolume errors: {extra}")
        if not r.journal_complete:
            notes.append(f"- {r.title}: the journal dropped records; counts are from metrics")
        for reason, count in sorted(r.unbound_reasons.items()):
            notes.append(f"- {r.title}: {count} unbound claim(s) whose pod says: {reason}")
        if r.watch_errors:
            notes.append(f"- {r.title}: the claim watch restarted {r.watch_errors} times")
    body = [
        f"# {comparison}",
        "",
        setup_line(results[0]) if results else "no runs",
        "",
        "```sh",
        command,
        "```",
        "",
        markdown_table(results),
        "",
        f"![claims bound over time]({BOUND_CHART})",
        "",
        f"![utilisation per node]({UTILISATION_CHART})",
        "",
        *(["Notes:", *notes, ""] if notes else []),
        "Bring-up per run: "
        + ", ".join(f"{r.title} {r.bring_up_seconds:.0f} s" for r in results)
        + "; pods created in: "
        + ", ".join(f"{r.create_seconds:.1f} s" for r in results)
        + ".",
        "",
    ]
    path = directory / REPORT
    path.write_text("\n".join(body))
    return path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_bound_over_time(path: Path, results: Sequence[RunResult]) -> None:
    """Claims bound over time, one line per run, RESOURCE_EXHAUSTED answers as ticks."""
    plt = _pyplot()
    figure, (bound, failures) = plt.subplots(
        2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for r in results:
        times = [0.0, *r.bound_times, r.ended_after]
        counts = [0, *range(1, len(r.bound_times) + 1), len(r.bound_times)]
        (line,) = bound.step(
            times, counts, where="post", label=f"{r.title}: {_outcome(r, markdown=False)}"
        )
        failures.hist(
            r.exhausted_times,
            bins=max(10, int(max(r.ended_after, 1) // 5)),
            range=(0, max(r.ended_after, 1)),
            histtype="step",
            color=line.get_color(),
            label=f"{r.title}: {r.resource_exhausted}",
        )
    if results:
        bound.axhline(results[0].pods, color="grey", linestyle=":", linewidth=1)
    bound.set_ylabel("claims bound")
    bound.legend(loc="lower right", fontsize=8)
    bound.set_title(setup_line(results[0]) if results else "", fontsize=8)
    failures.set_ylabel("RESOURCE_EXHAUSTED\nper 5 s")
    failures.set_xlabel("seconds since the first pod was created")
    failures.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_utilisation(path: Path, results: Sequence[RunResult]) -> None:
    """A histogram per run: how many nodes ended at which share of their pool."""
    plt = _pyplot()
    figure, axes = plt.subplots(
        len(results), 1, figsize=(9, 2.2 * max(len(results), 1)), sharex=True, squeeze=False
    )
    bins = [i / 20 for i in range(21)]
    for axis, r in zip(axes[:, 0], results, strict=True):
        spread = Spread.of(r)
        axis.hist([min(s, 1.0) for s in r.utilisation().values()], bins=bins, edgecolor="black")
        axis.set_ylabel("nodes")
        axis.set_title(
            f"{r.title}: min {spread.minimum:.0%}, mean {spread.mean:.0%}, max "
            f"{spread.maximum:.0%}, stddev {spread.stddev:.3f}, {spread.full_nodes} full",
            fontsize=9,
        )
    axes[-1, 0].set_xlabel("share of the node's pool used at the end")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
