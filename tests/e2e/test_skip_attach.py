"""Skip attach (CSIDriver.spec.attachRequired) end to end: the attach/detach
controller creates a VolumeAttachment only for drivers that need attaching,
external-attacher turns it into ControllerPublishVolume, the kubelet waits for it.

Pods that must really run are pinned to a node that runs pods (on the local provider
the one with a real kubelet); their volumes come from that node's pool.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, PersistentVolume, Pod
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType

from csi_harness._internal.deploy.spec import DriverDeployment, csidriver_object
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    volume_attachments,
    wait_bound_volume,
    wait_for,
    wait_pod_running,
    wait_volume_attachment,
    wait_volume_attachments_gone,
)
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient
from tests.e2e.conftest import node_calls, picked_node

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

FEATURE = "skip attach"


def run_pod_with_claim(
    kube: Client, driver: Driver, namespace: str, node: str, name: str = "app"
) -> str:
    """A pod ``name`` on ``node`` with one claim (of the same name), running; return
    its PV's name."""
    objects.create(
        kube,
        objects.claim(name, namespace, "1Gi", driver.spec.storage_class()),
        objects.pod(name, namespace, claims=[name], nodes=[node]),
    )
    pod = wait_pod_running(kube, name, namespace)
    assert pod.spec is not None and pod.spec.nodeName == node
    return bound_pv(kube, name, namespace)


def bound_pv(kube: Client, claim: str, namespace: str) -> str:
    return str(wait_bound_volume(kube, claim, namespace).metadata.name)  # type: ignore[union-attr]


def publish_calls(admin: AdminClient, method: str = "ControllerPublishVolume") -> set[str]:
    """The node IDs of the driver's (Un)Publish calls. external-attacher may repeat a
    call (they are idempotent), so this is a set."""
    return {str(r.request.get("node_id")) for r in admin.journal(method=method)}


def assert_journal_saw_create(admin: AdminClient, pv: str) -> None:
    """The witness for an empty ``publish_calls``: the same journal (the controller's)
    has this volume's CreateVolume, so a ControllerPublishVolume would be there too."""
    created = [r.request.get("name") for r in admin.journal(method="CreateVolume", code="OK")]
    assert pv in created, f"the controller's journal lacks CreateVolume of {pv}: {created}"


def volume_handle(kube: Client, pv: str) -> str:
    volume = kube.get(PersistentVolume, pv)
    return str(volume.spec.csi.volumeHandle)  # type: ignore[union-attr]


def replace_csidriver(kube: Client, spec: DriverDeployment) -> None:
    """Delete the CSIDriver object (if any) and create it from ``spec``."""
    with contextlib.suppress(ApiError):
        kube.delete(CSIDriver, spec.name)

    def gone() -> tuple[bool, str]:
        try:
            kube.get(CSIDriver, spec.name)
        except ApiError as exc:
            return exc.status.code == 404, str(exc.status.message)
        return False, "still there"

    wait_for(f"CSIDriver {spec.name} to be deleted", gone, timeout=10)
    objects.create(kube, csidriver_object(spec))


