"""kube-scheduler's requeue paths on a real cluster: a pod refused for want of storage or
of a volume slot is scheduled, without being recreated, once the cluster event that
should wake it happens.

An unschedulable pod is retried either when an event its plugins registered for
arrives (a queueing hint says it may now fit) or, failing that, when the scheduler
flushes pods that have waited ``podMaxInUnschedulablePodsDuration`` (5 minutes). Each
wait here is well under that flush, so a missed event fails the test rather than
passing late.
"""

from __future__ import annotations

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity
from lightkube.types import PatchType

from csi_harness._internal.deploy.spec import node_pool_name
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    AnnotationHistory,
    volume_attachments,
    wait_bound_volume,
    wait_capacity,
    wait_for,
    wait_pod_scheduled,
    wait_pod_unschedulable,
    wait_volume_attachment,
)
from csi_harness._internal.providers.base import Driver, Unsupported, pick_nodes, scheduling_nodes
from csi_mock.admin.client import AdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

GI = 1 << 30
FEATURE = "scheduling requeue"
NOT_ENOUGH_STORAGE = "did not have enough free storage"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
REQUEUE_TIMEOUT = 90
"""Well below the scheduler's 5-minute flush of unschedulable pods: the event must do it."""


def scheduling_node_names(driver: Driver, count: int) -> list[str]:
    """``count`` nodes for pods that only need scheduling, or the test is skipped."""
    try:
        return [n.name for n in pick_nodes(scheduling_nodes(driver.nodes), count)]
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))


def uid_of(kube: Client, pod: str, namespace: str) -> str:
    return str(kube.get(Pod, pod, namespace=namespace).metadata.uid)  # type: ignore[union-attr]


