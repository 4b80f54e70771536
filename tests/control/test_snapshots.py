"""Snapshots through the control surface: the admin API's snapshot listing shows each
snapshot and what it takes from its pool, and fault rules and the journal cover the
snapshot RPCs (they are generated from the proto, like every CSI method)."""

from __future__ import annotations

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import GiB, assert_status, create_volume
from tests.driver.snapshot_helpers import from_snapshot, from_volume, snapshot, snapshots_config


@pytest.fixture
async def snap(start_admin: StartAdmin) -> AdminDriver:
    return await start_admin(controller=snapshots_config("full", ready_after="1h"))


async def test_the_snapshot_listing_shows_each_snapshot_with_its_charge_and_pool_use(
    snap: AdminDriver,
) -> None:
    volume = await create_volume(
        snap.csi, "pvc-1", GiB, requisite=["node-1"], parameters={"kind": "mirrored"}
    )
    taken = [
        await snapshot(snap.csi, name, volume.volume_id, {"class": "daily"})
        for name in ("s1", "s2", "s3")
    ]

    first = await snap.admin.snapshots(limit=2)
    rest = await snap.admin.snapshots(after=first.next_after)

    listed = first.snapshots + rest.snapshots
    assert [s.id for s in listed] == [t.snapshot_id for t in taken]
    assert rest.next_after is None
    one = listed[0]
    assert (one.name, one.source_volume_id, one.pool, one.kind) == (
        "s1",
        volume.volume_id,
        "node-1",
        "mirrored",
    )
    assert (one.size, one.charge, one.access_type) == (GiB, 2 * GiB, "mount")
    assert one.parameters == {"class": "daily"} and not one.ready_to_use
    assert one.ready_at - one.created_at == 3600
    pool = await snap.admin.pool("node-1")
    assert pool.used == 2 * GiB + 3 * 2 * GiB  # the volume and three full snapshots


async def test_the_snapshot_listing_is_empty_without_snapshots(with_admin: AdminDriver) -> None:
    page = await with_admin.admin.snapshots()
    assert (page.snapshots, page.next_after) == ([], None)


async def test_a_fault_rule_fails_create_snapshot_before_it_cuts_and_the_journal_has_it(
    snap: AdminDriver,
) -> None:
    volume = await create_volume(snap.csi, "pvc-1", GiB)
    rule = await snap.admin.add_fault(
        "CreateSnapshot", code="RESOURCE_EXHAUSTED", message="snapshot quota (injected)", times=1
    )
    request = pb.CreateSnapshotRequest(name="snapshot-1", source_volume_id=volume.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.csi.controller.CreateSnapshot(request)
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "snapshot quota (injected)")
    assert (await snap.admin.snapshots()).snapshots == []
    retried = (await snap.csi.controller.CreateSnapshot(request)).snapshot

    failed, succeeded = await snap.admin.journal(method="CreateSnapshot")
    assert (failed.code, failed.fault) == ("RESOURCE_EXHAUSTED", rule.id)
    assert failed.request == {"name": "snapshot-1", "source_volume_id": volume.volume_id}
    assert (succeeded.code, succeeded.fault) == ("OK", None)
    assert [s.id for s in (await snap.admin.snapshots()).snapshots] == [retried.snapshot_id]
    await snap.csi.controller.DeleteSnapshot(
        pb.DeleteSnapshotRequest(snapshot_id=retried.snapshot_id)
    )
    (deleted,) = await snap.admin.journal(method="DeleteSnapshot")
    assert deleted.request == {"snapshot_id": retried.snapshot_id}


async def test_the_volume_listing_shows_what_a_restore_and_a_clone_were_made_from(
    start_admin: StartAdmin,
) -> None:
    driver = await start_admin(controller=snapshots_config("full"))
    source = await create_volume(driver.csi, "pvc-1", GiB)
    cut = await snapshot(driver.csi, "s1", source.volume_id)
    restored = (
        await driver.csi.controller.CreateVolume(from_snapshot("pvc-2", cut.snapshot_id))
    ).volume
    cloned = (
        await driver.csi.controller.CreateVolume(from_volume("pvc-3", source.volume_id))
    ).volume

    listed = {v.id: v.content_source for v in (await driver.admin.volumes()).volumes}

    assert listed == {
        source.volume_id: None,
        restored.volume_id: {"snapshot": cut.snapshot_id},
        cloned.volume_id: {"volume": source.volume_id},
    }