@pytest.mark.upstream(
    "csi_attach_volume.go", "should not require VolumeAttach for drivers without attachment"
)
@pytest.mark.scenario(FEATURE, "attachRequired false: no VolumeAttachment, no ControllerPublish")
def test_attach_not_required_runs_the_pod_without_attaching(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = run_pod_with_claim(kube, driver, namespace, pod_node)
    assert volume_attachments(kube, pv) == []
    assert publish_calls(admin) == set()
    # Witnesses that both would have been seen: the controller's journal, read for
    # ControllerPublishVolume, has this volume's CreateVolume, and the node's the
    # kubelet's NodePublishVolume of it; and once the CSIDriver requires attach
    # (recreated: attachRequired is immutable), the next claim's VolumeAttachment shows
    # up where the first assertion looked (the namespace's deletion ends it).
    assert_journal_saw_create(admin, pv)
    assert node_calls(driver, pod_node, "NodePublishVolume", volume_handle(kube, pv))
    replace_csidriver(kube, driver.spec.model_copy(update={"attach_required": True}))
    objects.create(
        kube,
        objects.claim("witness", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("witness", namespace, claims=["witness"], nodes=[pod_node]),
    )
    witness = bound_pv(kube, "witness", namespace)
    assert wait_volume_attachment(kube, witness).spec.nodeName == pod_node


@pytest.mark.driver(attach_required=True)
@pytest.mark.upstream(
    "csi_attach_volume.go", "should require VolumeAttach for drivers with attachment"
)
@pytest.mark.scenario(FEATURE, "attachRequired true: attached before the pod runs, detached after")
def test_attach_required_attaches_for_the_pod_and_detaches_after_it(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = run_pod_with_claim(kube, driver, namespace, pod_node)
    attachment = wait_volume_attachment(kube, pv, attached=True)
    assert attachment.spec.nodeName == pod_node
    assert attachment.spec.attacher == driver.spec.name
    assert publish_calls(admin) == {pod_node}

    kube.delete(Pod, "app", namespace=namespace, grace_period=0)
    wait_volume_attachments_gone(kube, pv)
    assert publish_calls(admin, "ControllerUnpublishVolume") == {pod_node}


@pytest.mark.driver(csidriver=False)
@pytest.mark.upstream(
    "csi_attach_volume.go", "should preserve attachment policy when no CSIDriver present"
)
@pytest.mark.scenario(FEATURE, "no CSIDriver object: attach required by default")
def test_without_a_csidriver_object_a_volume_attachment_is_created(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = run_pod_with_claim(kube, driver, namespace, pod_node)
    attachment = wait_volume_attachment(kube, pv, attached=True)
    assert attachment.spec.nodeName == pod_node
    # csi-mock (attach_required false) does not advertise PUBLISH_UNPUBLISH_VOLUME, so
    # external-attacher marks the VolumeAttachment attached without calling the driver.
    assert publish_calls(admin) == set()
    assert_journal_saw_create(admin, pv)


def flip_attach_required_to_false(kube: Client, driver: Driver) -> None:
    flipped = driver.spec.model_copy(update={"attach_required": False})
    # CSIDriver.spec.attachRequired is still immutable in 1.37: replace the object.
    with pytest.raises(ApiError) as refused:
        kube.patch(
            CSIDriver, flipped.name, {"spec": {"attachRequired": False}}, patch_type=PatchType.MERGE
        )
    assert refused.value.status.code == 422 and "immutable" in str(refused.value.status.message)
    replace_csidriver(kube, flipped)


# Flipped after the pods run: the timing upstream adopted after 1.37 (kubernetes PR
# 141522). Upstream 1.37.1's own timing is the test after this one.
@pytest.mark.slow
@pytest.mark.driver(attach_required=True)
@pytest.mark.scenario(
    FEATURE, "attachRequired flipped true -> false: each volume detached once no kubelet uses it"
)
def test_attach_required_flipped_to_false_detaches_each_volume_once_no_kubelet_uses_it(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    """Two attached volumes, then CSIDriver.attachRequired turns false. The attach/detach
    controller's desired-state populator (every minute, hard-coded) drops both from
    its desired state in one pass, since they are no longer attachable; its reconciler
    (every 100 ms) then detaches a volume at once only if its node does not report it
    in ``node.status.volumesInUse``:
    * on a simulated node, which reports none, the volume is detached; the pod stays;
    * on a node whose kubelet has it mounted for a running pod, the detach is held
      back: the 1.37 kubelet keeps the mounted volume marked attachable (kubernetes
      PR 141522 changes that after 1.37) and so keeps reporting it, and a healthy
      node is never force-detached. Once the first detach is seen, the reconciler has
      passed over the second volume many times: that it is still attached then is the
      verdict. When the pod goes, the kubelet unmounts and stops reporting the volume,
      and its VolumeAttachment goes too (upstream expects that while the pod runs,
      which needs that kubelet change)."""
    simulated = picked_node(driver, runs_pods=False)
    running = picked_node(driver, runs_pods=True)
    objects.create(
        kube,
        objects.claim("idle", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("idle", namespace, claims=["idle"], nodes=[simulated]),
    )
    used_pv = run_pod_with_claim(kube, driver, namespace, running, name="used")
    idle_pv = bound_pv(kube, "idle", namespace)
    for pv in (idle_pv, used_pv):
        wait_volume_attachment(kube, pv, attached=True)
    in_use = f"kubernetes.io/csi/{driver.spec.name}^{volume_handle(kube, used_pv)}"
    assert in_use in volumes_in_use(kube, running)

    flip_attach_required_to_false(kube, driver)
    wait_volume_attachments_gone(kube, idle_pv, timeout=120)
    assert publish_calls(admin, "ControllerUnpublishVolume") == {simulated}
    idle = kube.get(Pod, "idle", namespace=namespace)
    assert idle.spec is not None and idle.spec.nodeName == simulated
    assert idle.metadata is not None and idle.metadata.deletionTimestamp is None

    (held,) = volume_attachments(kube, used_pv)
    assert held.status is not None and held.status.attached, held.status
    assert in_use in volumes_in_use(kube, running)
    used = kube.get(Pod, "used", namespace=namespace)
    assert used.status is not None and used.status.phase == "Running"

    # The kubelet lets the volume go: unmounted, no longer in volumesInUse, detached.
    kube.delete(Pod, "used", namespace=namespace, grace_period=0)
    wait_for(
        f"{running} to stop reporting {in_use} in volumesInUse",
        lambda: (in_use not in volumes_in_use(kube, running), volumes_in_use(kube, running)),
        timeout=90,
    )
    wait_volume_attachments_gone(kube, used_pv, timeout=120)
    assert publish_calls(admin, "ControllerUnpublishVolume") == {simulated, running}


FLIP_WITHIN = 2.0
"""Seconds from the VolumeAttachment's appearance to the new CSIDriver: upstream polls
every 200 ms, then deletes and recreates the object."""


@pytest.mark.slow
# Up to a minute of it is kube-controller-manager's: the attach/detach controller's
# desired-state populator runs once a minute (hard-coded). It only waits meanwhile, so
# it gets a worker of its own rather than holding one of those that share the tests.
@pytest.mark.alone
@pytest.mark.driver(attach_required=True)
@pytest.mark.upstream(
    "csi_attach_volume.go",
    "should cleanup VolumeAttachment properly",
    missing="the pod Running: once the kubelet sees attachRequired false it stages the volume "
    "without the VolumeAttachment's publish context, which csi-mock (attach_required) refuses, "
    "as upstream's own mock driver with attach enabled does ('device' key required); "
    "upstream changed the case after 1.37 (kubernetes PR 141522) to flip after the pod runs",
)
@pytest.mark.scenario(
    FEATURE,
    "attachRequired flipped true -> false as its VolumeAttachment appears: detached, not staged",
)
def test_attach_required_flipped_to_false_as_the_volume_attachment_appears_detaches_the_volume(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    """Upstream's timing (v1.37.1): the CSIDriver is replaced with attachRequired
    false as soon as the pod's VolumeAttachment exists, before the pod has started.
    The attach/detach controller, whose populator (every minute) no longer finds the
    volume attachable, detaches it through the driver and deletes the
    VolumeAttachment: kubernetes issue 129572 was this VolumeAttachment left behind.
    The kubelet, which reads the publish context only while attach is required,
    then stages the volume without it, and a driver that needs its attachment refuses."""
    objects.create(
        kube,
        objects.claim("app", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["app"], nodes=[pod_node]),
    )
    pv = bound_pv(kube, "app", namespace)
    wait_volume_attachment(kube, pv)
    appeared = time.monotonic()
    replace_csidriver(kube, driver.spec.model_copy(update={"attach_required": False}))
    flipped_after = time.monotonic() - appeared
    assert flipped_after < FLIP_WITHIN, f"the CSIDriver was replaced {flipped_after:.1f}s late"
    # The witness that this is upstream's early timing: the pod has not started.
    assert pod_phase(kube, "app", namespace) == "Pending"

    wait_volume_attachments_gone(kube, pv, timeout=150)
    assert publish_calls(admin, "ControllerUnpublishVolume") == {pod_node}

    handle = volume_handle(kube, pv)
    stages = wait_for(
        f"{pod_node}'s kubelet to stage {handle}",
        lambda: (bool(calls := node_calls(driver, pod_node, "NodeStageVolume", handle)), calls),
        timeout=60,
    )
    assert {(r.code, "publish_context lacks the attachment" in r.message) for r in stages} == {
        ("FAILED_PRECONDITION", True)
    }, [(r.code, r.message) for r in stages]
    assert pod_phase(kube, "app", namespace) == "Pending"


def pod_phase(kube: Client, name: str, namespace: str) -> str | None:
    pod = kube.get(Pod, name, namespace=namespace)
    return pod.status.phase if pod.status else None


def volumes_in_use(kube: Client, node: str) -> list[str]:
    status = kube.get(Node, node).status
    return list(status.volumesInUse or []) if status else []


@pytest.mark.slow
# Its 2 minutes are kube-controller-manager's: the attach it started waits that long
# for the attacher (stopped here) before the detach can begin. Its one pod is on the
# real node, so it need not hold back the cluster-wide tests meanwhile; it outlasts
# all the others, so its worker takes no other test that would end after it.
@pytest.mark.alone
@pytest.mark.real_nodes_only
@pytest.mark.driver(csidriver=False)
@pytest.mark.upstream(
    "csi_attach_volume.go", "should bringup pod after deploying CSIDriver attach=false"
)
@pytest.mark.scenario(
    FEATURE, "CSIDriver (attachRequired false) after the pod: it starts, its attachment goes"
)
def test_csidriver_created_after_the_pod_starts_it_and_removes_its_volume_attachment(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    # Without an attacher the VolumeAttachment the default (attach required) asks for
    # is never marked attached: the pod waits for it.
    driver.stop_component("csi-attacher")
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[pod_node]),
    )
    pv = str(wait_bound_volume(kube, "data", namespace).metadata.name)  # type: ignore[union-attr]
    wait_volume_attachment(kube, pv, attached=False)
    pod = kube.get(Pod, "app", namespace=namespace)
    assert pod.status is not None and pod.status.phase == "Pending"

    objects.create(
        kube, csidriver_object(driver.spec.model_copy(update={"attach_required": False}))
    )
    wait_pod_running(kube, "app", namespace, timeout=150)
    # The attach/detach controller's populator (every minute) drops it from its
    # desired state; the reconciler deletes the VolumeAttachment it made once the
    # attach it started has timed out (2 minutes without an attacher).
    wait_volume_attachments_gone(kube, pv, timeout=240)
    pod = kube.get(Pod, "app", namespace=namespace)
    assert pod.status is not None and pod.status.phase == "Running"


@pytest.mark.parametrize(
    "attach_required",
    [
        pytest.param(False, marks=pytest.mark.driver(attach_required=False), id="attach-false"),
        pytest.param(
            True,
            marks=[
                pytest.mark.driver(attach_required=True),
                pytest.mark.upstream(
                    "csi_attach_volume.go",
                    "should require VolumeAttach for ephemermal volume and drivers with attachment",
                ),
            ],
            id="attach-true",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "generic ephemeral volumes follow attachRequired")
def test_generic_ephemeral_volume_is_attached_only_when_required(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    pod_node: str,
    attach_required: bool,
) -> None:
    scratch = [("scratch", "1Gi", driver.spec.storage_class())]
    objects.create(kube, objects.pod("app", namespace, ephemeral=scratch, nodes=[pod_node]))
    wait_pod_running(kube, "app", namespace)
    # The ephemeral volume controller names the claim <pod>-<volume>.
    pv = str(wait_bound_volume(kube, "app-scratch", namespace).metadata.name)  # type: ignore[union-attr]
    if attach_required:
        assert wait_volume_attachment(kube, pv, attached=True).spec.nodeName == pod_node
        assert publish_calls(admin) == {pod_node}
    else:
        assert volume_attachments(kube, pv) == []
        assert publish_calls(admin) == set()
