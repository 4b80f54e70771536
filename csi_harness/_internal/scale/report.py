"""A comparison's results as a person reads them: a Markdown table per run and one
per variant (median and range over its runs, and the ratio to the no-volume
baseline), two charts (claims bound over time, utilisation per node), and the raw
results as JSON so the report can be made again (``write_report`` from
``results.json``). The numbers are in ``run_statistics.py``, the charts in
``charts.py``, a run's wording in ``run_descriptions.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from csi_harness._internal.scale.charts import plot_bound_over_time, plot_utilisation
from csi_harness._internal.scale.run_descriptions import outcome, run_title, setup_of
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.run_statistics import Range, Spread, summaries
from csi_mock.model.quantity import format_quantity

RESULTS = "results.json"
REPORT = "report.md"
BOUND_CHART = "bound-over-time.png"
UTILISATION_CHART = "utilisation.png"


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
            f"| {run_title(r, runs)} | {outcome(r)} | {r.create_volume_calls} "
            f"| {r.resource_exhausted} "
            f"| {r.reschedules} ({r.claims_rescheduled}; {r.most_reschedules}) "
            f"| {spread.minimum:.0%} / {spread.mean:.0%} / {spread.maximum:.0%} "
            f"| {spread.stddev:.3f} | {spread.full_nodes} of {r.nodes} "
            f"| {format_quantity(spread.largest_free)} |"
        )
    return "\n".join(lines)


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
        setup_of(results) if results else "no runs",
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
