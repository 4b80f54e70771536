import pytest

from csi_mock.model.errors import CapacityExhausted, InvalidArgument, OutOfRange
from csi_mock.model.kind import VolumeKind
from csi_mock.model.placement import (
    PlacementRequest,
    can_take_data_from,
    candidate_pools,
    place_volume,
    range_for_source,
)
from csi_mock.model.pool import Pool, PoolSpec

GI = 2**30
KEY = "topology.csi-mock.example/node"
ZONE = "topology.kubernetes.io/zone"
STRIPED = VolumeKind("striped")


def make_pools() -> list[Pool]:
    return [
        Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"}, max_volume_size=4 * GI)),
        Pool(PoolSpec("n2", 20 * GI, {KEY: "n2"})),
        Pool(PoolSpec("zone-a", 50 * GI, {ZONE: "a"})),
        Pool(PoolSpec("everywhere", 5 * GI)),
    ]


def test_preferred_segments_are_tried_first_in_their_order() -> None:
    pools = make_pools()
    request = PlacementRequest(
        STRIPED,
        GI,
        requisite=[{KEY: "n1", ZONE: "a"}, {KEY: "n2", ZONE: "b"}],
        preferred=[{KEY: "n2", ZONE: "b"}, {KEY: "n1", ZONE: "a"}],
    )
    names = [p.name for p in candidate_pools(request, pools)]
    assert names == ["n2", "everywhere", "n1", "zone-a"]


def test_volume_goes_to_the_next_pool_when_the_preferred_one_is_full() -> None:
    pools = make_pools()[:3]
    request = PlacementRequest(
        STRIPED, 5 * GI, requisite=[{KEY: "n1"}, {KEY: "n2"}], preferred=[{KEY: "n1"}]
    )
    placement = place_volume(request, pools)
    assert placement.pool.name == "n2"  # n1 caps volumes at 4Gi


def test_placement_deducts_the_allocation_of_the_kind() -> None:
    pools = make_pools()
    placement = place_volume(
        PlacementRequest(VolumeKind("mirrored", 2), GI, requisite=[{KEY: "n2"}]), pools
    )
    assert placement.allocation == 2 * GI
    assert pools[1].used == 2 * GI


def test_no_pool_reachable_from_the_requisite_topology_is_resource_exhausted() -> None:
    with pytest.raises(CapacityExhausted, match="reachable"):
        place_volume(PlacementRequest(STRIPED, GI, requisite=[{KEY: "n9"}]), make_pools()[:3])


