"""Topology end to end: NodeGetInfo segments become node labels and CSINode topology
keys, external-provisioner (--strict-topology) passes the selected node's segment to
CreateVolume, the PV's node affinity follows the pool it came from, and kube-scheduler
places pods (and refuses nodes) by that affinity and by StorageClass allowedTopologies.

Nodes are picked by zone, and a test whose zones the cluster lacks is skipped: the
zone pool tests need a node in a zone, a second zone, or a zone with two nodes one of
which runs pods; the allowedTopologies tests two zones. (The local provider has
node-1, with the real kubelet, and node-3 in zone-a, and node-2 in zone-b.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.storage_v1 import StorageClass

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.kube.waits import (
    pv_topology,
    wait_bound_volume,
    wait_event,
    wait_pod_running,
    wait_pod_scheduled,
    wait_pod_unschedulable,
)
from csi_harness._internal.providers.base import ClusterNode, Driver, scheduling_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

FEATURE = "topology"
ALLOWED_ZONE_CLASS = "csi-mock-one-zone"
NODE_AFFINITY_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
NO_VOLUME_TO_BIND = "node(s) didn't find available persistent volumes to bind"
ZONE_POOLS_ONLY = pytest.mark.driver(node_pool_size=None, zone_pool_size="10Gi")


def zones_of(nodes: Sequence[ClusterNode]) -> dict[str, list[ClusterNode]]:
    """Zone -> its nodes, by name; nodes without a zone are left out."""
    zones: dict[str, list[ClusterNode]] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        if node.zone is not None:
            zones.setdefault(node.zone, []).append(node)
    return zones


def node_in_a_zone(driver: Driver) -> ClusterNode:
    """A node in a zone for pods that only need scheduling; or the test is skipped."""
    for node in scheduling_nodes(driver.nodes):
        if node.zone is not None:
            return node
    pytest.skip("needs a node in a zone; no node of the cluster has a zone")


def node_in_another_zone(driver: Driver, zone: str) -> ClusterNode:
    """A node outside ``zone`` (but in a zone); or the test is skipped."""
    for other, members in zones_of(driver.nodes).items():
        if other != zone:
            return members[0]
    pytest.skip(f"needs a second zone besides {zone}; the cluster has no other")


def two_nodes_of_one_zone(driver: Driver) -> tuple[ClusterNode, ClusterNode]:
    """A node for pods that only need scheduling and another node of its zone that
    runs pods; or the test is skipped."""
    for members in zones_of(driver.nodes).values():
        for runs_pods in (n for n in members if n.runs_pods):
            others = [n for n in scheduling_nodes(members) if n != runs_pods]
            if others:
                return others[0], runs_pods
    layout = {zone: [n.name for n in members] for zone, members in zones_of(driver.nodes).items()}
    pytest.skip(f"needs a zone with two nodes, one of which runs pods; the cluster has {layout}")


def smallest_zone(driver: Driver) -> tuple[str, list[str]]:
    """The zone with the fewest nodes and its nodes, when there are two zones or more
    (else the test is skipped): a class allowed only there leaves a choice to make."""
    zones = zones_of(driver.nodes)
    if len(zones) < 2:
        pytest.skip(f"needs two zones; the cluster has {sorted(zones) or 'none'}")
    zone = min(zones, key=lambda z: (len(zones[z]), z))
    return zone, [n.name for n in zones[zone]]


@pytest.fixture
def allowed_zone(kube: Client, driver: Driver) -> Iterator[tuple[str, list[str]]]:
    """A WaitForFirstConsumer StorageClass whose allowedTopologies is one zone: that
    zone's nodes (the class is ``ALLOWED_ZONE_CLASS``)."""
    zone, members = smallest_zone(driver)
    objects.create(
        kube,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": driver.spec.storage_class(ALLOWED_ZONE_CLASS)},
            "provisioner": driver.spec.name,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
            "allowedTopologies": [
                {
                    "matchLabelExpressions": [
                        {"key": driver.spec.zone_topology_key, "values": [zone]}
                    ]
                }
            ],
        },
    )
    yield zone, members
    with contextlib.suppress(ApiError):
        kube.delete(StorageClass, driver.spec.storage_class(ALLOWED_ZONE_CLASS))


