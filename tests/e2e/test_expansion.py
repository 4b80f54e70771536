"""Volume expansion end to end: a claim's larger request reaches csi-mock through
external-resizer (ControllerExpandVolume) and the kubelet (NodeExpandVolume).

csi-mock answers ControllerExpandVolume with node_expansion_required, and its nodes
advertise EXPAND_VOLUME (``controller.expansion``, on by default): a claim is grown
once its node has grown it too. While no pod uses the claim, the node part waits for
the next pod (FileSystemResizePending). A request beyond what the pool allows is
refused by the driver, and the claim keeps its size.

Pods run on a node with a real kubelet; a claim no pod uses is bound at once
(the Immediate class).
"""

from __future__ import annotations

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    claim_conditions,
    describe_claim,
    storage_of,
    wait_bound_volume,
    wait_claim,
    wait_claim_capacity,
    wait_event,
    wait_for,
    wait_pod_running,
    wait_volume_capacity,
)
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient
from csi_mock.observe.calls import CallRecord
from tests.e2e.conftest import node_calls

pytestmark = [pytest.mark.e2e]

FEATURE = "volume expansion"
GI = 1 << 30
IMMEDIATE = "csi-mock-immediate"
FS_RESIZE_PENDING = "FileSystemResizePending"
RESIZE_FAILED = "VolumeResizeFailed"
RESIZE_CONDITIONS = {"Resizing", FS_RESIZE_PENDING, "ControllerResizeError", "NodeResizeError"}
"""The claim conditions of an expansion under way or failed (others, such as
Kubernetes 1.37's Unused, say nothing about it)."""


def request_size(kube: Client, claim: str, namespace: str, size: str) -> None:
    body = {"spec": {"resources": {"requests": {"storage": size}}}}
    kube.patch(PersistentVolumeClaim, claim, body, namespace=namespace)


def volume_id_of(pv: PersistentVolume) -> str:
    assert pv.spec is not None and pv.spec.csi is not None
    return pv.spec.csi.volumeHandle


def pv_name(pv: PersistentVolume) -> str:
    assert pv.metadata is not None and pv.metadata.name is not None
    return pv.metadata.name


def calls(admin: AdminClient, method: str, volume_id: str) -> list[CallRecord]:
    return admin.journal(method=method, volume=volume_id)


def expanded_to(admin: AdminClient, volume_id: str) -> list[tuple[str, int]]:
    """(code, required_bytes) of every ControllerExpandVolume of the volume."""
    return [
        (r.code, int(r.request.get("required_bytes", 0)))
        for r in calls(admin, "ControllerExpandVolume", volume_id)
    ]


def expansion_results(admin: AdminClient, volume_id: str) -> set[tuple[str, int]]:
    """The distinct (code, required_bytes) of the volume's ControllerExpandVolume calls.

    external-resizer calls again when its update of the claim's status meets a
    conflict (seen on kind under load), and a repeated expansion to the same size is
    idempotent; that the volume grew once is what its size in the driver shows.
    """
    return set(expanded_to(admin, volume_id))


def driver_volume_size(admin: AdminClient, volume_id: str) -> int:
    (volume,) = [v for v in admin.volumes().volumes if v.id == volume_id]
    return volume.size


def bound_claim(kube: Client, driver: Driver, namespace: str, size: str) -> PersistentVolume:
    """Claim "data" of ``size`` in the Immediate class, bound without a pod."""
    objects.create(
        kube, objects.claim("data", namespace, size, driver.spec.storage_class(IMMEDIATE))
    )
    return wait_bound_volume(kube, "data", namespace, timeout=90)


def claim_in_use(kube: Client, driver: Driver, namespace: str, node: str) -> PersistentVolume:
    """Claim "data" of 1Gi mounted by pod "app" on ``node`` (WaitForFirstConsumer)."""
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_running(kube, "app", namespace, timeout=120)
    return wait_bound_volume(kube, "data", namespace)


@pytest.mark.parametrize(
    "attach",
    [
        pytest.param(
            attach,
            marks=[
                pytest.mark.driver(attach_required=attach),
                pytest.mark.upstream(
                    "csi_volume_expansion.go",
                    "should expand volume without restarting pod if"
                    f" attach={'on' if attach else 'off'}, nodeExpansion=on",
                ),
            ],
            id=f"attach-{'on' if attach else 'off'}",
        )
        for attach in (False, True)
    ],
)
@pytest.mark.scenario(FEATURE, "a claim in use grows on the controller and on its node")
def test_a_claim_in_use_grows_on_the_controller_and_on_its_node(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str, attach: bool
) -> None:
    pv = claim_in_use(kube, driver, namespace, pod_node)
    volume_id = volume_id_of(pv)
    uid = kube.get(Pod, "app", namespace=namespace).metadata.uid  # type: ignore[union-attr]
    assert expanded_to(admin, volume_id) == []
    assert node_calls(driver, pod_node, "NodeExpandVolume", volume_id) == []

    request_size(kube, "data", namespace, "2Gi")

    claim = wait_claim_capacity(kube, "data", namespace, 2 * GI, timeout=120)
    assert not RESIZE_CONDITIONS & set(claim_conditions(claim)), describe_claim(claim)
    assert claim.status is not None and not claim.status.allocatedResourceStatuses
    wait_volume_capacity(kube, pv_name(pv), 2 * GI)
    assert expansion_results(admin, volume_id) == {("OK", 2 * GI)}
    assert driver_volume_size(admin, volume_id) == 2 * GI
    grown = node_calls(driver, pod_node, "NodeExpandVolume", volume_id)
    assert [(r.code, r.request.get("required_bytes")) for r in grown][-1:] == [("OK", 2 * GI)]
    # Online: the pod that used the claim all along is still the same.
    assert kube.get(Pod, "app", namespace=namespace).metadata.uid == uid  # type: ignore[union-attr]


