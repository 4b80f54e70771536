"""The report's two charts, drawn with matplotlib (the ``scale`` extra): claims bound
over time, and how full each node's pool ended."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from csi_harness._internal.scale.run_descriptions import outcome, run_title, setup_of
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.run_statistics import Spread


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
        label = f"{run_title(r, runs)}: {outcome(r, markdown=False)}"
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
    bound.set_title(setup_of(results) if results else "", fontsize=8)
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
