from csi_mock.model.extents import ExtentMap


def test_allocations_are_first_fit_from_offset_zero() -> None:
    space = ExtentMap(100)
    assert space.allocate(30) == 0
    assert space.allocate(30) == 30
    assert space.largest_free() == 40


def test_released_extents_merge_with_free_neighbours() -> None:
    space = ExtentMap(100)
    a, b, c = space.allocate(30), space.allocate(30), space.allocate(40)
    assert (a, b, c) == (0, 30, 60)
    space.release(0, 30)
    space.release(60, 40)
    assert space.fragments() == 2
    space.release(30, 30)
    assert space.fragments() == 1
    assert space.largest_free() == 100


def test_fragmentation_limits_the_largest_allocation_below_total_free() -> None:
    space = ExtentMap(100)
    offsets = [space.allocate(20) for _ in range(5)]
    space.release(offsets[1], 20)
    space.release(offsets[3], 20)
    assert space.free_bytes() == 40
    assert space.largest_free() == 20
    assert space.allocate(30) is None


def test_with_allocations_rebuilds_the_same_free_map() -> None:
    space = ExtentMap.with_allocations(100, [(50, 10), (0, 20)])
    assert space.free_bytes() == 70
    assert space.largest_free() == 40
    assert space.allocate(30) == 20


def test_allocate_at_takes_exactly_the_given_extent() -> None:
    space = ExtentMap(100)
    assert space.allocate_at(40, 20)
    assert space.largest_free() == 40
    assert not space.allocate_at(50, 5)
    assert space.allocate(40) == 0


def test_resize_grows_the_trailing_free_extent() -> None:
    space = ExtentMap(100)
    space.allocate(100)
    space.resize(150)
    assert space.largest_free() == 50
    assert space.highest_allocated_end() == 100
