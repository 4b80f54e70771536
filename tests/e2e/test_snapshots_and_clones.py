"""Snapshots, restores and clones end to end: a VolumeSnapshot reaches csi-mock
through the cluster's snapshot-controller and the driver's csi-snapshotter
(CreateSnapshot), a claim with a VolumeSnapshot or another claim as its dataSource
through external-provisioner (CreateVolume with a volume_content_source).

What only csi-mock shows here is what these cost: a snapshot takes pool space
(``controller.snapshots.accounting``: "full" charges the source's allocation), which
the published capacity loses, and a restore or clone lives in its source's pool, so
one that does not fit there is refused (RESOURCE_EXHAUSTED) and its claim waits,
Pending with the provisioner's ProvisioningFailed event, until the pool has room.

Claims no pod uses are bound at once (the Immediate class); the data test runs pods
on a node with a real kubelet.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim

from csi_harness._internal.deploy.local import LocalDriver
from csi_harness._internal.kube import objects, snapshots
from csi_harness._internal.kube.waits import (
    describe_claim,
    termination_message,
    wait_bound_volume,
    wait_event,
    wait_for,
    wait_pod_succeeded,
)
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient
from csi_mock.admin.views import VolumeView

pytestmark = [pytest.mark.e2e, pytest.mark.driver(snapshots="full", clones=True)]

FEATURE = "snapshots, restores and clones"
GI = 1 << 30
IMMEDIATE = "csi-mock-immediate"
TEXT = "cut-before-the-snapshot"


def volume_of(admin: AdminClient, pv: PersistentVolume) -> VolumeView:
    assert pv.spec is not None and pv.spec.csi is not None
    (volume,) = [v for v in admin.volumes().volumes if v.id == pv.spec.csi.volumeHandle]
    return volume


def claim_from(
    name: str, namespace: str, size: str, storage_class: str, source: dict[str, str]
) -> dict[str, Any]:
    manifest = objects.claim(name, namespace, size, storage_class)
    manifest["spec"]["dataSource"] = source
    return manifest


def claim_source(name: str) -> dict[str, str]:
    """A claim's ``dataSource`` naming another claim (a clone)."""
    return {"kind": "PersistentVolumeClaim", "name": name}


def bound_source(kube: Client, driver: Driver, namespace: str) -> PersistentVolume:
    """Claim "data" of 1Gi in the Immediate class, bound without a pod."""
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    )
    return wait_bound_volume(kube, "data", namespace, timeout=90)


def snapshot_of_data(kube: Client, driver: Driver, namespace: str) -> Any:
    snapshots.create_snapshot(
        kube, snapshots.volume_snapshot("snap", namespace, "data", driver.spec.snapshot_class())
    )
    return snapshots.wait_snapshot_ready(kube, "snap", namespace, timeout=90)


