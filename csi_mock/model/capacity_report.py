"""GetCapacity arithmetic: what a topology segment can still hold for a kind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool
from csi_mock.model.topology import Segment, segment_within


@dataclass(frozen=True)
class CapacityReport:
    available_capacity: int
    maximum_volume_size: int
    minimum_volume_size: int


def capacity_at(
    location: Segment | None, kind: VolumeKind, pools: Sequence[Pool]
) -> CapacityReport:
    """Capacity for volumes of `kind` reachable from `location` (None: anywhere).

    Available capacity adds up every reachable pool; a single volume lives in one
    pool, so the maximum volume size is the largest any one pool can take now and
    the minimum is the smallest any one pool accepts.
    """
    reachable = [
        pool
        for pool in pools
        if pool.serves(kind) and (location is None or segment_within(pool.segment, location))
    ]
    if not reachable:
        return CapacityReport(0, 0, 0)
    return CapacityReport(
        available_capacity=sum(pool.available_capacity(kind) for pool in reachable),
        maximum_volume_size=max(pool.maximum_volume_size(kind) for pool in reachable),
        minimum_volume_size=min(pool.spec.min_volume_size for pool in reachable),
    )
