"""Raw block volumes (volumeMode: Block) in a real kubelet and container runtime.

The container runtime needs a device node to hand the pod, and the kubelet tears a
block mapping down only when the published path is one: csi-mock publishes a loop
device over the volume's backing file. A pod writes through the device, another
reads it back, and when both are gone the driver has unpublished the volume and,
once the claim is deleted, deleted it.
"""

from __future__ import annotations

import os

import grpc
import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    termination_message,
    wait_bound_volume,
    wait_for,
    wait_pod_running,
    wait_pod_succeeded,
)
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient
from csi_mock.proto import csi_pb2, csi_pb2_grpc
from tests.e2e.conftest import node_calls

pytestmark = [pytest.mark.e2e]

FEATURE = "raw block volumes"
OFFSET = 1 << 20
"""Where the pods write and read: past the first MiB, so a zeroed start proves nothing."""
TEXT = "written-through-a-loop-device"


def shell(script: str) -> list[str]:
    return ["sh", "-c", f"set -e; {script}"]


def run_to_completion(kube: Client, namespace: str, name: str, node: str, script: str) -> str:
    objects.create(
        kube,
        objects.pod(name, namespace, devices=["data"], nodes=[node], command=shell(script)),
    )
    pod = wait_pod_succeeded(kube, name, namespace, timeout=120)
    return termination_message(pod)


def node_targets(driver: Driver, node: str, method: str, volume_id: str) -> list[str]:
    """The target paths of ``node``'s ``method`` calls for the volume."""
    return [str(r.request.get("target_path")) for r in node_calls(driver, node, method, volume_id)]


@pytest.mark.scenario(FEATURE, "a pod writes a raw block device, another reads it back")
def test_a_raw_block_volume_keeps_what_a_pod_wrote_for_the_next_pod(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    objects.create(
        kube, objects.claim("data", namespace, "64Mi", driver.spec.storage_class(), block=True)
    )
    # Block size 1 keeps dd exact; the device must be a block device in the container.
    writer = (
        "test -b /dev/block-0;"
        f" printf {TEXT} | dd of=/dev/block-0 bs=1 seek={OFFSET} conv=notrunc,fsync 2>/dev/null;"
        " echo written > /dev/termination-log"
    )
    assert run_to_completion(kube, namespace, "writer", pod_node, writer).strip() == "written"
    kube.delete(Pod, "writer", namespace=namespace, grace_period=0)

    reader = (
        f"dd if=/dev/block-0 bs=1 skip={OFFSET} count={len(TEXT)} 2>/dev/null"
        " > /dev/termination-log"
    )
    assert run_to_completion(kube, namespace, "reader", pod_node, reader) == TEXT

    pv = wait_bound_volume(kube, "data", namespace)
    assert pv.spec is not None and pv.spec.volumeMode == "Block"


@pytest.mark.scenario(FEATURE, "deleting the pod unpublishes, deleting the claim deletes")
def test_a_raw_block_volume_is_unpublished_with_its_pod_and_deleted_with_its_claim(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    objects.create(
        kube, objects.claim("data", namespace, "16Mi", driver.spec.storage_class(), block=True)
    )
    run_to_completion(kube, namespace, "user", pod_node, "test -b /dev/block-0")
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    volume_id = pv.spec.csi.volumeHandle
    published = node_targets(driver, pod_node, "NodePublishVolume", volume_id)
    assert published, "the kubelet never published the volume"

    kube.delete(Pod, "user", namespace=namespace, grace_period=0)

    def unpublished() -> tuple[bool, list[str]]:
        seen = node_targets(driver, pod_node, "NodeUnpublishVolume", volume_id)
        return published[-1] in seen, seen

    wait_for(f"NodeUnpublishVolume of {volume_id} at {published[-1]}", unpublished, timeout=90)

    kube.delete(PersistentVolumeClaim, "data", namespace=namespace)

    def volume_gone() -> tuple[bool, str]:
        deleted = [r.code for r in admin.journal(method="DeleteVolume", volume=volume_id)]
        names = {str(p.metadata.name) for p in kube.list(PersistentVolume)}  # type: ignore[union-attr]
        return "OK" in deleted and pv.metadata.name not in names, f"DeleteVolume {deleted}"  # type: ignore[union-attr]

    wait_for(f"volume {volume_id} and its PV to be deleted", volume_gone, timeout=90)


def hold_block_device(
    kube: Client, namespace: str, driver: Driver, node: str, claim: str, marker: str
) -> tuple[str, str]:
    """A raw block claim and a pod that writes `marker` to it and stays; returns the
    volume ID and the target path the kubelet published it at."""
    objects.create(
        kube, objects.claim(claim, namespace, "16Mi", driver.spec.storage_class(), block=True)
    )
    script = (
        f"printf {marker} | dd of=/dev/block-0 bs=1 seek={OFFSET} conv=notrunc,fsync"
        " 2>/dev/null; exec sleep 3600"
    )
    pod = f"holder-{claim}"
    objects.create(
        kube, objects.pod(pod, namespace, devices=[claim], nodes=[node], command=shell(script))
    )
    wait_pod_running(kube, pod, namespace)
    pv = wait_bound_volume(kube, claim, namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    volume_id = pv.spec.csi.volumeHandle
    targets = node_targets(driver, node, "NodePublishVolume", volume_id)
    assert targets, f"the kubelet never published {volume_id}"
    return volume_id, targets[-1]


def wait_device_shows(target: str, marker: str) -> None:
    def shown() -> tuple[bool, bytes]:
        with open(target, "rb") as device:
            device.seek(OFFSET)
            seen = device.read(len(marker))
        return seen == marker.encode(), seen

    wait_for(f"{marker!r} through the device at {target}", shown, timeout=60)


@pytest.mark.scenario(
    FEATURE, "a published block volume is not deleted, and its device goes to no other volume"
)
def test_a_published_block_volume_is_not_deleted_and_keeps_its_device(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    # Kubernetes never deletes a volume in use (claim and PV protection); a CO with a
    # bug, or a test, can: DeleteVolume straight on the controller's socket.
    socket = getattr(driver, "controller_socket", None)
    if socket is None:
        pytest.skip("needs the controller's CSI socket and the node's targets on this host")
    volume_a, target_a = hold_block_device(kube, namespace, driver, pod_node, "a", "data-of-a")

    request = csi_pb2.DeleteVolumeRequest(volume_id=volume_a)
    with (
        grpc.insecure_channel(f"unix://{socket}") as channel,
        pytest.raises(grpc.RpcError) as raised,
    ):
        csi_pb2_grpc.ControllerStub(channel).DeleteVolume(request, timeout=30)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION, raised.value
    assert "in use" in str(raised.value.details())

    # The next block volume on the node: were A's loop device freed, B would get its
    # number and A's target would show B's data.
    _, target_b = hold_block_device(kube, namespace, driver, pod_node, "b", "data-of-b")
    wait_device_shows(target_b, "data-of-b")
    wait_device_shows(target_a, "data-of-a")
    assert os.stat(target_a).st_rdev != os.stat(target_b).st_rdev