@pytest.mark.scenario(FEATURE, "a snapshot is cut by the driver and its pool publishes less")
def test_a_snapshot_is_cut_by_the_driver_and_its_pool_publishes_less(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    volume = volume_of(admin, bound_source(kube, driver, namespace))
    free_before = admin.pool(volume.pool).free

    ready = snapshot_of_data(kube, driver, namespace)

    (cut,) = admin.snapshots().snapshots
    assert cut.source_volume_id == volume.id and cut.ready_to_use
    assert (cut.pool, cut.size, cut.charge) == (volume.pool, GI, GI)  # full accounting
    assert ready["status"]["restoreSize"] == "1Gi"
    content = kube.get(
        snapshots.VolumeSnapshotContent, ready["status"]["boundVolumeSnapshotContentName"]
    )
    assert content["status"]["snapshotHandle"] == cut.id
    (created,) = admin.journal(method="CreateSnapshot")
    assert (created.code, created.request.get("source_volume_id")) == ("OK", volume.id)
    assert admin.pool(volume.pool).free == free_before - GI
    # What the cluster's scheduler sees: GetCapacity of the pool's segment has lost it.
    available, _maximum = driver.get_capacity(volume.segment, {"kind": volume.kind})
    assert available == free_before - GI


@pytest.mark.parametrize("source", ["snapshot", "claim"])
@pytest.mark.scenario(
    FEATURE, "a restore or clone without room in its source's pool waits Pending until it has"
)
def test_a_restore_or_clone_without_room_in_its_source_pool_waits_until_it_has(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, source: str
) -> None:
    volume = volume_of(admin, bound_source(kube, driver, namespace))
    if source == "snapshot":
        snapshot_of_data(kube, driver, namespace)
        data_source = snapshots.snapshot_source("snap")
        (cut,) = admin.snapshots().snapshots
        expected_source = {"snapshot": cut.id}
    else:
        data_source = claim_source("data")
        expected_source = {"volume": volume.id}
    # Half a GiB of room: the 1Gi copy cannot fit in the source's pool, which is the
    # only place csi-mock puts it (other nodes' pools have room, and do not count).
    pool = admin.pool(volume.pool)
    admin.resize_pool(volume.pool, pool.used + GI // 2)

    objects.create(
        kube,
        claim_from("copy", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE), data_source),
    )
    event = wait_event(
        kube,
        namespace,
        reason="ProvisioningFailed",
        involved="copy",
        contains="ResourceExhausted",
        timeout=90,
    )
    assert volume.pool in event.message, event.message
    pending = kube.get(PersistentVolumeClaim, "copy", namespace=namespace)
    assert pending.status is not None and pending.status.phase == "Pending", describe_claim(pending)
    refused = [r for r in admin.journal(method="CreateVolume") if r.code != "OK"]
    assert refused and {r.code for r in refused} == {"RESOURCE_EXHAUSTED"}

    admin.resize_pool(volume.pool, pool.used + 2 * GI)

    copy = volume_of(admin, wait_bound_volume(kube, "copy", namespace, timeout=90))
    assert copy.content_source == expected_source
    assert (copy.pool, copy.segment, copy.size) == (volume.pool, volume.segment, GI)


@pytest.mark.parametrize("source", ["snapshot", "claim"])
@pytest.mark.scenario(FEATURE, "a restore or clone holds what its source held")
def test_a_restore_or_clone_holds_what_its_source_held(
    kube: Client, namespace: str, driver: Driver, pod_node: str, source: str
) -> None:
    if not isinstance(driver, LocalDriver):
        pytest.skip(
            "in a cluster, csi-mock's controller keeps volume data in its own pod, apart "
            "from the nodes' (the copy is real, the data a pod wrote is not in it)"
        )
    storage_class = driver.spec.storage_class()
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", storage_class),
        objects.pod(
            "writer",
            namespace,
            claims=["data"],
            nodes=[pod_node],
            command=["sh", "-c", f"echo {TEXT} > /mnt/claim-0/text"],
        ),
    )
    wait_pod_succeeded(kube, "writer", namespace, timeout=120)
    if source == "snapshot":
        snapshot_of_data(kube, driver, namespace)
        data_source = snapshots.snapshot_source("snap")
    else:
        data_source = claim_source("data")
    # The source's pool is the writer's node's: the reader goes there too.
    objects.create(
        kube,
        claim_from("copy", namespace, "1Gi", storage_class, data_source),
        objects.pod(
            "reader",
            namespace,
            claims=["copy"],
            nodes=[pod_node],
            command=["sh", "-c", "cat /mnt/claim-0/text > /dev/termination-log"],
        ),
    )
    reader = wait_pod_succeeded(kube, "reader", namespace, timeout=120)
    assert termination_message(reader).strip() == TEXT


@pytest.mark.scenario(
    FEATURE, "deleting a VolumeSnapshot deletes the driver's snapshot and its charge"
)
def test_deleting_a_volume_snapshot_gives_its_charge_back(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    volume = volume_of(admin, bound_source(kube, driver, namespace))
    snapshot_of_data(kube, driver, namespace)
    (cut,) = admin.snapshots().snapshots
    used = admin.pool(volume.pool).used

    kube.delete(snapshots.VolumeSnapshot, "snap", namespace=namespace)

    # The journal records a call once it has been answered, a moment after the store
    # shows its effect: wait for the record, not for the snapshot to be gone.
    wait_for(
        "DeleteSnapshot in csi-mock's journal",
        lambda: (bool(admin.journal(method="DeleteSnapshot")), admin.snapshots().snapshots),
        timeout=60,
    )
    (deleted,) = admin.journal(method="DeleteSnapshot")
    assert (deleted.code, deleted.request.get("snapshot_id")) == ("OK", cut.id)
    assert admin.snapshots().snapshots == []
    assert admin.pool(volume.pool).used == used - cut.charge
