import pytest

from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Allocation, Pool, PoolSpec

GI = 2**30
STRIPED = VolumeKind("striped", 1)
MIRRORED = VolumeKind("mirrored", 2)


def pool(**kwargs: object) -> Pool:
    spec: dict[str, object] = {"name": "p", "size": 10 * GI}
    spec.update(kwargs)
    return Pool(PoolSpec(**spec))  # type: ignore[arg-type]


def test_mirrored_kind_sees_half_the_capacity_of_striped() -> None:
    p = pool()
    assert p.available_capacity(STRIPED) == 10 * GI
    assert p.available_capacity(MIRRORED) == 5 * GI
    assert p.maximum_volume_size(MIRRORED) == 5 * GI


def test_maximum_volume_size_is_capped_by_the_per_volume_maximum() -> None:
    assert pool(max_volume_size=4 * GI).maximum_volume_size(STRIPED) == 4 * GI


def test_maximum_volume_size_is_zero_when_free_space_is_below_the_minimum() -> None:
    p = pool(size=GI, min_volume_size=2 * GI)
    assert p.maximum_volume_size(STRIPED) == 0


def test_contiguous_pool_reports_the_largest_extent_as_maximum() -> None:
    p = pool(size=10 * GI, allocation=Allocation.CONTIGUOUS)
    offsets = [p.reserve(2 * GI) for _ in range(5)]
    assert None not in offsets
    p.release(offsets[1] or 0, 2 * GI)
    p.release(offsets[3] or 0, 2 * GI)
    assert p.available_capacity(STRIPED) == 4 * GI
    assert p.maximum_volume_size(STRIPED) == 2 * GI


def test_external_consumption_reduces_free_space() -> None:
    p = pool()
    p.load([], external=3 * GI)
    assert p.free() == 7 * GI


def test_reserve_fails_without_room_and_changes_nothing() -> None:
    p = pool(size=GI)
    assert p.reserve(2 * GI) is None
    assert p.used == 0


def test_resize_refuses_to_shrink_below_used_space() -> None:
    p = pool(size=10 * GI)
    p.reserve(6 * GI)
    with pytest.raises(ValueError, match="cannot shrink"):
        p.resize(5 * GI)
    p.resize(20 * GI)
    assert p.free() == 14 * GI


def test_size_for_request_rounds_up_to_the_pool_minimum_within_the_limit() -> None:
    p = pool(min_volume_size=GI)
    assert p.size_for_request(1, 0) == GI
    assert p.size_for_request(1, GI // 2) is None


def test_regrow_moves_a_volume_to_a_larger_allocation() -> None:
    p = pool()
    offset = p.reserve(3 * GI)
    assert offset is not None

    assert p.regrow(offset, 3 * GI, 5 * GI) is not None
    assert p.used == 5 * GI


def test_regrow_that_does_not_fit_leaves_the_pool_as_it_was() -> None:
    p = pool(allocation=Allocation.CONTIGUOUS)
    first = p.reserve(3 * GI)
    p.reserve(4 * GI)
    p.reserve(3 * GI)
    assert first is not None
    before = (p.used, p.free(), p.largest_free_extent(), p.fragments())

    assert p.regrow(first, 3 * GI, 4 * GI) is None
    assert (p.used, p.free(), p.largest_free_extent(), p.fragments()) == before
    # The old extent is held again: nothing else fits at offset 0.
    assert p.reserve(GI) is None


def test_undo_regrow_gives_back_the_new_extent_and_retakes_the_old_one() -> None:
    p = pool(allocation=Allocation.CONTIGUOUS)
    first = p.reserve(3 * GI)
    p.reserve(3 * GI)
    assert first is not None
    grown = p.regrow(first, 3 * GI, 4 * GI)
    assert grown is not None and grown != first

    p.undo_regrow(grown, 4 * GI, first, 3 * GI)

    assert p.used == 6 * GI
    assert p.largest_free_extent() == 4 * GI
    assert p.reserve(4 * GI) == 6 * GI


def test_reserving_nothing_fits_even_a_full_contiguous_pool_and_takes_no_extent() -> None:
    p = pool(size=2 * GI, allocation=Allocation.CONTIGUOUS)
    assert p.reserve(2 * GI) == 0
    assert p.reserve(0) == 0
    p.release(0, 0)
    assert (p.used, p.largest_free_extent()) == (2 * GI, 0)


def test_a_snapshot_charge_loaded_with_the_volumes_keeps_its_extent() -> None:
    p = pool(size=4 * GI, allocation=Allocation.CONTIGUOUS)
    p.load([(0, GI), (GI, 2 * GI), (3 * GI, 0)], external=0)
    assert (p.used, p.largest_free_extent()) == (3 * GI, GI)
