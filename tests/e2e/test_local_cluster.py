"""The local provider gives a real cluster: Ready nodes (one real kubelet, the rest
simulated), the driver registered on each with its limits and topology, capacity
published by external-provisioner, and a pod with a WaitForFirstConsumer claim
running on the real node with its volume bind-mounted by csi-mock."""

from __future__ import annotations

import contextlib
from typing import Any, cast

import pytest
from lightkube import Client, KubeConfig
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSINode, CSIStorageCapacity

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE, NODE_TOPOLOGY_KEY, ZONE_TOPOLOGY_KEY
from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_mock.admin.client import AdminClient
from csi_mock.model.quantity import parse_quantity

pytestmark = pytest.mark.e2e

GI = 1 << 30


@pytest.fixture(scope="module", autouse=True)
def default_driver(local_cluster: LocalCluster) -> None:
    """These tests describe the cluster as it comes up: undo other modules' drivers."""
    if local_cluster.config.driver != local_cluster.default_driver:
        local_cluster.redeploy_driver(local_cluster.default_driver)


@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster) -> Client:
    return Client(KubeConfig.from_file(local_cluster.kubeconfig), field_manager="csi-harness-tests")


def test_every_node_is_ready_and_labelled_real_or_simulated(
    local_cluster: LocalCluster, kube: Client
) -> None:
    nodes = {n.metadata.name: n for n in kube.list(Node)}  # type: ignore[union-attr]
    expected = {spec.name: spec.type.value for spec in local_cluster.config.nodes()}
    assert set(nodes) == set(expected)
    for name, node in nodes.items():
        conditions = {c.type: c.status for c in node.status.conditions}  # type: ignore[union-attr]
        assert conditions["Ready"] == "True", name
        assert node.metadata.labels[NODE_TYPE_LABEL] == expected[name]  # type: ignore[union-attr,index]
    assert list(expected.values()).count("kubelet") == 1


def test_csinode_has_the_driver_with_node_id_topology_keys_and_volume_limit(
    local_cluster: LocalCluster, kube: Client
) -> None:
    driver = local_cluster.config.driver
    for spec in local_cluster.config.nodes():
        csinode = kube.get(CSINode, spec.name)
        (entry,) = [d for d in csinode.spec.drivers if d.name == driver.name]
        assert entry.nodeID == spec.name
        assert sorted(entry.topologyKeys or []) == sorted([NODE_TOPOLOGY_KEY, ZONE_TOPOLOGY_KEY])
        assert entry.allocatable is not None
        assert entry.allocatable.count == driver.max_volumes_per_node


def test_node_labels_carry_the_segments_the_driver_reports(
    local_cluster: LocalCluster, kube: Client
) -> None:
    for spec in local_cluster.config.nodes():
        labels = kube.get(Node, spec.name).metadata.labels  # type: ignore[union-attr]
        assert labels[NODE_TOPOLOGY_KEY] == spec.name  # type: ignore[index]
        assert labels[ZONE_TOPOLOGY_KEY] == spec.zone  # type: ignore[index]


def test_capacity_is_published_for_every_node_and_waiting_storage_class(
    local_cluster: LocalCluster, kube: Client
) -> None:
    """One object per (topology segment, WaitForFirstConsumer class); a mirrored
    volume costs twice its size, so the mirrored class sees half the pool."""
    pool = parse_quantity(local_cluster.config.driver.node_pool_size or "0")
    expected = {
        (spec.name, sc): pool // (2 if sc == "csi-mock-mirrored" else 1)
        for spec in local_cluster.config.nodes()
        for sc in ("csi-mock", "csi-mock-mirrored")
    }

    def published() -> tuple[bool, dict[tuple[str, str], int]]:
        seen = {}
        for obj in kube.list(CSIStorageCapacity, namespace=DRIVER_NAMESPACE):
            labels = obj.nodeTopology.matchLabels  # type: ignore[union-attr]
            seen[(labels[NODE_TOPOLOGY_KEY], obj.storageClassName)] = parse_quantity(
                str(obj.capacity)
            )
        return seen == expected, seen

    wait_for(f"CSIStorageCapacity objects {expected}", published, timeout=30, interval=0.5)


