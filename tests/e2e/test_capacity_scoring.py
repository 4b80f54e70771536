"""Capacity scoring (KEP-1845's successor, KEP-4049 StorageCapacityScoring): the
scheduler's VolumeBinding plugin scores nodes by how much of their published
capacity a pod's new volumes would use, through a configurable shape.

Both candidates are simulated nodes with identical allocatable, so no other score
plugin tells them apart; only their pools differ.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lightkube import Client

from csi_mock.admin.client import AdminClient
from harness.kube import objects
from harness.kube.waits import wait_capacity, wait_pod_scheduled
from harness.local.cluster import LocalCluster
from harness.local.config import Component

pytestmark = pytest.mark.e2e

GI = 1 << 30
FEATURE = "capacity scoring"
GATE = "StorageCapacityScoring"
CANDIDATES = ["node-2", "node-3"]

# Higher utilization of the published capacity scores higher: fill the fullest node.
INVERTED_SHAPE = {
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {
                    "name": "VolumeBinding",
                    "args": {
                        "bindTimeoutSeconds": 600,
                        "shape": [
                            {"utilization": 0, "score": 0},
                            {"utilization": 100, "score": 10},
                        ],
                    },
                }
            ],
        }
    ]
}


@pytest.fixture(autouse=True)
def scoring_enabled(local_cluster: LocalCluster) -> None:
    # Beta and on by default in Kubernetes 1.37 (the version this harness pins).
    if not local_cluster.config.feature_gates_for(Component.SCHEDULER).get(GATE, True):
        pytest.skip(f"the cluster's kube-scheduler runs with {GATE}=false")


@pytest.fixture
def inverted_shape(local_cluster: LocalCluster) -> Iterator[None]:
    original = dict(local_cluster.config.scheduler)
    local_cluster.restart_scheduler(INVERTED_SHAPE)
    yield
    local_cluster.restart_scheduler(original)


def place(kube: Client, namespace: str, name: str, size: str) -> str:
    objects.create(
        kube,
        objects.claim(name, namespace, size),
        objects.pod(name, namespace, claims=[name], nodes=CANDIDATES),
    )
    return wait_pod_scheduled(kube, name, namespace)


@pytest.mark.driver(node_pool_sizes={"node-2": "30Gi", "node-3": "20Gi"})
@pytest.mark.scenario(FEATURE, "default shape: the node with the most free capacity wins")
def test_default_shape_places_the_pod_on_the_node_with_most_free_capacity(
    kube: Client, namespace: str
) -> None:
    wait_capacity(kube, {("node-2", "csi-mock"): 30 * GI, ("node-3", "csi-mock"): 20 * GI})
    assert place(kube, namespace, "data", "5Gi") == "node-2"


@pytest.mark.driver(node_pool_sizes={"node-2": "30Gi", "node-3": "6Gi"})
@pytest.mark.scenario(FEATURE, "inverted shape: the fullest node that still fits wins")
def test_inverted_shape_places_the_pod_on_the_fullest_node_that_still_fits(
    kube: Client, namespace: str, admin: AdminClient, inverted_shape: None
) -> None:
    wait_capacity(kube, {("node-2", "csi-mock"): 30 * GI, ("node-3", "csi-mock"): 6 * GI})
    assert place(kube, namespace, "fits", "5Gi") == "node-3"
    # node-3 now has 1Gi left: the next 5Gi claim no longer fits there.
    wait_capacity(kube, {("node-3", "csi-mock"): 1 * GI})
    assert place(kube, namespace, "next", "5Gi") == "node-2"
