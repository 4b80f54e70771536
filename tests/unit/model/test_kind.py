"""Kind arithmetic is exact: a volume's allocation is ceil(size x cost) in integers,
also past 2^53 where a float can no longer hold every byte count."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool, PoolSpec

INT64_MAX = 2**63 - 1
HUGE = st.integers(min_value=2**53 - 2**20, max_value=INT64_MAX // 2)
COSTS = st.sampled_from([1, 2, 1.5, 1.1, 3, 0.5, 1.25])


def test_a_float_cost_is_read_as_the_decimal_it_prints_as() -> None:
    assert VolumeKind("k", 1.1).ratio == Fraction(11, 10)
    assert VolumeKind("k", 2).ratio == 2


def test_the_allocation_of_a_size_above_2_to_the_53_is_exact() -> None:
    # size * 1.0 rounds 2^53 + 1 down to 2^53: the volume would take a byte less.
    assert VolumeKind("striped", 1.0).allocation_for(2**53 + 1) == 2**53 + 1
    assert VolumeKind("mirrored", 2.0).allocation_for(2**62 - 1) == 2**63 - 2


@given(size=HUGE, cost=COSTS)
def test_allocation_is_the_exact_ceiling_of_size_times_cost(size: int, cost: float) -> None:
    exact = Fraction(size) * Fraction(str(cost))
    allocation = VolumeKind("k", cost).allocation_for(size)
    assert allocation >= exact
    assert allocation - 1 < exact


@given(allocation=HUGE, cost=COSTS)
def test_size_for_is_the_largest_size_whose_allocation_fits(allocation: int, cost: float) -> None:
    kind = VolumeKind("k", cost)
    size = kind.size_for(allocation)
    assert kind.allocation_for(size) <= allocation
    assert kind.allocation_for(size + 1) > allocation


@given(total=HUGE, cost=COSTS)
def test_a_huge_pool_never_holds_more_than_its_size(total: int, cost: float) -> None:
    kind = VolumeKind("k", cost)
    pool = Pool(PoolSpec("p", total))
    held = Fraction(0)
    for _ in range(3):  # the largest volume, then whatever still fits
        size = pool.maximum_volume_size(kind)
        if size == 0 or pool.reserve(kind.allocation_for(size)) is None:
            break
        held += size * Fraction(str(cost))
    assert held <= total