@pytest.mark.scenario(FEATURE, "a claim no pod uses grows on the controller, its node waits")
def test_a_claim_no_pod_uses_grows_on_the_controller_and_waits_for_its_node(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    pv = bound_claim(kube, driver, namespace, "1Gi")
    volume_id = volume_id_of(pv)

    request_size(kube, "data", namespace, "2Gi")

    claim = wait_claim(
        kube,
        "data",
        namespace,
        lambda c: FS_RESIZE_PENDING in claim_conditions(c),
        what=f"a {FS_RESIZE_PENDING} condition",
        timeout=120,
    )
    assert claim.status is not None
    # The controller's part is done: the volume and its PV have the new size ...
    assert expansion_results(admin, volume_id) == {("OK", 2 * GI)}
    assert driver_volume_size(admin, volume_id) == 2 * GI
    assert storage_of(kube.get(PersistentVolume, pv_name(pv)).spec.capacity) == 2 * GI  # type: ignore[union-attr]
    assert storage_of(claim.status.allocatedResources) == 2 * GI
    # ... the node's waits for a pod: the claim keeps its size until then.
    assert claim.status.allocatedResourceStatuses == {"storage": "NodeResizePending"}
    assert storage_of(claim.status.capacity) == 1 * GI
    for node in driver.nodes:
        assert node_calls(driver, node.name, "NodeExpandVolume", volume_id) == [], node.name


@pytest.mark.scenario(FEATURE, "a pending node expansion completes when a pod mounts the claim")
def test_a_pending_node_expansion_completes_when_the_next_pod_mounts_the_claim(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = claim_in_use(kube, driver, namespace, pod_node)
    volume_id = volume_id_of(pv)
    kube.delete(Pod, "app", namespace=namespace, grace_period=0)
    wait_for(
        f"NodeUnpublishVolume of {volume_id} on {pod_node}",
        lambda: (
            bool(node_calls(driver, pod_node, "NodeUnpublishVolume", volume_id)),
            "not yet",
        ),
        timeout=90,
        interval=0.5,
    )
    request_size(kube, "data", namespace, "2Gi")
    wait_claim(
        kube,
        "data",
        namespace,
        lambda c: FS_RESIZE_PENDING in claim_conditions(c),
        what=f"a {FS_RESIZE_PENDING} condition",
        timeout=120,
    )
    assert node_calls(driver, pod_node, "NodeExpandVolume", volume_id) == []

    objects.create(kube, objects.pod("next", namespace, claims=["data"], nodes=[pod_node]))

    claim = wait_claim_capacity(kube, "data", namespace, 2 * GI, timeout=120)
    assert not RESIZE_CONDITIONS & set(claim_conditions(claim)), describe_claim(claim)
    assert claim.status is not None and not claim.status.allocatedResourceStatuses
    grown = node_calls(driver, pod_node, "NodeExpandVolume", volume_id)
    assert [(r.code, r.request.get("required_bytes")) for r in grown][-1:] == [("OK", 2 * GI)]
    assert expansion_results(admin, volume_id) == {("OK", 2 * GI)}


@pytest.mark.parametrize(
    ("beyond", "code", "grpc_code", "message", "resize_status"),
    [
        # OUT_OF_RANGE is final: the resizer marks the claim infeasible.
        pytest.param(
            "max_volume_size",
            "OUT_OF_RANGE",
            "OutOfRange",
            "takes volumes up to",
            "ControllerResizeInfeasible",
            marks=pytest.mark.driver(max_volume_size="2Gi"),
            id="max-volume-size",
        ),
        # RESOURCE_EXHAUSTED may pass: the resizer retries, the claim stays in progress.
        pytest.param(
            "free_capacity",
            "RESOURCE_EXHAUSTED",
            "ResourceExhausted",
            "has no room to grow",
            "ControllerResizeInProgress",
            id="pool-capacity",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "growing beyond the pool is refused and the claim keeps its size")
def test_growing_beyond_the_pool_is_refused_and_the_claim_keeps_its_size(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    beyond: str,
    code: str,
    grpc_code: str,
    message: str,
    resize_status: str,
) -> None:
    pv = bound_claim(kube, driver, namespace, "1Gi")
    volume_id = volume_id_of(pv)
    (volume,) = [v for v in admin.volumes().volumes if v.id == volume_id]
    pool = admin.pool(volume.pool)
    # Beyond the largest volume the pool takes (2Gi), or beyond the whole pool.
    requested = 3 * GI if beyond == "max_volume_size" else pool.total + GI

    request_size(kube, "data", namespace, str(requested))

    event = wait_event(
        kube, namespace, reason=RESIZE_FAILED, involved="data", contains=grpc_code, timeout=120
    )
    assert message in event.message
    refused = expanded_to(admin, volume_id)
    assert refused and set(refused) == {(code, requested)}
    assert driver_volume_size(admin, volume_id) == 1 * GI
    assert admin.pool(volume.pool).used == pool.used
    claim = wait_claim(
        kube,
        "data",
        namespace,
        lambda c: (
            c.status is not None
            and (c.status.allocatedResourceStatuses or {}).get("storage") == resize_status
        ),
        what=f"resize status {resize_status}",
        timeout=30,
    )
    assert claim.status is not None
    assert storage_of(claim.status.capacity) == 1 * GI, describe_claim(claim)
    assert storage_of(kube.get(PersistentVolume, pv_name(pv)).spec.capacity) == 1 * GI  # type: ignore[union-attr]
