from csi_mock.model.capacity_report import capacity_at
from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool, PoolSpec

GI = 2**30
KEY = "topology.csi-mock.example/node"
ZONE = "topology.kubernetes.io/zone"
STRIPED = VolumeKind("striped")


def test_each_segment_reports_its_own_pools_maximum_volume_size() -> None:
    pools = [
        Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"}, max_volume_size=4 * GI)),
        Pool(PoolSpec("n2", 20 * GI, {KEY: "n2"}, max_volume_size=8 * GI)),
    ]
    assert capacity_at({KEY: "n1"}, STRIPED, pools).maximum_volume_size == 4 * GI
    assert capacity_at({KEY: "n2"}, STRIPED, pools).maximum_volume_size == 8 * GI


def test_a_location_adds_up_node_zone_and_global_pools() -> None:
    pools = [
        Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"})),
        Pool(PoolSpec("zone-a", 30 * GI, {ZONE: "a"})),
        Pool(PoolSpec("zone-b", 70 * GI, {ZONE: "b"})),
        Pool(PoolSpec("global", 5 * GI)),
    ]
    report = capacity_at({KEY: "n1", ZONE: "a"}, STRIPED, pools)
    assert report.available_capacity == 45 * GI
    assert report.maximum_volume_size == 30 * GI


def test_no_topology_means_every_pool() -> None:
    pools = [Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"})), Pool(PoolSpec("n2", GI, {KEY: "n2"}))]
    assert capacity_at(None, STRIPED, pools).available_capacity == 11 * GI


def test_unreachable_location_reports_zero() -> None:
    pools = [Pool(PoolSpec("n1", 10 * GI, {KEY: "n1"}))]
    report = capacity_at({KEY: "n9"}, STRIPED, pools)
    assert (report.available_capacity, report.maximum_volume_size) == (0, 0)


def test_minimum_volume_size_is_the_smallest_any_reachable_pool_accepts() -> None:
    pools = [
        Pool(PoolSpec("a", 10 * GI, min_volume_size=GI)),
        Pool(PoolSpec("b", 10 * GI, min_volume_size=2 * GI)),
    ]
    assert capacity_at(None, STRIPED, pools).minimum_volume_size == GI
