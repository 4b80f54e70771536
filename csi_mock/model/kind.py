"""Volume kinds: the storage classes of the backend, chosen by the `kind` parameter."""

from __future__ import annotations

import math
from dataclasses import dataclass

KIND_PARAMETER = "kind"
"""The CreateVolume/GetCapacity parameter that selects a kind (as in csi-driver-host-path)."""


@dataclass(frozen=True)
class VolumeKind:
    """A way of laying a volume out on a pool.

    `cost` is how many bytes of pool space one byte of volume consumes: 1 for a linear
    or striped volume, 2 for a mirrored one (KEP-1472's LVM example).
    """

    name: str
    cost: float = 1.0

    def allocation_for(self, size: int) -> int:
        """Pool bytes consumed by a volume of `size` bytes."""
        return math.ceil(size * self.cost)

    def size_for(self, allocation: int) -> int:
        """The largest volume whose allocation fits in `allocation` pool bytes."""
        if allocation <= 0:
            return 0
        size = math.floor(allocation / self.cost)
        # Float division can overshoot by one on huge values; step back until it fits.
        while size > 0 and self.allocation_for(size) > allocation:
            size -= 1
        return size
