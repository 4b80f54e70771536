"""The comparisons ``csi-harness scale`` runs: which variants, and what each shows.

* ``kep1472``: storage capacity tracking on and off (CSIDriver.storageCapacity), the
  claim KEP-1472 makes about a burst of pods with generic ephemeral volumes. Both
  runs keep StorageCapacityScoring off, so they differ only in the filter the KEP
  added (scoring is the other comparison).
* ``scoring``: with tracking on, StorageCapacityScoring (KEP-4049, successor of
  KEP-1845) off, on with its default shape (most free capacity wins), and on with
  the inverted shape (fullest node that still fits wins).

Either may add ``BASELINE``, the same pods without volumes (``--baseline``), which
the KEP author measured every run against. With ``Setup.runs`` above one, every
variant runs that many times, round by round (one run of each, then the next), so
that what else the machine is doing falls on all variants alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from csi_harness._internal.kube.scheduler_config import PACKING_SHAPE, volume_binding_shape
from csi_harness._internal.scale.experiment import Setup, Variant, run_variant
from csi_harness._internal.scale.run_result import RunResult

SCORING_GATE = "StorageCapacityScoring"

INVERTED_SHAPE = volume_binding_shape(PACKING_SHAPE)
"""VolumeBinding's score rises with the utilisation a node would have (bin packing)."""


@dataclass(frozen=True)
class Comparison:
    name: str
    title: str
    variants: tuple[Variant, ...]


KEP1472 = Comparison(
    "kep1472",
    "Storage capacity tracking (KEP-1472) on and off",
    (
        Variant(
            "tracking",
            "capacity tracking on",
            storage_capacity=True,
            scheduler_gates={SCORING_GATE: False},
        ),
        Variant(
            "no-tracking",
            "capacity tracking off",
            storage_capacity=False,
            scheduler_gates={SCORING_GATE: False},
        ),
    ),
)

SCORING = Comparison(
    "scoring",
    "StorageCapacityScoring (KEP-4049, after KEP-1845) with capacity tracking on",
    (
        Variant("scoring-off", "scoring off", scheduler_gates={SCORING_GATE: False}),
        Variant("scoring-on", "scoring on, default shape", scheduler_gates={SCORING_GATE: True}),
        Variant(
            "scoring-inverted",
            "scoring on, inverted shape",
            scheduler_gates={SCORING_GATE: True},
            scheduler=INVERTED_SHAPE,
        ),
    ),
)

COMPARISONS = {c.name: c for c in (KEP1472, SCORING)}

BASELINE = Variant(
    "baseline",
    "no volumes (baseline)",
    storage_capacity=True,
    scheduler_gates={SCORING_GATE: False},
    volumes=False,
)
"""The same pods without volumes: how long placing them takes with no storage at all."""


def with_baseline(comparison: Comparison) -> Comparison:
    """``comparison`` with ``BASELINE`` run first (once per round)."""
    if any(not v.volumes for v in comparison.variants):
        return comparison
    return Comparison(comparison.name, comparison.title, (BASELINE, *comparison.variants))


class RunVariant(Protocol):
    def __call__(
        self, setup: Setup, variant: Variant, progress: Callable[[str], None], *, run: int
    ) -> RunResult: ...


def run_comparison(
    comparison: Comparison,
    setup: Setup,
    progress: Callable[[str], None] = lambda _: None,
    on_result: Callable[[RunResult], None] = lambda _: None,
    run_one: RunVariant | None = None,
) -> list[RunResult]:
    """Run every variant one after the other (``run_one``: by default ``run_variant``,
    each on a local cluster of its own; ``on_cluster.ClusterRuns.run_variant`` on one
    given cluster); ``setup.runs`` rounds of that."""
    # Looked up at call time, not bound as a default: what a caller (or a test) put
    # in this module's run_variant is what runs.
    run_one = run_one or run_variant
    results = []
    for run in range(1, setup.runs + 1):
        for variant in comparison.variants:
            result = run_one(setup, variant, progress, run=run)
            on_result(result)
            results.append(result)
    return results
