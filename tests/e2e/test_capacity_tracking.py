"""Storage capacity tracking (KEP-1472) end to end: csi-mock answers GetCapacity,
external-provisioner publishes CSIStorageCapacity, kube-scheduler filters nodes by it.

The local cluster has node-1 (real kubelet, zone-a), node-2 (zone-b) and node-3
(zone-a), each with its own 10Gi pool unless a test's driver says otherwise.
Pods that only need scheduling go to the simulated nodes (identical allocatable).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity

from csi_mock.admin.client import AdminClient
from csi_mock.model.quantity import parse_quantity
from csi_mock.proto import csi_pb2, csi_pb2_grpc
from harness.deploy.local import LocalDriver
from harness.deploy.spec import DRIVER_NAMESPACE, NODE_TOPOLOGY_KEY, node_segment
from harness.kube import objects
from harness.kube.waits import (
    SELECTED_NODE,
    AnnotationHistory,
    capacities,
    events,
    pv_topology,
    wait_bound_volume,
    wait_capacity,
    wait_event,
    wait_for,
    wait_pod_scheduled,
    wait_pod_unschedulable,
)

pytestmark = pytest.mark.e2e

GI = 1 << 30
FEATURE = "storage capacity tracking"
NOT_ENOUGH_STORAGE = "did not have enough free storage"
WAITING_CLASSES = ("csi-mock", "csi-mock-mirrored")


def pv_node(kube: Client, claim: str, namespace: str, timeout: float = 60) -> str:
    """The node the claim's volume was provisioned for (its PV's node affinity)."""
    pv = wait_bound_volume(kube, claim, namespace, timeout=timeout)
    (node,) = pv_topology(pv)[NODE_TOPOLOGY_KEY]
    return node


def get_capacity(driver: LocalDriver, segment: dict[str, str], kind: str) -> tuple[int, int]:
    with grpc.insecure_channel(f"unix://{driver.controller_socket}") as channel:
        response = csi_pb2_grpc.ControllerStub(channel).GetCapacity(
            csi_pb2.GetCapacityRequest(
                parameters={"kind": kind},
                accessible_topology=csi_pb2.Topology(segments=segment),
            ),
            timeout=5,
        )
    return response.available_capacity, response.maximum_volume_size.value


@pytest.mark.scenario(FEATURE, "CSIStorageCapacity equals GetCapacity per segment and class")
def test_published_capacity_equals_get_capacity_for_every_segment_and_class(
    kube: Client, driver: LocalDriver
) -> None:
    kinds = {"csi-mock": "striped", "csi-mock-mirrored": "mirrored"}
    objects_seen = list(kube.list(CSIStorageCapacity, namespace=DRIVER_NAMESPACE))
    segments = {
        (tuple(sorted(o.nodeTopology.matchLabels.items())), o.storageClassName)  # type: ignore[union-attr]
        for o in objects_seen
    }
    expected_segments = {
        (tuple(sorted(s.items())), sc)
        for s in (node_segment(n.name, n.zone) for n in driver.nodes)
        for sc in WAITING_CLASSES
    }
    assert segments == expected_segments
    for obj in objects_seen:
        segment = dict(obj.nodeTopology.matchLabels)  # type: ignore[union-attr]
        available, maximum = get_capacity(driver, segment, kinds[obj.storageClassName])
        assert parse_quantity(str(obj.capacity)) == available, segment
        assert parse_quantity(str(obj.maximumVolumeSize)) == maximum, segment


@pytest.mark.scenario(FEATURE, "capacity follows volume creation, deletion and knob changes")
def test_published_capacity_follows_volumes_and_knobs(
    kube: Client, namespace: str, admin: AdminClient
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "2Gi"),
        objects.pod("app", namespace, claims=["data"], nodes=["node-2"]),
    )
    assert pv_node(kube, "data", namespace) == "node-2"
    wait_capacity(kube, {("node-2", "csi-mock"): 8 * GI, ("node-2", "csi-mock-mirrored"): 4 * GI})

    admin.consume("node-3-local", "3Gi")
    wait_capacity(kube, {("node-3", "csi-mock"): 7 * GI})
    admin.resize_pool("node-3-local", "20Gi")
    wait_capacity(kube, {("node-3", "csi-mock"): 17 * GI})
    admin.release("node-3-local", "3Gi")
    wait_capacity(kube, {("node-3", "csi-mock"): 20 * GI})

    kube.delete(Pod, "app", namespace=namespace, grace_period=0)
    kube.delete(PersistentVolumeClaim, "data", namespace=namespace)
    wait_capacity(kube, {("node-2", "csi-mock"): 10 * GI}, timeout=60)


@pytest.mark.scenario(FEATURE, "claim larger than every maximumVolumeSize stays Pending")
def test_claim_larger_than_every_node_stays_pending_with_not_enough_storage(
    kube: Client, namespace: str
) -> None:
    objects.create(
        kube,
        objects.claim("huge", namespace, "11Gi"),
        objects.pod("app", namespace, claims=["huge"]),
    )
    message = wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    assert "3 node(s) did not have enough free storage" in message
    wait_event(kube, namespace, reason="FailedScheduling", contains=NOT_ENOUGH_STORAGE)
    claim = kube.get(PersistentVolumeClaim, "huge", namespace=namespace)
    assert SELECTED_NODE not in (claim.metadata.annotations or {})  # type: ignore[union-attr]


@pytest.mark.driver(node_pool_sizes={"node-2": "20Gi"})
@pytest.mark.scenario(FEATURE, "claim that fits only one node's pool is placed there")
def test_claim_that_fits_only_one_node_is_scheduled_and_provisioned_there(
    kube: Client, namespace: str
) -> None:
    objects.create(
        kube,
        objects.claim("big", namespace, "15Gi"),
        objects.pod("app", namespace, claims=["big"]),
    )
    assert pv_node(kube, "big", namespace) == "node-2"
    assert wait_pod_scheduled(kube, "app", namespace) == "node-2"


@pytest.mark.driver(provisioner_mode="distributed", node_pool_sizes={"node-3": "20Gi"})
@pytest.mark.scenario(FEATURE, "distributed provisioners: each publishes and provisions its node")
def test_distributed_provisioners_publish_capacity_and_provision_on_their_own_node(
    kube: Client, namespace: str, driver: LocalDriver
) -> None:
    # One external-provisioner per node (--node-deployment): together they published
    # every node x class (the driver fixture waited for it); each one's own node only.
    assert set(capacities(kube)) == {(n.name, sc) for n in driver.nodes for sc in WAITING_CLASSES}
    published = list(kube.list(CSIStorageCapacity, namespace=DRIVER_NAMESPACE))
    assert len(published) == len(driver.nodes) * len(WAITING_CLASSES), "one object each"
    assert capacities(kube)[("node-3", "csi-mock")][0] == 20 * GI
    objects.create(
        kube,
        objects.claim("big", namespace, "15Gi"),
        objects.pod("app", namespace, claims=["big"]),
    )
    assert pv_node(kube, "big", namespace) == "node-3"
    wait_capacity(kube, {("node-3", "csi-mock"): 5 * GI})
    succeeded = f'"Succeeded" PVC="{namespace}/big"'
    provisioned_by = {
        node.name
        for node in driver.nodes
        if succeeded in provisioner_log(driver, f"csi-provisioner-{node.name}")
    }
    assert provisioned_by == {"node-3"}


def provisioner_log(driver: LocalDriver, process: str) -> str:
    return Path(driver.supervisor.state.processes[process].log).read_text(errors="replace")


@pytest.mark.parametrize(
    "storage_capacity",
    [
        pytest.param(False, marks=pytest.mark.driver(storage_capacity=False), id="false"),
        pytest.param(None, marks=pytest.mark.driver(storage_capacity=None), id="unset"),
    ],
)
@pytest.mark.scenario(FEATURE, "CSIDriver.storageCapacity false or unset: capacity ignored")
def test_capacity_is_ignored_when_the_csidriver_does_not_ask_for_it(
    kube: Client, namespace: str, storage_capacity: bool | None
) -> None:
    # Published (the provisioner runs with --enable-capacity) yet not used: the
    # scheduler picks a node for an 11Gi claim no pool can hold.
    wait_for(
        "CSIStorageCapacity objects to be published",
        lambda: (len(capacities(kube)) == 6, capacities(kube)),
        timeout=30,
    )
    objects.create(
        kube,
        objects.claim("huge", namespace, "11Gi"),
        objects.pod("app", namespace, claims=["huge"], node_type="simulated"),
    )
    history = AnnotationHistory(kube, "huge", namespace).start()
    try:
        history.wait_for_values(lambda v: any(v), "a selected node")
        wait_event(kube, namespace, reason="ProvisioningFailed", contains="ResourceExhausted")
    finally:
        history.stop()
    assert not events(kube, namespace, contains=NOT_ENOUGH_STORAGE)


@pytest.mark.driver(capacity_poll_interval="1s")
@pytest.mark.scenario(
    FEATURE, "stale capacity: RESOURCE_EXHAUSTED, selected-node dropped, rescheduled"
)
def test_stale_capacity_makes_provisioning_fail_and_the_pod_move_to_a_node_with_room(
    kube: Client, namespace: str, admin: AdminClient
) -> None:
    # GetCapacity keeps answering 10Gi for node-2 while its pool fills up.
    admin.freeze_capacity()
    admin.consume("node-2-local", "8Gi")
    objects.create(kube, objects.claim("data", namespace, "5Gi"))
    history = AnnotationHistory(kube, "data", namespace).start()
    objects.create(
        kube,
        objects.pod(
            "app", namespace, claims=["data"], nodes=["node-2", "node-3"], preferred_node="node-2"
        ),
    )
    try:
        failure = wait_event(
            kube, namespace, reason="ProvisioningFailed", contains="ResourceExhausted"
        )
        assert "node-2" in failure.message or failure.name == "data"
        history.wait_for_values(
            lambda v: v[:3] == [None, "node-2", None] or v[:2] == ["node-2", None],
            "node-2 selected, then dropped",
        )
        # Fresh capacity reaches the scheduler; the pod goes where there is room.
        admin.unfreeze_capacity()
        assert pv_node(kube, "data", namespace) == "node-3"
        values = history.wait_for_values(lambda v: v[-1] == "node-3", "node-3 selected last")
    finally:
        history.stop()
    # node-2 (maybe more than once while capacity was stale), dropped, then node-3.
    chosen = [v for v in values if v is not None]
    assert chosen[0] == "node-2" and chosen[-1] == "node-3", values
    assert set(chosen[:-1]) == {"node-2"}, values
    assert wait_pod_scheduled(kube, "app", namespace) == "node-3"
    exhausted = admin.journal(method="CreateVolume", code="RESOURCE_EXHAUSTED")
    assert exhausted, "the driver must have refused the first CreateVolume"


@pytest.mark.scenario(
    FEATURE, "Immediate binding, exhausted: CreateVolume retried, no selected-node"
)
def test_immediate_binding_with_exhausted_capacity_retries_without_selecting_a_node(
    kube: Client, namespace: str, admin: AdminClient
) -> None:
    for node in ("node-1", "node-2", "node-3"):
        admin.consume(f"{node}-local", "9Gi")
    objects.create(kube, objects.claim("now", namespace, "2Gi", storage_class="csi-mock-immediate"))
    history = AnnotationHistory(kube, "now", namespace).start()
    try:
        wait_for(
            "CreateVolume to be refused at least twice",
            lambda: (
                len(admin.journal(method="CreateVolume", code="RESOURCE_EXHAUSTED")) >= 2,
                [r.code for r in admin.journal(method="CreateVolume")],
            ),
            timeout=60,
        )
    finally:
        values = history.stop()
    claim = kube.get(PersistentVolumeClaim, "now", namespace=namespace)
    assert claim.status.phase == "Pending"  # type: ignore[union-attr]
    assert all(v is None for v in values), values


@pytest.mark.scenario(FEATURE, "mirrored class sees half of what the striped class sees")
def test_storage_class_parameters_change_the_capacity_seen(kube: Client, namespace: str) -> None:
    wait_capacity(
        kube,
        {("node-2", "csi-mock"): 10 * GI, ("node-2", "csi-mock-mirrored"): 5 * GI},
    )
    objects.create(
        kube,
        objects.claim("mirrored", namespace, "6Gi", storage_class="csi-mock-mirrored"),
        objects.pod("mirrored", namespace, claims=["mirrored"], node_type="simulated"),
        objects.claim("striped", namespace, "6Gi"),
        objects.pod("striped", namespace, claims=["striped"], node_type="simulated"),
    )
    wait_pod_unschedulable(kube, "mirrored", namespace, message=NOT_ENOUGH_STORAGE)
    assert pv_node(kube, "striped", namespace) in ("node-2", "node-3")


@pytest.mark.scenario(FEATURE, "generic ephemeral volumes are checked against capacity")
def test_generic_ephemeral_volume_larger_than_every_pool_is_unschedulable(
    kube: Client, namespace: str
) -> None:
    objects.create(
        kube,
        objects.pod(
            "app", namespace, ephemeral=[("scratch", "11Gi", "csi-mock")], node_type="simulated"
        ),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)


@pytest.mark.scenario(FEATURE, "CSI inline ephemeral volumes are not checked against capacity")
def test_csi_inline_ephemeral_volume_is_scheduled_whatever_its_size(
    kube: Client, namespace: str
) -> None:
    objects.create(
        kube,
        objects.pod("app", namespace, inline=[{"size": "11Gi"}], node_type="simulated"),
    )
    assert wait_pod_scheduled(kube, "app", namespace) in ("node-2", "node-3")


@pytest.mark.driver(max_volume_size="4Gi")
@pytest.mark.scenario(FEATURE, "a claim of exactly maximumVolumeSize fits (inclusive)")
def test_claim_of_exactly_maximum_volume_size_fits_and_one_byte_more_does_not(
    kube: Client, namespace: str
) -> None:
    wait_capacity(
        kube,
        {("node-2", "csi-mock"): 10 * GI},
        maximum={("node-2", "csi-mock"): 4 * GI, ("node-3", "csi-mock"): 4 * GI},
    )
    objects.create(
        kube,
        objects.claim("exact", namespace, "4Gi"),
        objects.pod("exact", namespace, claims=["exact"], node_type="simulated"),
        objects.claim("over", namespace, str(4 * GI + 1)),
        objects.pod("over", namespace, claims=["over"], node_type="simulated"),
    )
    assert pv_node(kube, "exact", namespace) in ("node-2", "node-3")
    wait_pod_unschedulable(kube, "over", namespace, message=NOT_ENOUGH_STORAGE)