@pytest.mark.driver(capacity_poll_interval="1s")
@pytest.mark.scenario(FEATURE, "a pod refused for storage is scheduled once a pool grows")
def test_a_pod_refused_for_storage_is_scheduled_when_a_pool_grows(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    (node,) = scheduling_node_names(driver, 1)
    striped = driver.spec.storage_class()
    objects.create(
        kube,
        objects.claim("big", namespace, "15Gi", striped),
        objects.pod("app", namespace, claims=["big"], nodes=[node]),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    refused = uid_of(kube, "app", namespace)

    admin.resize_pool(node_pool_name(node), "20Gi")
    wait_capacity(kube, driver.spec, {(node, striped): 20 * GI}, timeout=60)

    assert wait_pod_scheduled(kube, "app", namespace, timeout=REQUEUE_TIMEOUT) == node
    assert uid_of(kube, "app", namespace) == refused


@pytest.mark.driver(publish_capacity=False)
@pytest.mark.scenario(
    FEATURE, "a pod refused for storage is scheduled once a CSIStorageCapacity appears"
)
def test_a_pod_refused_for_storage_is_scheduled_when_a_csistoragecapacity_appears(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # Nothing publishes capacity: the test does, for one node, as a provisioner would.
    (node,) = scheduling_node_names(driver, 1)
    spec = driver.spec
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    refused = uid_of(kube, "app", namespace)

    kube.create(
        CSIStorageCapacity(
            metadata=ObjectMeta(generateName="requeue-", namespace=spec.namespace),
            storageClassName=spec.storage_class(),
            nodeTopology=LabelSelector(matchLabels={spec.node_topology_key: node}),
            capacity="10Gi",
        )
    )

    assert wait_pod_scheduled(kube, "app", namespace, timeout=REQUEUE_TIMEOUT) == node
    assert uid_of(kube, "app", namespace) == refused


@pytest.mark.xfail(
    reason=(
        "kube-scheduler 1.37.1: VolumeBinding's isSchedulableAfterCSIDriverChange looks only"
        " at inline CSI volumes (vol.CSI), so the storageCapacity change never requeues a pod"
        " whose claim needs the driver; it is retried only when an unrelated event or the"
        " 5-minute flush requeues it (passes when such an event comes in time)"
    ),
    strict=False,
)
@pytest.mark.scenario(
    FEATURE, "a pod refused for storage is scheduled once the CSIDriver stops asking for capacity"
)
def test_a_pod_refused_for_storage_gets_a_node_when_csidriver_storage_capacity_turns_off(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # No pool can hold 15Gi: with capacity ignored the scheduler picks a node anyway
    # (selected-node), and provisioning, not scheduling, refuses it.
    objects.create(
        kube,
        objects.claim("huge", namespace, "15Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["huge"]),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    history = AnnotationHistory(kube, "huge", namespace).start()
    try:
        kube.patch(
            CSIDriver,
            driver.spec.name,
            {"spec": {"storageCapacity": False}},
            patch_type=PatchType.MERGE,
        )
        history.wait_for_values(lambda v: any(v), "a selected node", timeout=REQUEUE_TIMEOUT)
    finally:
        history.stop()


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "a pod refused for max volume count is scheduled once a slot frees")
def test_a_pod_refused_for_max_volume_count_is_scheduled_when_the_slot_holder_goes(
    kube: Client, namespace: str, driver: Driver
) -> None:
    (node,) = scheduling_node_names(driver, 1)
    storage_class = driver.spec.storage_class()
    for name in ("holder", "waiter"):
        objects.create(
            kube,
            objects.claim(name, namespace, "1Gi", storage_class),
            objects.pod(name, namespace, claims=[name], nodes=[node]),
        )
        if name == "holder":
            assert wait_pod_scheduled(kube, name, namespace) == node
    wait_pod_unschedulable(kube, "waiter", namespace, message=MAX_VOLUME_COUNT)
    refused = uid_of(kube, "waiter", namespace)

    kube.delete(Pod, "holder", namespace=namespace, grace_period=0)

    assert wait_pod_scheduled(kube, "waiter", namespace, timeout=REQUEUE_TIMEOUT) == node
    assert uid_of(kube, "waiter", namespace) == refused


@pytest.mark.driver(max_volumes_per_node=1, attach_required=True)
@pytest.mark.scenario(
    FEATURE, "with attach required, the freed slot counts only once the VolumeAttachment is gone"
)
def test_with_attach_required_the_slot_frees_only_when_the_volume_attachment_goes(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # NodeVolumeLimits counts a node's VolumeAttachments too: the holder's deletion
    # requeues the waiter, but it fits only after the detach.
    (node,) = scheduling_node_names(driver, 1)
    storage_class = driver.spec.storage_class()
    objects.create(
        kube,
        objects.claim("holder", namespace, "1Gi", storage_class),
        objects.pod("holder", namespace, claims=["holder"], nodes=[node]),
    )
    assert wait_pod_scheduled(kube, "holder", namespace) == node
    pv = wait_bound_volume(kube, "holder", namespace).metadata.name  # type: ignore[union-attr]
    wait_volume_attachment(kube, str(pv), attached=True)
    objects.create(
        kube,
        objects.claim("waiter", namespace, "1Gi", storage_class),
        objects.pod("waiter", namespace, claims=["waiter"], nodes=[node]),
    )
    wait_pod_unschedulable(kube, "waiter", namespace, message=MAX_VOLUME_COUNT)

    kube.delete(Pod, "holder", namespace=namespace, grace_period=0)

    def in_order() -> tuple[bool, str]:
        # The pod first, the attachments after: a pod seen scheduled while its
        # VolumeAttachment is still listed later was scheduled before the detach.
        pod = kube.get(Pod, "waiter", namespace=namespace)
        scheduled = bool(pod.spec and pod.spec.nodeName)
        remaining = volume_attachments(kube, str(pv))
        assert not (scheduled and remaining), "the waiter was scheduled before the detach"
        return scheduled, f"scheduled={scheduled}, attachments of {pv}: {len(remaining)}"

    wait_for("the waiter scheduled after the holder's detach", in_order, timeout=REQUEUE_TIMEOUT)
