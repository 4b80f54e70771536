"""Volume kinds: the storage classes of the backend, chosen by the `kind` parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

KIND_PARAMETER = "kind"
"""The CreateVolume/GetCapacity parameter that selects a kind (as in csi-driver-host-path)."""


@dataclass(frozen=True)
class VolumeKind:
    """A way of laying a volume out on a pool.

    `cost` is how many bytes of pool space one byte of volume consumes: 1 for a linear
    or striped volume, 2 for a mirrored one (KEP-1472's LVM example).

    Every size calculation is exact integer arithmetic on `ratio`, the cost as a
    fraction: a float holds every integer only up to 2^53, and a pool above that
    could otherwise hold a byte more than its size. A float cost is read as the
    shortest decimal that prints as it (1.1 is 11/10, what the configuration said),
    not as its binary approximation.
    """

    name: str
    cost: float | Fraction = 1
    ratio: Fraction = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ratio = Fraction(repr(self.cost)) if isinstance(self.cost, float) else Fraction(self.cost)
        if ratio <= 0:
            raise ValueError(f"kind {self.name}: cost must be positive, not {self.cost}")
        object.__setattr__(self, "ratio", ratio)

    def allocation_for(self, size: int) -> int:
        """Pool bytes consumed by a volume of `size` bytes: ceil(size x cost)."""
        return -(-size * self.ratio.numerator // self.ratio.denominator)

    def size_for(self, allocation: int) -> int:
        """The largest volume whose allocation fits in `allocation` pool bytes:
        floor(allocation / cost), since ceil(size x cost) <= allocation exactly when
        size x cost <= allocation."""
        if allocation <= 0:
            return 0
        return allocation * self.ratio.denominator // self.ratio.numerator
