"""CreateVolume with a content source: restoring a snapshot (controller.snapshots) and
cloning a volume (controller.clones). The new volume holds a real copy of the data, in
a pool of the source's segment, at least as large as the source."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import grpc
import pytest

import csi_mock.backend.content_sources as content_sources_module
from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    NODE_KEY,
    GiB,
    MiB,
    assert_status,
    backing_entries,
    block_capability,
    capacity,
    create_request,
    create_volume,
    list_all,
)
from tests.driver.snapshot_helpers import (
    copies_held,
    data_of,
    from_snapshot,
    from_volume,
    snapshot,
    snapshots_config,
)


@pytest.fixture
async def snap(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(controller=snapshots_config())


async def restore(csi: RunningDriver, name: str, snapshot_id: str, **kw: object) -> pb.Volume:
    response = await csi.controller.CreateVolume(from_snapshot(name, snapshot_id, **kw))  # type: ignore[arg-type]
    return response.volume


async def clone(csi: RunningDriver, name: str, volume_id: str, **kw: object) -> pb.Volume:
    response = await csi.controller.CreateVolume(from_volume(name, volume_id, **kw))  # type: ignore[arg-type]
    return response.volume


# -- restoring ----------------------------------------------------------------------------


async def test_a_restored_volume_holds_the_data_of_the_snapshot_not_of_the_source_now(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", GiB)
    (data_of(snap, source.volume_id) / "dir").mkdir()
    (data_of(snap, source.volume_id) / "dir" / "file.txt").write_text("at snapshot time")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    (data_of(snap, source.volume_id) / "dir" / "file.txt").write_text("changed afterwards")

    restored = await restore(snap, "restored", taken.snapshot_id)

    assert (data_of(snap, restored.volume_id) / "dir" / "file.txt").read_text() == (
        "at snapshot time"
    )
    assert restored.content_source.snapshot.snapshot_id == taken.snapshot_id
    assert restored.capacity_bytes == GiB


async def test_a_restored_block_volume_holds_the_snapshots_bytes_in_its_larger_size(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", 64 * MiB, capabilities=[block_capability()])
    with open(data_of(snap, source.volume_id), "r+b") as disk:
        disk.seek(5 * MiB)
        disk.write(b"sector")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    restored = await restore(
        snap, "restored", taken.snapshot_id, required=128 * MiB, capabilities=[block_capability()]
    )

    path = data_of(snap, restored.volume_id)
    assert restored.capacity_bytes == path.stat().st_size == 128 * MiB
    with open(path, "rb") as disk:
        disk.seek(5 * MiB)
        assert disk.read(6) == b"sector"


async def test_a_restore_without_a_size_gets_the_snapshots_size(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", 3 * GiB)
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    request = from_snapshot("restored", taken.snapshot_id)
    request.ClearField("capacity_range")
    restored = (await snap.controller.CreateVolume(request)).volume

    assert restored.capacity_bytes == 3 * GiB


async def test_a_restore_asking_less_than_the_snapshot_gets_the_snapshots_size(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", 2 * GiB)
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    restored = await restore(snap, "restored", taken.snapshot_id, required=GiB)

    assert restored.capacity_bytes == 2 * GiB


async def test_a_restore_limited_below_the_snapshots_size_is_out_of_range(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", 2 * GiB)
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id, required=GiB, limit=GiB)

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "limit_bytes", taken.snapshot_id)


async def test_a_restore_larger_than_the_pool_takes_is_out_of_range(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id, required=5 * GiB)  # node-1: 4Gi max

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "node-1")


@pytest.mark.parametrize("snapshot_id", ["non-existing-snapshot-id", "snap-0123456789abcdef"])
async def test_a_restore_from_an_unknown_snapshot_is_not_found(
    snap: RunningDriver, snapshot_id: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", snapshot_id)
    assert_status(raised, grpc.StatusCode.NOT_FOUND, "volume_content_source", "snapshot")
    assert not await list_all(snap)


async def test_a_content_source_without_an_id_is_invalid(snap: RunningDriver) -> None:
    request = create_request("restored")
    request.volume_content_source.snapshot.SetInParent()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.controller.CreateVolume(request)
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "snapshot_id")

    request.volume_content_source.Clear()
    request.volume_content_source.SetInParent()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.controller.CreateVolume(request)
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_content_source")


async def test_a_block_snapshot_restored_as_a_mount_volume_is_invalid(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", MiB, capabilities=[block_capability()])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_content_source", "block")


async def test_a_snapshot_that_is_not_ready_yet_is_aborted_as_a_source_until_it_is(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller=snapshots_config(ready_after="300ms"))
    source = await create_volume(csi, "pvc-1")
    taken = await snapshot(csi, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(csi, "restored", taken.snapshot_id)
    assert_status(raised, grpc.StatusCode.ABORTED, "not ready to use")
    await asyncio.sleep(0.35)

    assert (await restore(csi, "restored", taken.snapshot_id)).volume_id


async def test_a_restore_goes_to_the_pool_of_the_snapshot(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", requisite=["node-2"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    restored = await restore(snap, "restored", taken.snapshot_id, preferred=["node-1"])

    assert restored.volume_context["csi-mock/pool"] == "node-2"
    assert [dict(t.segments) for t in restored.accessible_topology] == [{NODE_KEY: "node-2"}]


async def test_a_restore_required_elsewhere_than_the_snapshot_is_resource_exhausted(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", requisite=["node-2"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id, requisite=["node-1"])

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "node-2")


async def test_a_restore_is_refused_when_the_snapshots_pools_are_full_though_others_are_not(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", 4 * GiB, requisite=["node-1"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)  # node-1: 8 GiB used
    assert (await capacity(snap, "node-2")).available_capacity == 20 * GiB

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id)

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "node-1")
    assert len(await list_all(snap)) == 1
    assert backing_entries(snap.config.volumes_dir) == {source.volume_id}


async def test_a_restored_volume_is_charged_in_full_as_every_volume(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    before = await capacity(snap, "node-1", kind="striped")

    await restore(
        snap, "restored", taken.snapshot_id, required=2 * GiB, parameters={"kind": "mirrored"}
    )

    after = await capacity(snap, "node-1", kind="striped")
    assert before.available_capacity - after.available_capacity == 4 * GiB


async def test_a_restore_outlives_a_deleted_snapshot_and_source(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1")
    (data_of(snap, source.volume_id) / "kept").write_text("kept")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    await snap.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=source.volume_id))

    restored = await restore(snap, "restored", taken.snapshot_id)
    await snap.controller.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id=taken.snapshot_id))

    assert (data_of(snap, restored.volume_id) / "kept").read_text() == "kept"


# -- idempotency ------------------------------------------------------------------------------


async def test_a_repeated_restore_returns_the_same_volume_with_its_source(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    first = await restore(snap, "restored", taken.snapshot_id)

    again = await restore(snap, "restored", taken.snapshot_id)

    assert again == first and again.content_source.snapshot.snapshot_id == taken.snapshot_id
    listed = {e.volume.volume_id: e.volume for e in await list_all(snap)}
    assert listed[first.volume_id].content_source == first.content_source


async def test_a_repeated_restore_from_another_source_or_none_already_exists(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1")
    one = await snapshot(snap, "snapshot-1", source.volume_id)
    other = await snapshot(snap, "snapshot-2", source.volume_id)
    await restore(snap, "restored", one.snapshot_id)

    for request in (
        from_snapshot("restored", other.snapshot_id),
        from_volume("restored", source.volume_id),
        create_request("restored", 0),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snap.controller.CreateVolume(request)
        assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, f"snapshot {one.snapshot_id}")


async def test_restoring_into_the_name_of_an_empty_volume_already_exists(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "pvc-1", taken.snapshot_id)

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "content source none")


async def test_a_create_volume_of_a_name_being_restored_is_aborted(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    with copies_held(monkeypatch, content_sources_module) as copy:
        restoring = asyncio.ensure_future(restore(snap, "restored", taken.snapshot_id))
        await copy.started()
        for request in (from_snapshot("restored", taken.snapshot_id), create_request("restored")):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await snap.controller.CreateVolume(request)
            assert_status(raised, grpc.StatusCode.ABORTED, "volume name 'restored'")
        copy.release()
        restored = await restoring
    assert (await restore(snap, "restored", taken.snapshot_id)) == restored


# -- cloning ----------------------------------------------------------------------------------


async def test_a_clone_holds_a_copy_of_its_sources_data(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", 2 * GiB)
    (data_of(snap, source.volume_id) / "file").write_text("original")

    cloned = await clone(snap, "clone", source.volume_id)
    (data_of(snap, source.volume_id) / "file").write_text("changed")

    assert (data_of(snap, cloned.volume_id) / "file").read_text() == "original"
    assert cloned.content_source.volume.volume_id == source.volume_id
    assert cloned.capacity_bytes == 2 * GiB


async def test_a_block_clone_holds_its_sources_bytes(snap: RunningDriver) -> None:
    source = await create_volume(snap, "pvc-1", 8 * MiB, capabilities=[block_capability()])
    with open(data_of(snap, source.volume_id), "r+b") as disk:
        disk.write(b"boot sector")

    cloned = await clone(snap, "clone", source.volume_id, capabilities=[block_capability()])

    assert data_of(snap, cloned.volume_id).read_bytes()[:11] == b"boot sector"


async def test_a_clone_of_an_unknown_volume_is_not_found(snap: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await clone(snap, "clone", "vol-0123456789abcdef0123456789abcdef")
    assert_status(raised, grpc.StatusCode.NOT_FOUND, "volume_content_source")


async def test_a_clone_goes_to_its_sources_segment_or_is_resource_exhausted(
    snap: RunningDriver,
) -> None:
    source = await create_volume(snap, "pvc-1", requisite=["node-1"])

    cloned = await clone(snap, "clone", source.volume_id, preferred=["node-2"])
    assert cloned.volume_context["csi-mock/pool"] == "node-1"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await clone(snap, "clone-2", source.volume_id, requisite=["node-2"])
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "node-1")


async def test_delete_volume_of_a_clones_source_during_the_copy_is_aborted(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = await create_volume(snap, "pvc-1")
    with copies_held(monkeypatch, content_sources_module) as copy:
        cloning = asyncio.ensure_future(clone(snap, "clone", source.volume_id))
        await copy.started()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snap.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=source.volume_id))
        assert_status(raised, grpc.StatusCode.ABORTED, source.volume_id)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snap.controller.ControllerExpandVolume(
                pb.ControllerExpandVolumeRequest(
                    volume_id=source.volume_id,
                    capacity_range=pb.CapacityRange(required_bytes=2 * GiB),
                )
            )
        assert_status(raised, grpc.StatusCode.ABORTED, source.volume_id)
        copy.release()
        await cloning


async def test_without_clones_a_volume_source_is_invalid(start_driver: StartDriver) -> None:
    csi = await start_driver(controller=snapshots_config(clones=False))
    source = await create_volume(csi, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await clone(csi, "clone", source.volume_id)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "cloning volumes is not supported")


async def test_clones_without_snapshots_refuse_a_snapshot_source(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"clones": True})
    source = await create_volume(csi, "pvc-1")
    assert (await clone(csi, "clone", source.volume_id)).volume_id

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(csi, "restored", "snap-0123456789abcdef")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "snapshots are not supported")


async def test_without_snapshots_or_clones_a_content_source_is_refused_as_before(
    csi: RunningDriver,
) -> None:
    source = await create_volume(csi, "pvc-1")
    for request in (from_volume("clone", source.volume_id), from_snapshot("restored", "snap-1")):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await csi.controller.CreateVolume(request)
        assert_status(
            raised,
            grpc.StatusCode.INVALID_ARGUMENT,
            "volume_content_source is not supported (no snapshots/clones)",
        )


async def test_a_failed_restore_copy_leaves_no_volume_no_data_and_no_reservation(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    taken = await snapshot(snap, "snapshot-1", source.volume_id)
    before = await capacity(snap, "node-1")

    def failing_copy(source: object, destination: Path, *args: object) -> None:
        destination.mkdir()
        (destination / "partial").write_text("half a copy")
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(content_sources_module, "copy_data", failing_copy)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await restore(snap, "restored", taken.snapshot_id)

    assert_status(raised, grpc.StatusCode.INTERNAL, "Input/output error")
    assert await capacity(snap, "node-1") == before
    assert [e.volume.volume_id for e in await list_all(snap)] == [source.volume_id]
    assert backing_entries(snap.config.volumes_dir) == {source.volume_id}
    assert not snap.driver.controller.in_flight.held()  # type: ignore[union-attr]