@pytest.mark.scenario(FEATURE, "NodeGetInfo segments become node labels and CSINode keys")
def test_node_segments_become_node_labels_and_csinode_topology_keys(
    kube: Client, driver: Driver
) -> None:
    for node in driver.nodes:
        node_id, segments = driver.node_get_info(node.name)
        assert segments == driver.spec.segment(node.name, node.zone), node.name
        labels = kube.get(Node, node.name).metadata.labels or {}  # type: ignore[union-attr]
        assert {k: labels.get(k) for k in segments} == segments, node.name
        (entry,) = [
            d
            for d in csinode_drivers(kube.get(CSINodeResource, node.name))
            if d["name"] == driver.spec.name
        ]
        assert sorted(entry["topologyKeys"]) == sorted(segments), node.name
        assert entry["nodeID"] == node_id, node.name


@pytest.mark.scenario(FEATURE, "node pool: PV affinity is the node key, the pod lands there")
def test_node_pool_volume_has_node_affinity_and_its_pod_runs_on_that_node(
    kube: Client, namespace: str, driver: Driver
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod(
            "app",
            namespace,
            claims=["data"],
            nodes=[n.name for n in scheduling_nodes(driver.nodes)],
        ),
    )
    node = wait_pod_scheduled(kube, "app", namespace)
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv_topology(pv) == {driver.spec.node_topology_key: {node}}


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: PV affinity is the zone key")
def test_zone_pool_volume_has_zone_affinity(kube: Client, namespace: str, driver: Driver) -> None:
    node = node_in_a_zone(driver)
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node.name]),
    )
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv_topology(pv) == {driver.spec.zone_topology_key: {node.zone}}
    assert wait_pod_scheduled(kube, "app", namespace) == node.name


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: the volume is usable from another node of its zone")
def test_zone_pool_volume_is_usable_from_every_node_of_its_zone(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # Provisioned for one node of the zone, then really mounted on another.
    first, runs_pods = two_nodes_of_one_zone(driver)
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("first", namespace, claims=["data"], nodes=[first.name]),
    )
    assert wait_pod_scheduled(kube, "first", namespace) == first.name
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        driver.spec.zone_topology_key: {first.zone}
    }
    kube.delete(Pod, "first", namespace=namespace, grace_period=0)
    objects.create(kube, objects.pod("second", namespace, claims=["data"], nodes=[runs_pods.name]))
    wait_pod_running(kube, "second", namespace)


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: the volume is refused to a node of another zone")
def test_zone_pool_volume_is_not_usable_from_another_zone(
    kube: Client, namespace: str, driver: Driver
) -> None:
    first = node_in_a_zone(driver)
    assert first.zone is not None
    elsewhere = node_in_another_zone(driver, first.zone)
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("first", namespace, claims=["data"], nodes=[first.name]),
    )
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        driver.spec.zone_topology_key: {first.zone}
    }
    objects.create(kube, objects.pod("second", namespace, claims=["data"], nodes=[elsewhere.name]))
    message = wait_pod_unschedulable(kube, "second", namespace, message=NODE_AFFINITY_CONFLICT)
    assert f"1 {NODE_AFFINITY_CONFLICT}" in message


@pytest.mark.scenario(FEATURE, "allowedTopologies one zone: provisioned and scheduled there")
def test_allowed_topologies_restrict_provisioning_to_the_allowed_zone(
    kube: Client, namespace: str, driver: Driver, allowed_zone: tuple[str, list[str]]
) -> None:
    _, members = allowed_zone
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class(ALLOWED_ZONE_CLASS)),
        objects.pod("app", namespace, claims=["data"]),
    )
    node = wait_pod_scheduled(kube, "app", namespace)
    assert node in members
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        driver.spec.node_topology_key: {node}
    }


@pytest.mark.scenario(FEATURE, "allowedTopologies one zone, pod pinned elsewhere: unschedulable")
def test_allowed_topologies_conflicting_with_the_pod_leave_it_unschedulable(
    kube: Client, namespace: str, driver: Driver, allowed_zone: tuple[str, list[str]]
) -> None:
    _, members = allowed_zone
    elsewhere = [n.name for n in driver.nodes if n.name not in members]
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class(ALLOWED_ZONE_CLASS)),
        objects.pod("app", namespace, claims=["data"], nodes=elsewhere),
    )
    message = wait_pod_unschedulable(kube, "app", namespace, message=NO_VOLUME_TO_BIND)
    assert f"{len(elsewhere)} {NO_VOLUME_TO_BIND}" in message
    wait_event(kube, namespace, reason="FailedScheduling", contains=NO_VOLUME_TO_BIND)
