import pytest

from csi_mock.model.errors import CapacityExhausted, InvalidArgument, OutOfRange
from csi_mock.model.kind import VolumeKind
from csi_mock.model.placement import PlacementRequest, candidate_pools, place_volume
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


def test_negative_sizes_are_invalid_and_required_above_limit_out_of_range() -> None:
    with pytest.raises(InvalidArgument):
        place_volume(PlacementRequest(STRIPED, -1), make_pools())
    with pytest.raises(OutOfRange):
        place_volume(PlacementRequest(STRIPED, 2 * GI, limit_bytes=GI), make_pools())


def test_pools_serving_other_kinds_are_not_candidates() -> None:
    pools = [Pool(PoolSpec("fast", 10 * GI, kinds=frozenset({"fast"})))]
    with pytest.raises(CapacityExhausted):
        place_volume(PlacementRequest(STRIPED, GI), pools)
