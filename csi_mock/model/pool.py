"""Pools: named amounts of storage bound to a topology segment."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from csi_mock.model.extents import ExtentMap
from csi_mock.model.kind import VolumeKind
from csi_mock.model.quantity import format_quantity


class Allocation(enum.Enum):
    """How a pool hands out space."""

    POOLED = "pooled"
    """Any free byte can be used: the largest volume is bounded by free space only."""
    CONTIGUOUS = "contiguous"
    """Each volume needs one contiguous extent: fragmentation bounds the largest volume."""


@dataclass(frozen=True)
class PoolSpec:
    """The configured, static description of a pool."""

    name: str
    size: int
    segment: Mapping[str, str] = field(default_factory=dict)
    max_volume_size: int | None = None
    min_volume_size: int = 0
    kinds: frozenset[str] | None = None
    """Names of the kinds this pool serves; None serves every kind."""
    allocation: Allocation = Allocation.POOLED


class Pool:
    """A pool's configuration plus its live accounting.

    `used` is what volumes occupy; `external` is space consumed outside CSI (drift a
    real backend would see when something else writes to it). Accounting is exact:
    `free() == total - used - external` at all times.
    """

    def __init__(self, spec: PoolSpec, *, total: int | None = None) -> None:
        self.spec = spec
        self.total = spec.size if total is None else total
        self.used = 0
        self.external = 0
        self._extents = ExtentMap(self.total) if self.contiguous else None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def segment(self) -> Mapping[str, str]:
        return self.spec.segment

    @property
    def contiguous(self) -> bool:
        return self.spec.allocation is Allocation.CONTIGUOUS

    def serves(self, kind: VolumeKind) -> bool:
        return self.spec.kinds is None or kind.name in self.spec.kinds

    def free(self) -> int:
        return max(0, self.total - self.used - self.external)

    def largest_free_extent(self) -> int:
        """The largest allocation possible right now, in pool bytes."""
        if self._extents is None:
            return self.free()
        return min(self._extents.largest_free(), self.free())

    def available_capacity(self, kind: VolumeKind) -> int:
        """Total volume bytes of `kind` that still fit (GetCapacity available_capacity)."""
        return kind.size_for(self.free())

    def maximum_volume_size(self, kind: VolumeKind) -> int:
        """The largest single volume of `kind` that can be created now (0 if none)."""
        largest = kind.size_for(self.largest_free_extent())
        if self.spec.max_volume_size is not None:
            largest = min(largest, self.spec.max_volume_size)
        return largest if largest >= max(self.spec.min_volume_size, 1) else 0

    def size_for_request(self, required: int, limit: int) -> int | None:
        """The size this pool would give a volume asked for within [required, limit].

        A request below the pool's minimum is rounded up to it when the limit allows;
        None when the range and the pool's per-volume bounds do not overlap.
        """
        size = max(required, self.spec.min_volume_size)
        if limit and size > limit:
            return None
        if self.spec.max_volume_size is not None and size > self.spec.max_volume_size:
            return None
        return size

    def reserve(self, allocation: int) -> int | None:
        """Take `allocation` pool bytes; return the extent offset (0 if pooled) or None.

        Nothing (0 bytes) always fits, at offset 0, without an extent (a snapshot that
        shares its blocks)."""
        if allocation == 0:
            return 0
        if allocation > self.free():
            return None
        offset = 0
        if self._extents is not None:
            found = self._extents.allocate(allocation)
            if found is None:
                return None
            offset = found
        self.used += allocation
        return offset

    def load(self, allocations: Sequence[tuple[int, int]], external: int) -> None:
        """Replace the accounting with (offset, allocation) pairs loaded from the store."""
        self.used = sum(allocation for _, allocation in allocations)
        self.external = external
        if self.spec.allocation is Allocation.CONTIGUOUS:
            self._extents = ExtentMap.with_allocations(self.total, list(allocations))

    def resize(self, new_total: int) -> None:
        """Change the pool's size; it cannot shrink below what is in use."""
        floor = self.used + self.external
        if self._extents is not None:
            floor = max(floor, self._extents.highest_allocated_end())
        if new_total < floor:
            raise ValueError(
                f"pool {self.name} cannot shrink below {format_quantity(floor)} in use"
            )
        if self._extents is not None:
            self._extents.resize(new_total)
        self.total = new_total

    def regrow(self, offset: int, allocation: int, new_allocation: int) -> int | None:
        """Move a volume's extent to one of `new_allocation` bytes; return its offset.

        None when it does not fit, and then the pool is exactly as it was (the old
        extent is taken back at its offset, which nothing can have taken meanwhile).
        """
        self.release(offset, allocation)
        new_offset = self.reserve(new_allocation)
        if new_offset is None:
            self._retake(offset, allocation)
        return new_offset

    def undo_regrow(
        self, offset: int, allocation: int, old_offset: int, old_allocation: int
    ) -> None:
        """Reverse a `regrow` whose result could not be committed."""
        self.release(offset, allocation)
        self._retake(old_offset, old_allocation)

    def _retake(self, offset: int, allocation: int) -> None:
        if self._extents is not None and not self._extents.allocate_at(offset, allocation):
            raise RuntimeError(
                f"pool {self.name}: extent {offset}+{allocation} released a moment ago"
                " is no longer free"
            )
        self.used += allocation

    def release(self, offset: int, allocation: int) -> None:
        self.used -= allocation
        if self._extents is not None:
            self._extents.release(offset, allocation)

    def fragments(self) -> int:
        return self._extents.fragments() if self._extents is not None else 1