def test_size_above_every_pools_maximum_is_out_of_range() -> None:
    pools = [Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"}, max_volume_size=4 * GI))]
    with pytest.raises(OutOfRange):
        place_volume(PlacementRequest(STRIPED, 5 * GI), pools)


def test_size_that_fits_a_pool_without_room_is_resource_exhausted() -> None:
    pools = [Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"}))]
    place_volume(PlacementRequest(STRIPED, 8 * GI), pools)
    with pytest.raises(CapacityExhausted, match="no allowed pool has room"):
        place_volume(PlacementRequest(STRIPED, 3 * GI), pools)


def test_default_size_is_used_when_no_range_is_given_and_bounded_by_limit() -> None:
    pools = make_pools()
    assert place_volume(PlacementRequest(STRIPED, default_size=GI), pools).size == GI
    limited = PlacementRequest(STRIPED, limit_bytes=GI // 2, default_size=GI)
    assert place_volume(limited, pools).size == GI // 2


def test_without_a_range_the_default_is_clamped_to_the_pools_maximum_volume_size() -> None:
    pools = [Pool(PoolSpec("small", 10 * GI, max_volume_size=GI // 10))]
    assert place_volume(PlacementRequest(STRIPED, default_size=GI), pools).size == GI // 10


def test_without_a_range_the_default_is_clamped_to_what_fits_in_the_pool() -> None:
    pools = [Pool(PoolSpec("tiny", GI // 2))]
    placement = place_volume(PlacementRequest(STRIPED, default_size=GI), pools)
    assert placement.size == GI // 2


def test_without_a_range_the_default_is_clamped_per_pool_in_placement_order() -> None:
    pools = [Pool(PoolSpec("a", 10 * GI, max_volume_size=GI // 4)), Pool(PoolSpec("b", 10 * GI))]
    placement = place_volume(PlacementRequest(STRIPED, default_size=GI), pools)
    assert (placement.pool.name, placement.size) == ("a", GI // 4)


def test_without_a_range_a_full_pool_is_still_resource_exhausted() -> None:
    pools = [Pool(PoolSpec("full", GI))]
    place_volume(PlacementRequest(STRIPED, GI), pools)
    with pytest.raises(CapacityExhausted):
        place_volume(PlacementRequest(STRIPED, default_size=GI), pools)


def test_without_a_range_the_default_stays_above_the_pools_minimum() -> None:
    pools = [Pool(PoolSpec("p", 10 * GI, min_volume_size=2 * GI))]
    assert place_volume(PlacementRequest(STRIPED, default_size=GI), pools).size == 2 * GI


def test_negative_sizes_are_invalid_and_required_above_limit_out_of_range() -> None:
    with pytest.raises(InvalidArgument):
        place_volume(PlacementRequest(STRIPED, -1), make_pools())
    with pytest.raises(OutOfRange):
        place_volume(PlacementRequest(STRIPED, 2 * GI, limit_bytes=GI), make_pools())


def test_pools_serving_other_kinds_are_not_candidates() -> None:
    pools = [Pool(PoolSpec("fast", 10 * GI, kinds=frozenset({"fast"})))]
    with pytest.raises(CapacityExhausted):
        place_volume(PlacementRequest(STRIPED, GI), pools)


# -- volumes created from a snapshot or a volume ---------------------------------------


def test_a_volume_from_a_source_goes_only_to_pools_of_the_sources_segment() -> None:
    pools = make_pools()
    request = PlacementRequest(STRIPED, GI, source_segment={KEY: "n2"})
    assert [p.name for p in candidate_pools(request, pools)] == ["n2"]


def test_a_pool_within_the_sources_segment_can_take_its_data() -> None:
    zone_pool = Pool(PoolSpec("zone-a", 10 * GI, {ZONE: "a"}))
    node_in_zone = Pool(PoolSpec("a-n1", 10 * GI, {ZONE: "a", KEY: "n1"}))
    node_elsewhere = Pool(PoolSpec("b-n2", 10 * GI, {ZONE: "b", KEY: "n2"}))
    everywhere = Pool(PoolSpec("everywhere", 10 * GI))
    pools = [zone_pool, node_in_zone, node_elsewhere, everywhere]

    request = PlacementRequest(STRIPED, GI, source_segment={ZONE: "a"})

    assert [p.name for p in candidate_pools(request, pools)] == ["zone-a", "a-n1"]
    assert can_take_data_from(everywhere, {}) and not can_take_data_from(everywhere, {ZONE: "a"})


def test_a_source_pool_outside_the_requisite_topology_is_resource_exhausted() -> None:
    request = PlacementRequest(STRIPED, GI, requisite=[{KEY: "n1"}], source_segment={KEY: "n2"})
    with pytest.raises(CapacityExhausted, match="holds data of segment"):
        place_volume(request, make_pools()[:3])


def test_a_full_source_pool_is_resource_exhausted_though_others_have_room() -> None:
    pools = make_pools()
    pools[0].reserve(10 * GI)
    with pytest.raises(CapacityExhausted, match="no allowed pool has room"):
        place_volume(PlacementRequest(STRIPED, GI, source_segment={KEY: "n1"}), pools)


def test_a_volume_from_a_source_is_at_least_as_large_as_the_source() -> None:
    assert range_for_source(0, 0, 3 * GI, "snapshot s") == 3 * GI
    assert range_for_source(GI, 0, 3 * GI, "snapshot s") == 3 * GI
    assert range_for_source(5 * GI, 0, 3 * GI, "snapshot s") == 5 * GI


def test_a_limit_below_the_sources_size_is_out_of_range() -> None:
    with pytest.raises(OutOfRange, match="cannot hold snapshot s of 3221225472 bytes"):
        range_for_source(0, 2 * GI, 3 * GI, "snapshot s")
