"""A comparison's results as a person reads them: a Markdown table per run and one
per variant (median and range over its runs, and the ratio to the no-volume
baseline), two charts (claims bound over time, utilisation per node), and the raw
results as JSON so the report can be made again (``write_report`` from
``results.json``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from csi_harness._internal.scale.run_result import RunResult
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


@dataclass(frozen=True)
class Range:
    """The median of some runs' values and the smallest and largest of them."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Range | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values))

    def text(self, unit: str = "", digits: int = 1) -> str:
        median = f"{self.median:.{digits}f}{unit}"
        if self.low == self.high:
            return median
        return f"{median} ({self.low:.{digits}f}-{self.high:.{digits}f})"


@dataclass(frozen=True)
class VariantSummary:
    """A variant over its runs. Times are over the runs in which every pod was placed
    (``completed`` of ``runs``); ratios are of medians, against the baseline's."""

    variant: str
    title: str
    runs: int
    completed: int
    placed: Range | None
    """Seconds from the first object created until every pod was placed."""
    placed_after_creation: Range | None
    """Seconds from the last object created until every pod was placed."""
    resource_exhausted: Range | None
    reschedules: Range | None
    claims_left: Range | None
    ratio: float | None = None
    """placed / the baseline's placed (medians)."""
    ratio_after_creation: float | None = None

    @classmethod
    def of(
        cls, runs: Sequence[RunResult], baseline: VariantSummary | None = None
    ) -> VariantSummary:
        done = [r for r in runs if r.completed and r.all_placed_after is not None]
        placed = Range.of([r.all_placed_after for r in done if r.all_placed_after is not None])
        after = Range.of(
            [r.placed_after_creation for r in done if r.placed_after_creation is not None]
        )
        return cls(
            variant=runs[0].variant,
            title=runs[0].title,
            runs=len(runs),
            completed=len(done),
            placed=placed,
            placed_after_creation=after,
            resource_exhausted=Range.of([r.resource_exhausted for r in runs]),
            reschedules=Range.of([r.reschedules for r in runs]),
            claims_left=Range.of([r.claims_left for r in runs]),
            ratio=_ratio(placed, baseline.placed if baseline else None),
            ratio_after_creation=_ratio(
                after, baseline.placed_after_creation if baseline else None
            ),
        )


def _ratio(value: Range | None, base: Range | None) -> float | None:
    if value is None or base is None or base.median <= 0:
        return None
    return value.median / base.median


def summaries(results: Sequence[RunResult]) -> list[VariantSummary]:
    """One summary per variant, in the order the variants first ran; the ratios are to
    the variant without volumes, if one ran and completed."""
    by_variant: dict[str, list[RunResult]] = {}
    for r in results:
        by_variant.setdefault(r.variant, []).append(r)
    baseline = next(
        (VariantSummary.of(runs) for runs in by_variant.values() if not runs[0].volumes), None
    )
    return [VariantSummary.of(runs, baseline) for runs in by_variant.values()]


