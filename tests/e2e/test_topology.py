"""Topology end to end: NodeGetInfo segments become node labels and CSINode topology
keys, external-provisioner (--strict-topology) passes the selected node's segment to
CreateVolume, the PV's node affinity follows the pool it came from, and kube-scheduler
places pods (and refuses nodes) by that affinity and by StorageClass allowedTopologies.

Nodes: node-1 (real kubelet, zone-a), node-2 (zone-b), node-3 (zone-a).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import grpc
import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.storage_v1 import StorageClass

from csi_mock.proto import csi_pb2, csi_pb2_grpc
from harness.deploy.local import LocalDriver
from harness.deploy.spec import NODE_TOPOLOGY_KEY, ZONE_TOPOLOGY_KEY
from harness.kube import objects
from harness.kube.resources import CSINodeResource, csinode_drivers
from harness.kube.waits import (
    pv_topology,
    wait_bound_volume,
    wait_event,
    wait_pod_running,
    wait_pod_scheduled,
    wait_pod_unschedulable,
)

pytestmark = pytest.mark.e2e

FEATURE = "topology"
ZONE_B_CLASS = "csi-mock-zone-b"
NODE_AFFINITY_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
NO_VOLUME_TO_BIND = "node(s) didn't find available persistent volumes to bind"
ZONE_POOLS_ONLY = pytest.mark.driver(node_pool_size=None, zone_pool_size="10Gi")


def node_get_info(driver: LocalDriver, node: str) -> csi_pb2.NodeGetInfoResponse:
    (instance,) = [n for n in driver.nodes if n.name == node]
    with grpc.insecure_channel(f"unix://{instance.csi_socket}") as channel:
        response: csi_pb2.NodeGetInfoResponse = csi_pb2_grpc.NodeStub(channel).NodeGetInfo(
            csi_pb2.NodeGetInfoRequest(), timeout=5
        )
    return response


@pytest.fixture
def zone_b_class(kube: Client, driver: LocalDriver) -> Iterator[str]:
    """A WaitForFirstConsumer StorageClass whose allowedTopologies is zone-b only."""
    objects.create(
        kube,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": ZONE_B_CLASS},
            "provisioner": driver.spec.name,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": ZONE_TOPOLOGY_KEY, "values": ["zone-b"]}]}
            ],
        },
    )
    yield ZONE_B_CLASS
    with contextlib.suppress(ApiError):
        kube.delete(StorageClass, ZONE_B_CLASS)


@pytest.mark.scenario(FEATURE, "NodeGetInfo segments become node labels and CSINode keys")
def test_node_segments_become_node_labels_and_csinode_topology_keys(
    kube: Client, driver: LocalDriver
) -> None:
    for node in driver.nodes:
        segments = dict(node_get_info(driver, node.name).accessible_topology.segments)
        assert segments == {NODE_TOPOLOGY_KEY: node.name, ZONE_TOPOLOGY_KEY: str(node.zone)}
        labels = kube.get(Node, node.name).metadata.labels or {}  # type: ignore[union-attr]
        assert {k: labels.get(k) for k in segments} == segments, node.name
        (entry,) = [
            d
            for d in csinode_drivers(kube.get(CSINodeResource, node.name))
            if d["name"] == driver.spec.name
        ]
        assert sorted(entry["topologyKeys"]) == sorted(segments), node.name
        assert entry["nodeID"] == node_get_info(driver, node.name).node_id


@pytest.mark.scenario(FEATURE, "node pool: PV affinity is the node key, the pod lands there")
def test_node_pool_volume_has_node_affinity_and_its_pod_runs_on_that_node(
    kube: Client, namespace: str
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi"),
        objects.pod("app", namespace, claims=["data"], node_type="simulated"),
    )
    node = wait_pod_scheduled(kube, "app", namespace)
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv_topology(pv) == {NODE_TOPOLOGY_KEY: {node}}


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: PV affinity is the zone key")
def test_zone_pool_volume_has_zone_affinity(kube: Client, namespace: str) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi"),
        objects.pod("app", namespace, claims=["data"], nodes=["node-3"]),
    )
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv_topology(pv) == {ZONE_TOPOLOGY_KEY: {"zone-a"}}
    assert wait_pod_scheduled(kube, "app", namespace) == "node-3"


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: a zone-a volume is usable from another zone-a node")
def test_zone_pool_volume_is_usable_from_every_node_of_its_zone(
    kube: Client, namespace: str
) -> None:
    # Provisioned for node-3 (simulated), then really mounted on node-1 (same zone).
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi"),
        objects.pod("first", namespace, claims=["data"], nodes=["node-3"]),
    )
    assert wait_pod_scheduled(kube, "first", namespace) == "node-3"
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        ZONE_TOPOLOGY_KEY: {"zone-a"}
    }
    kube.delete(Pod, "first", namespace=namespace, grace_period=0)
    objects.create(kube, objects.pod("second", namespace, claims=["data"], nodes=["node-1"]))
    wait_pod_running(kube, "second", namespace)


@ZONE_POOLS_ONLY
@pytest.mark.scenario(FEATURE, "zone pool: a zone-a volume is refused to a zone-b node")
def test_zone_pool_volume_is_not_usable_from_another_zone(kube: Client, namespace: str) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi"),
        objects.pod("first", namespace, claims=["data"], nodes=["node-3"]),
    )
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        ZONE_TOPOLOGY_KEY: {"zone-a"}
    }
    objects.create(kube, objects.pod("second", namespace, claims=["data"], nodes=["node-2"]))
    message = wait_pod_unschedulable(kube, "second", namespace, message=NODE_AFFINITY_CONFLICT)
    assert f"1 {NODE_AFFINITY_CONFLICT}" in message


@pytest.mark.scenario(FEATURE, "allowedTopologies zone-b: provisioned and scheduled in zone-b")
def test_allowed_topologies_restrict_provisioning_to_the_allowed_zone(
    kube: Client, namespace: str, zone_b_class: str
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", storage_class=zone_b_class),
        objects.pod("app", namespace, claims=["data"]),
    )
    assert wait_pod_scheduled(kube, "app", namespace) == "node-2"
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {
        NODE_TOPOLOGY_KEY: {"node-2"}
    }


@pytest.mark.scenario(FEATURE, "allowedTopologies zone-b, pod pinned to zone-a: unschedulable")
def test_allowed_topologies_conflicting_with_the_pod_leave_it_unschedulable(
    kube: Client, namespace: str, zone_b_class: str
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", storage_class=zone_b_class),
        objects.pod("app", namespace, claims=["data"], nodes=["node-1", "node-3"]),
    )
    message = wait_pod_unschedulable(kube, "app", namespace, message=NO_VOLUME_TO_BIND)
    assert f"2 {NO_VOLUME_TO_BIND}" in message
    wait_event(kube, namespace, reason="FailedScheduling", contains=NO_VOLUME_TO_BIND)