def test_pod_with_waiting_claim_runs_on_the_real_node_and_sees_its_volume(
    local_cluster: LocalCluster, kube: Client
) -> None:
    namespace = "default"
    real_node = next(s.name for s in local_cluster.config.nodes() if s.type.value == "kubelet")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "lifecycle-data", "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "csi-mock",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "lifecycle-app", "namespace": namespace},
        "spec": {
            "nodeSelector": {NODE_TYPE_LABEL: "kubelet"},
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": "csi-mock.local/busybox:1",
                    "imagePullPolicy": "Never",
                    "command": [
                        "sh",
                        "-c",
                        "echo written-by-pod > /data/file && grep ' /data ' /proc/mounts "
                        "&& sleep 3600",
                    ],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "lifecycle-data"}}],
        },
    }
    kube.create(cast(Any, from_dict(claim)))
    kube.create(cast(Any, from_dict(pod)))
    try:
        running = wait_for(
            "pod lifecycle-app to run",
            lambda: _pod_phase(kube, "lifecycle-app", namespace, "Running"),
            timeout=60,
            interval=0.5,
        )
        assert running.spec.nodeName == real_node
        pvc = kube.get(PersistentVolumeClaim, "lifecycle-data", namespace=namespace)
        pv = kube.get(PersistentVolume, pvc.spec.volumeName)  # type: ignore[union-attr,arg-type]
        volume_id = pv.spec.csi.volumeHandle  # type: ignore[union-attr]
        logs = wait_for(
            "the pod to print its /data mount",
            lambda: _logs_contain(kube, "lifecycle-app", namespace, " /data "),
            timeout=20,
            interval=0.5,
        )
        assert " /data " in logs
        backing = local_cluster.layout.driver / "backend"
        written = list(backing.rglob("file"))
        assert any(p.read_text() == "written-by-pod\n" for p in written), written

        node_admin = local_cluster.driver.admin_socket(real_node)  # type: ignore[union-attr]
        with AdminClient(node_admin) as admin:
            methods = [r.method for r in admin.journal(volume=volume_id)]
        assert "NodeStageVolume" in methods
        assert "NodePublishVolume" in methods
    finally:
        with contextlib.suppress(ApiError):
            kube.delete(Pod, "lifecycle-app", namespace=namespace, grace_period=0)
        with contextlib.suppress(ApiError):
            kube.delete(PersistentVolumeClaim, "lifecycle-data", namespace=namespace)
    wait_for(
        "the pod's volume to be unpublished and deleted",
        lambda: _volume_released(local_cluster, real_node, volume_id),
        timeout=60,
        interval=0.5,
    )


def _pod_phase(kube: Client, name: str, namespace: str, phase: str) -> tuple[bool, Any]:
    pod = kube.get(Pod, name, namespace=namespace)
    status = pod.status
    seen = status.phase if status else None
    if status and status.containerStatuses:
        waiting = status.containerStatuses[0].state.waiting  # type: ignore[union-attr]
        if waiting:
            seen = f"{seen} ({waiting.reason}: {waiting.message})"
    return (status is not None and status.phase == phase), (
        pod if status and status.phase == phase else seen
    )


def _logs_contain(kube: Client, name: str, namespace: str, text: str) -> tuple[bool, str]:
    logs = "".join(kube.log(name, namespace=namespace))
    return text in logs, logs


def _volume_released(cluster: LocalCluster, node: str, volume_id: str) -> tuple[bool, list[str]]:
    driver = cluster.driver
    assert driver is not None
    with AdminClient(driver.admin_socket(node)) as admin:
        node_calls = [r.method for r in admin.journal(volume=volume_id) if r.code == "OK"]
    with AdminClient(driver.admin_socket("controller")) as admin:
        controller_calls = [r.method for r in admin.journal(volume=volume_id) if r.code == "OK"]
    calls = node_calls + controller_calls
    done = {"NodeUnpublishVolume", "NodeUnstageVolume", "DeleteVolume"} <= set(calls)
    return done, calls
