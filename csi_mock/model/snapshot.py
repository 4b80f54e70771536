"""Snapshots: point-in-time copies of a volume's data, charged to the source's pool."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from csi_mock.model.kind import VolumeKind
from csi_mock.model.volume import AccessType


class SnapshotAccounting(enum.Enum):
    """How much of its pool a snapshot takes. The charge is fixed when the snapshot is
    cut and given back when it is deleted."""

    FULL = "full"
    """The source volume's allocation (its size times its kind's cost), as a volume of
    that size would take."""
    USED = "used"
    """The bytes the source holds when the snapshot is cut, times its kind's cost: what
    a copy of its data takes (hostpathplugin's archive). Never more than FULL."""
    COPY_ON_WRITE = "copy_on_write"
    """Nothing: the snapshot shares its blocks with the source. The divergence of the
    two after the cut is not modelled."""

    def charge(self, allocation: int, used_bytes: int, kind: VolumeKind) -> int:
        """Pool bytes a snapshot of a volume with `allocation` pool bytes, holding
        `used_bytes` of data, of `kind`, takes."""
        if self is SnapshotAccounting.FULL:
            return allocation
        if self is SnapshotAccounting.USED:
            return min(kind.allocation_for(max(used_bytes, 0)), allocation)
        return 0

    @property
    def needs_usage(self) -> bool:
        """Whether the charge depends on the data the source holds (a tree walk)."""
        return self is SnapshotAccounting.USED


@dataclass(frozen=True)
class Snapshot:
    """A cut snapshot: its data lives in the pool of the source volume."""

    id: str
    name: str
    source_volume_id: str
    pool: str
    kind: str
    size: int
    """The source volume's size when cut: the smallest volume it can be restored into."""
    charge: int
    """Pool bytes it takes (SnapshotAccounting.charge)."""
    offset: int
    """Extent offset of the charge in a contiguous pool (0 otherwise, or with no charge)."""
    access_type: AccessType
    segment: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    ready_at: float = 0.0
    """When ready_to_use turns true (created_at + controller.snapshots.ready_after)."""
    seq: int = 0
    """Insertion order, used as the ListSnapshots pagination key."""

    def ready_to_use(self, now: float) -> bool:
        return now >= self.ready_at
