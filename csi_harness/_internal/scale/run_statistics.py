"""The numbers a comparison's report is made of: how evenly a run used the nodes'
pools (``Spread``), and each variant over its runs (``VariantSummary``: median and
range, and the ratio to the run without volumes)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from csi_harness._internal.scale.run_result import RunResult

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