def summary_table(results: Sequence[RunResult]) -> str:
    """Per variant: median (range) over its runs."""
    header = (
        "| variant | runs: all pods placed | pods placed, from the first object created "
        "| x baseline | from the last object created | x baseline | RESOURCE_EXHAUSTED "
        "| reschedules | claims left unbound |"
    )
    lines = [header, "|" + "---|" * 9]

    def seconds(value: Range | None) -> str:
        return "-" if value is None else value.text(" s")

    def count(value: Range | None) -> str:
        return "-" if value is None else value.text(digits=0)

    def times(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for v in summaries(results):
        lines.append(
            f"| {v.title} | {v.completed} of {v.runs} | {seconds(v.placed)} | {times(v.ratio)} "
            f"| {seconds(v.placed_after_creation)} | {times(v.ratio_after_creation)} "
            f"| {count(v.resource_exhausted)} | {count(v.reschedules)} "
            f"| {count(v.claims_left)} |"
        )
    return "\n".join(lines)


def running_lines(results: Sequence[RunResult]) -> list[str]:
    """On real nodes (``until_running``): per variant, how long until every pod was
    Running (the KEP author's measure), median (range) over its completed runs, from
    the first and from the last object created; nothing on simulated nodes."""
    if not any(r.until_running for r in results):
        return []
    lines = ["Every pod Running (the kubelets start them here), median (range):", ""]
    by_variant: dict[str, list[RunResult]] = {}
    for r in results:
        by_variant.setdefault(r.title, []).append(r)
    for title, runs in by_variant.items():
        done = [
            (r.all_running_after, r.create_seconds)
            for r in runs
            if r.completed and r.all_running_after is not None
        ]
        first = Range.of([running for running, _ in done])
        last = Range.of([max(running - created, 0.0) for running, created in done])
        text = (
            "none completed"
            if first is None or last is None
            else f"{first.text(' s')} from the first object, {last.text(' s')} from the last"
        )
        lines.append(f"- {title}: {text}")
    return [*lines, ""]


def save_results(
    directory: Path, comparison: str, command: str, results: Sequence[RunResult]
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RESULTS
    data = {
        "comparison": comparison,
        "command": command,
        "summary": [asdict(v) for v in summaries(results)],
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


def markdown_table(results: Sequence[RunResult]) -> str:
    header = (
        "| run | outcome | CreateVolume calls | RESOURCE_EXHAUSTED | reschedules "
        "(claims; most for one) | utilisation min / mean / max | stddev | full nodes "
        "| largest free |"
    )
    lines = [header, "|" + "---|" * 9]
    runs = max((r.run for r in results), default=1)
    for r in results:
        spread = Spread.of(r)
        lines.append(
            f"| {run_title(r, runs)} | {_outcome(r)} | {r.create_volume_calls} "
            f"| {r.resource_exhausted} "
            f"| {r.reschedules} ({r.claims_rescheduled}; {r.most_reschedules}) "
            f"| {spread.minimum:.0%} / {spread.mean:.0%} / {spread.maximum:.0%} "
            f"| {spread.stddev:.3f} | {spread.full_nodes} of {r.nodes} "
            f"| {format_quantity(spread.largest_free)} |"
        )
    return "\n".join(lines)


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


def common_gates(results: Sequence[RunResult]) -> str:
    """kube-scheduler feature gates every run set alike, as NAME=value."""
    if not results:
        return ""
    shared = set(results[0].scheduler_gates.items())
    for r in results[1:]:
        shared &= set(r.scheduler_gates.items())
    return ", ".join(f"{name}={str(on).lower()}" for name, on in sorted(shared))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key or 'none'} {n}" for key, n in sorted(counts.items()))


def _setup_of(results: Sequence[RunResult]) -> str:
    """The setup line of the first run with volumes (the baseline asks for nothing)."""
    return setup_line(next((r for r in results if r.volumes), results[0]))


def write_report(
    directory: Path, comparison: str, command: str, results: Sequence[RunResult]
) -> Path:
    """results.json, the two charts and report.md in ``directory``; returns report.md."""
    save_results(directory, comparison, command, results)
    plot_bound_over_time(directory / BOUND_CHART, results)
    plot_utilisation(directory / UTILISATION_CHART, results)
    notes = []
    runs = max((r.run for r in results), default=1)
    for r in results:
        title = run_title(r, runs)
        extra = ", ".join(f"{code} {n}" for code, n in sorted(r.other_errors.items()))
        if extra:
            notes.append(f"- {title}: other CreateVolume errors: {extra}")
        if not r.journal_complete:
            notes.append(f"- {title}: the journal dropped records; counts are from metrics")
        for reason, count in sorted(r.unbound_reasons.items()):
            notes.append(f"- {title}: {count} unbound claim(s) whose pod says: {reason}")
        if r.unplaced_nominated:
            notes.append(
                f"- {title}: nominated node of the pods not placed: {_counts(r.unplaced_nominated)}"
            )
        if r.exhausted_by_instance:
            notes.append(
                f"- {title}: RESOURCE_EXHAUSTED by instance: {_counts(r.exhausted_by_instance)}"
            )
        if r.watch_errors:
            notes.append(f"- {title}: the claim watch restarted {r.watch_errors} times")
    body = [
        f"# {comparison}",
        "",
        _setup_of(results) if results else "no runs",
        "",
        f"kube-scheduler feature gates of every run: {common_gates(results) or 'defaults'}",
        "",
        "```sh",
        command,
        "```",
        "",
        "Per variant, median (range) over its runs; a pod counts as placed when bound "
        "to its node (on simulated nodes nothing starts it):",
        "",
        summary_table(results),
        "",
        *running_lines(results),
        "Per run:",
        "",
        markdown_table(results),
        "",
        f"![claims bound over time]({BOUND_CHART})",
        "",
        f"![utilisation per node]({UTILISATION_CHART})",
        "",
        *(["Notes:", *notes, ""] if notes else []),
        "Bring-up per run: "
        + ", ".join(f"{run_title(r, runs)} {r.bring_up_seconds:.0f} s" for r in results)
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
    runs = max((r.run for r in results), default=1)
    for r in results:
        # A run without volumes has no claims: its pods placed stand in for them.
        series = r.bound_times if r.volumes else r.placed_times
        times = [0.0, *series, r.ended_after]
        counts = [0, *range(1, len(series) + 1), len(series)]
        label = f"{run_title(r, runs)}: {_outcome(r, markdown=False)}"
        (line,) = bound.step(
            times, counts, where="post", linestyle="-" if r.volumes else "--", label=label
        )
        failures.hist(
            r.exhausted_times,
            bins=max(10, int(max(r.ended_after, 1) // 5)),
            range=(0, max(r.ended_after, 1)),
            histtype="step",
            color=line.get_color(),
            label=f"{run_title(r, runs)}: {r.resource_exhausted}",
        )
    if results:
        bound.axhline(results[0].pods, color="grey", linestyle=":", linewidth=1)
    bound.set_ylabel("claims bound (dashed: pods placed)")
    bound.legend(loc="lower right", fontsize=8)
    bound.set_title(_setup_of(results) if results else "", fontsize=8)
    failures.set_ylabel("RESOURCE_EXHAUSTED\nper 5 s")
    failures.set_xlabel("seconds since the first pod (or Deployment) was created")
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
    runs = max((r.run for r in results), default=1)
    for axis, r in zip(axes[:, 0], results, strict=True):
        spread = Spread.of(r)
        axis.hist([min(s, 1.0) for s in r.utilisation().values()], bins=bins, edgecolor="black")
        axis.set_ylabel("nodes")
        axis.set_title(
            f"{run_title(r, runs)}: min {spread.minimum:.0%}, mean {spread.mean:.0%}, max "
            f"{spread.maximum:.0%}, stddev {spread.stddev:.3f}, {spread.full_nodes} full",
            fontsize=9,
        )
    axes[-1, 0].set_xlabel("share of the node's pool used at the end")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
