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

import time

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIDriver
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
FINDING_WAIT = 60
"""Seconds the finding test gives the CSIDriver change alone to requeue the pod."""
HOLD = 15
"""Seconds a requeued pod is watched staying unscheduled: longer than the scheduler's
10-second maximum backoff of a pod."""


def scheduling_node_names(driver: Driver, count: int) -> list[str]:
    """``count`` nodes for pods that only need scheduling, or the test is skipped."""
    try:
        return [n.name for n in pick_nodes(scheduling_nodes(driver.nodes), count)]
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))


def uid_of(kube: Client, pod: str, namespace: str) -> str:
    return str(kube.get(Pod, pod, namespace=namespace).metadata.uid)  # type: ignore[union-attr]


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

    topology = {spec.node_topology_key: node}
    objects.create(
        kube, objects.storage_capacity(namespace, spec.storage_class(), topology, "10Gi")
    )

    assert wait_pod_scheduled(kube, "app", namespace, timeout=REQUEUE_TIMEOUT) == node
    assert uid_of(kube, "app", namespace) == refused


def refuse_then_stop_asking_for_capacity(
    kube: Client, namespace: str, driver: Driver
) -> AnnotationHistory:
    """A pod whose 15Gi claim no pool can hold, refused for storage; then its CSIDriver's
    storageCapacity turned off. Returns the started history of the claim's selected node
    (with capacity ignored, any node fits and provisioning, not scheduling, refuses)."""
    objects.create(
        kube,
        objects.claim("huge", namespace, "15Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["huge"]),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    history = AnnotationHistory(kube, "huge", namespace).start()
    kube.patch(
        CSIDriver,
        driver.spec.name,
        {"spec": {"storageCapacity": False}},
        patch_type=PatchType.MERGE,
    )
    return history


def retry_with_a_csistoragecapacity_too_small(kube: Client, namespace: str, driver: Driver) -> None:
    """An event VolumeBinding requeues every waiting pod for (a CSIStorageCapacity
    created), of 1Gi on no node: no help to the 15Gi claim unless capacity is ignored."""
    spec = driver.spec
    topology = {spec.node_topology_key: "no-such-node"}
    objects.create(kube, objects.storage_capacity(namespace, spec.storage_class(), topology, "1Gi"))


@pytest.mark.scenario(
    FEATURE, "a pod refused for storage gets a node once the CSIDriver stops asking for capacity"
)
def test_a_pod_refused_for_storage_gets_a_node_when_csidriver_storage_capacity_turns_off(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # The storageCapacity change alone does not requeue the pod (docs/findings.md, and
    # the finding test below): a CSIStorageCapacity that helps no node retries it.
    history = refuse_then_stop_asking_for_capacity(kube, namespace, driver)
    try:
        retry_with_a_csistoragecapacity_too_small(kube, namespace, driver)
        history.wait_for_values(lambda v: any(v), "a selected node", timeout=REQUEUE_TIMEOUT)
    finally:
        history.stop()


@pytest.mark.finding
@pytest.mark.scenario(
    FEATURE, "finding: the storageCapacity change alone does not requeue a pod with a claim"
)
def test_finding_the_csidriver_storage_capacity_change_alone_does_not_requeue_the_pod(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # kube-scheduler 1.37.1's VolumeBinding hint for CSIDriver updates looks only at
    # inline CSI volumes (docs/findings.md). Any other requeueing event (another
    # driver's CSIStorageCapacity, a node) would hide it: run it alone, `-m finding`.
    history = refuse_then_stop_asking_for_capacity(kube, namespace, driver)
    try:
        time.sleep(FINDING_WAIT)
        assert not any(history.values), f"requeued by the CSIDriver change: {history.values}"
        # The witness: the pod was ready to go, and the history live.
        retry_with_a_csistoragecapacity_too_small(kube, namespace, driver)
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
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
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

    # The detach is held (ControllerUnpublishVolume fails) until the waiter has been
    # seen unscheduled with the holder gone and its VolumeAttachment still there.
    held = admin.add_fault("ControllerUnpublishVolume", code="UNAVAILABLE", message="held")
    kube.delete(Pod, "holder", namespace=namespace, grace_period=0)
    wait_for(
        "a held detach of the holder's volume",
        lambda: (bool(admin.journal(method="ControllerUnpublishVolume", code="UNAVAILABLE")), ""),
        timeout=60,
    )
    # The holder's deletion requeued the waiter at once (its backoff is at most 10 s):
    # it must stay unscheduled while the VolumeAttachment stays.
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        assert volume_attachments(kube, str(pv)), "the VolumeAttachment went while held"
        waiter = kube.get(Pod, "waiter", namespace=namespace)
        assert not (waiter.spec and waiter.spec.nodeName), "scheduled before the detach"
        time.sleep(1)
    admin.remove_fault(held.id)

    def in_order() -> tuple[bool, str]:
        # The pod first, the attachments after: a pod seen scheduled while its
        # VolumeAttachment is still listed later was scheduled before the detach.
        pod = kube.get(Pod, "waiter", namespace=namespace)
        scheduled = bool(pod.spec and pod.spec.nodeName)
        remaining = volume_attachments(kube, str(pv))
        assert not (scheduled and remaining), "the waiter was scheduled before the detach"
        return scheduled, f"scheduled={scheduled}, attachments of {pv}: {len(remaining)}"

    wait_for("the waiter scheduled after the holder's detach", in_order, timeout=REQUEUE_TIMEOUT)
