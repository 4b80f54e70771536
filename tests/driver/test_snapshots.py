"""CreateSnapshot, DeleteSnapshot, ListSnapshots and GetSnapshot (controller.snapshots):
the CSI error tables, idempotency, pagination, and each accounting policy as GetCapacity
shows it."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path

import grpc
import pytest

import csi_mock.backend.snapshots as snapshots_module
from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    GiB,
    MiB,
    assert_status,
    backing_entries,
    block_capability,
    capacity,
    create_volume,
)
from tests.driver.snapshot_helpers import (
    RPC,
    SNAPSHOT_RPCS,
    controller_rpcs,
    copies_held,
    data_of,
    delete_snapshot,
    from_snapshot,
    list_snapshots,
    snapshot,
    snapshot_data,
    snapshots_config,
)


@pytest.fixture
async def snap(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(controller=snapshots_config())


# -- capabilities ------------------------------------------------------------------------


async def test_snapshot_accessibility_requirements_are_refused_as_not_advertised(
    snap: RunningDriver,
) -> None:
    volume = await create_volume(snap, "pvc-source", GiB)
    request = pb.CreateSnapshotRequest(name="snap", source_volume_id=volume.volume_id)
    request.accessibility_requirements.requisite.add().segments["zone"] = "a"

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.controller.CreateSnapshot(request)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS")
    assert (await list_snapshots(snap)).entries == []


async def test_snapshot_rpcs_and_cloning_are_advertised_when_configured(
    snap: RunningDriver,
) -> None:
    assert SNAPSHOT_RPCS | {RPC.CLONE_VOLUME} <= await controller_rpcs(snap)


async def test_without_configuration_nothing_is_advertised_and_the_rpcs_are_unimplemented(
    csi: RunningDriver,
) -> None:
    assert not (SNAPSHOT_RPCS | {RPC.CLONE_VOLUME}) & await controller_rpcs(csi)
    calls = [
        csi.controller.CreateSnapshot(pb.CreateSnapshotRequest(name="s", source_volume_id="v")),
        csi.controller.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id="snap-1")),
        csi.controller.ListSnapshots(pb.ListSnapshotsRequest()),
        csi.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id="snap-1")),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call
        assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "snapshots are not supported")
    assert not csi.config.snapshots_dir.exists()


async def test_snapshots_without_clones_advertise_no_cloning(start_driver: StartDriver) -> None:
    csi = await start_driver(controller=snapshots_config(clones=False))
    rpcs = await controller_rpcs(csi)
    assert rpcs >= SNAPSHOT_RPCS and RPC.CLONE_VOLUME not in rpcs


# -- CreateSnapshot ----------------------------------------------------------------------


async def test_create_snapshot_describes_the_snapshot_of_its_source(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1", 2 * GiB)
    before = time.time()

    taken = await snapshot(snap, "snapshot-1", volume.volume_id)

    assert taken.snapshot_id.startswith("snap-")
    assert taken.source_volume_id == volume.volume_id
    assert taken.size_bytes == 2 * GiB
    assert taken.ready_to_use
    assert before - 1 <= taken.creation_time.ToNanoseconds() / 1e9 <= time.time()
    assert snapshot_data(snap, taken.snapshot_id).is_dir()


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"source_volume_id": "vol-1"}, "name"), ({"name": "snapshot-1"}, "source_volume_id")],
)
async def test_create_snapshot_without_a_required_field_is_invalid(
    snap: RunningDriver, fields: dict[str, str], named: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.controller.CreateSnapshot(pb.CreateSnapshotRequest(**fields))
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, named)


@pytest.mark.parametrize("source", ["vol-0123456789abcdef0123456789abcdef", "../../etc", "x" * 300])
async def test_create_snapshot_of_an_unknown_volume_is_not_found(
    snap: RunningDriver, source: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snapshot(snap, "snapshot-1", source)
    assert_status(raised, grpc.StatusCode.NOT_FOUND, "source volume")


async def test_create_snapshot_with_a_banned_character_in_its_name_is_invalid(
    snap: RunningDriver,
) -> None:
    volume = await create_volume(snap, "pvc-1")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snapshot(snap, "bad\x07name", volume.volume_id)
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "name", "U+0007")


async def test_a_repeated_create_snapshot_returns_the_same_snapshot_charged_once(
    snap: RunningDriver,
) -> None:
    volume = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    first = await snapshot(snap, "snapshot-1", volume.volume_id)
    after_first = await capacity(snap, "node-1")

    again = await snapshot(snap, "snapshot-1", volume.volume_id)

    assert again == first
    assert await capacity(snap, "node-1") == after_first
    assert len((await list_snapshots(snap)).entries) == 1


async def test_the_same_snapshot_name_for_another_source_already_exists(
    snap: RunningDriver,
) -> None:
    one = await create_volume(snap, "pvc-1")
    other = await create_volume(snap, "pvc-2")
    await snapshot(snap, "snapshot-1", one.volume_id)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snapshot(snap, "snapshot-1", other.volume_id)

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "snapshot-1", one.volume_id)


async def test_create_snapshot_records_its_parameters(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", volume.volume_id, {"retention": "7d"})

    stored = snap.driver.store.snapshot_by_id(taken.snapshot_id)

    assert stored is not None and stored.parameters == {"retention": "7d"}


async def test_a_snapshot_is_not_ready_until_ready_after_has_passed(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller=snapshots_config(ready_after="300ms"))
    volume = await create_volume(csi, "pvc-1")

    taken = await snapshot(csi, "snapshot-1", volume.volume_id)
    assert not taken.ready_to_use
    get = pb.GetSnapshotRequest(snapshot_id=taken.snapshot_id)
    assert not (await csi.controller.GetSnapshot(get)).snapshot.ready_to_use
    await asyncio.sleep(0.35)

    # As csi-sanity and the external-snapshotter do: repeat CreateSnapshot until ready.
    again = await snapshot(csi, "snapshot-1", volume.volume_id)
    assert again.ready_to_use and again.snapshot_id == taken.snapshot_id
    assert (await csi.controller.GetSnapshot(get)).snapshot.ready_to_use
    assert (await list_snapshots(csi)).entries[0].snapshot.ready_to_use


async def test_a_snapshot_without_room_for_its_charge_is_resource_exhausted_naming_the_pool(
    snap: RunningDriver,
) -> None:
    # node-1 holds 10 GiB: two 4 GiB volumes leave 2 GiB, less than a 4 GiB charge.
    volume = await create_volume(snap, "pvc-1", 4 * GiB, requisite=["node-1"])
    await create_volume(snap, "pvc-2", 4 * GiB, requisite=["node-1"])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snapshot(snap, "snapshot-1", volume.volume_id)

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "pool node-1", str(4 * GiB))
    assert not (await list_snapshots(snap)).entries
    assert backing_entries(snap.config.snapshots_dir) == set()
    assert (await capacity(snap, "node-1")).available_capacity == 2 * GiB


async def test_create_snapshot_of_a_block_volume_copies_its_file(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1", 64 * MiB, capabilities=[block_capability()])
    with open(data_of(snap, volume.volume_id), "r+b") as disk:
        disk.seek(10 * MiB)
        disk.write(b"block data")

    taken = await snapshot(snap, "snapshot-1", volume.volume_id)

    copy = snapshot_data(snap, taken.snapshot_id)
    assert copy.stat().st_size == 64 * MiB
    with open(copy, "rb") as disk:
        disk.seek(10 * MiB)
        assert disk.read(10) == b"block data"
    assert copy.stat().st_blocks * 512 < 4 * MiB  # holes stay holes


# -- accounting, as GetCapacity shows it ---------------------------------------------------


async def test_full_accounting_takes_the_sources_allocation(start_driver: StartDriver) -> None:
    csi = await start_driver(controller=snapshots_config("full"))
    volume = await create_volume(
        csi, "pvc-1", GiB, requisite=["node-1"], parameters={"kind": "mirrored"}
    )
    before = await capacity(csi, "node-1")

    await snapshot(csi, "snapshot-1", volume.volume_id)

    after = await capacity(csi, "node-1")
    assert before.available_capacity - after.available_capacity == 2 * GiB
    assert (await capacity(csi, "node-2")).available_capacity == 20 * GiB


async def test_used_accounting_takes_the_data_the_source_holds(start_driver: StartDriver) -> None:
    csi = await start_driver(controller=snapshots_config("used"))
    volume = await create_volume(
        csi, "pvc-1", GiB, requisite=["node-1"], parameters={"kind": "mirrored"}
    )
    (data_of(csi, volume.volume_id) / "file").write_bytes(b"x" * 3 * MiB)
    before = await capacity(csi, "node-1")

    await snapshot(csi, "snapshot-1", volume.volume_id)

    after = await capacity(csi, "node-1")
    assert before.available_capacity - after.available_capacity == 6 * MiB  # 3 MiB mirrored


async def test_copy_on_write_accounting_takes_nothing(start_driver: StartDriver) -> None:
    csi = await start_driver(controller=snapshots_config("copy_on_write"))
    volume = await create_volume(csi, "pvc-1", GiB, requisite=["node-1"])
    (data_of(csi, volume.volume_id) / "file").write_bytes(b"x" * MiB)
    before = await capacity(csi, "node-1")

    taken = await snapshot(csi, "snapshot-1", volume.volume_id)

    assert await capacity(csi, "node-1") == before
    assert (snapshot_data(csi, taken.snapshot_id) / "file").read_bytes() == b"x" * MiB


async def test_a_snapshot_charge_takes_an_extent_of_a_contiguous_pool(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(
        controller=snapshots_config("full"),
        pools=[{"name": "lvm", "size": "4Gi", "allocation": "contiguous"}],
    )
    first = await create_volume(csi, "pvc-1", GiB)
    await snapshot(csi, "snapshot-1", first.volume_id)  # [vol 1G][snap 1G][free 2G]
    await create_volume(csi, "pvc-2", GiB)  # [vol][snap][vol][free 1G]
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=first.volume_id))

    report = await capacity(csi)

    assert report.available_capacity == 2 * GiB
    assert report.maximum_volume_size.value == GiB  # two free extents of 1 GiB


async def test_delete_snapshot_gives_its_charge_back(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    before = await capacity(snap, "node-1")
    taken = await snapshot(snap, "snapshot-1", volume.volume_id)
    assert (await capacity(snap, "node-1")).available_capacity == before.available_capacity - GiB

    await delete_snapshot(snap, taken.snapshot_id)

    assert await capacity(snap, "node-1") == before
    assert not snapshot_data(snap, taken.snapshot_id).exists()


async def test_a_snapshot_outlives_its_source_volume_and_keeps_its_charge(
    snap: RunningDriver,
) -> None:
    volume = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    taken = await snapshot(snap, "snapshot-1", volume.volume_id)

    await snap.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert (await capacity(snap, "node-1")).available_capacity == 9 * GiB
    got = await snap.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id=taken.snapshot_id))
    assert got.snapshot.source_volume_id == volume.volume_id


# -- DeleteSnapshot ----------------------------------------------------------------------


async def test_delete_snapshot_without_an_id_is_invalid(snap: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await delete_snapshot(snap, "")
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "snapshot_id")


@pytest.mark.parametrize("snapshot_id", ["snap-0123456789abcdef", "reallyfakesnapshotid", "../x"])
async def test_delete_snapshot_of_an_unknown_id_succeeds(
    snap: RunningDriver, snapshot_id: str
) -> None:
    await delete_snapshot(snap, snapshot_id)


async def test_delete_snapshot_twice_succeeds(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", volume.volume_id)

    await delete_snapshot(snap, taken.snapshot_id)
    await delete_snapshot(snap, taken.snapshot_id)

    assert not (await list_snapshots(snap)).entries


# -- ListSnapshots and GetSnapshot ---------------------------------------------------------


async def test_list_snapshots_pages_through_every_snapshot_in_creation_order(
    snap: RunningDriver,
) -> None:
    volume = await create_volume(snap, "pvc-1")
    taken = [(await snapshot(snap, f"s{n}", volume.volume_id)).snapshot_id for n in range(5)]

    seen, token, pages = [], "", 0
    while True:
        page = await list_snapshots(snap, max_entries=2, starting_token=token)
        assert len(page.entries) <= 2
        seen += [e.snapshot.snapshot_id for e in page.entries]
        pages += 1
        token = page.next_token
        if not token:
            break

    assert seen == taken and pages == 3
    rest = await list_snapshots(
        snap, starting_token=(await list_snapshots(snap, max_entries=2)).next_token
    )
    assert [e.snapshot.snapshot_id for e in rest.entries] == taken[2:]


@pytest.mark.parametrize("token", ["x", "-1", "1.5", "99", "٣"])
async def test_list_snapshots_with_a_token_it_never_gave_is_aborted(
    snap: RunningDriver, token: str
) -> None:
    volume = await create_volume(snap, "pvc-1")
    await snapshot(snap, "s1", volume.volume_id)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await list_snapshots(snap, starting_token=token)
    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_list_snapshots_with_a_token_of_5000_digits_is_aborted(snap: RunningDriver) -> None:
    # Past Python's 4,300-digit int conversion limit, which once made this INTERNAL.
    volume = await create_volume(snap, "pvc-1")
    await snapshot(snap, "s1", volume.volume_id)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await list_snapshots(snap, starting_token="1" * 5000)
    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_list_snapshots_with_negative_max_entries_is_invalid(snap: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await list_snapshots(snap, max_entries=-1)
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "max_entries")


async def test_list_snapshots_filters_by_snapshot_id_and_by_source_volume(
    snap: RunningDriver,
) -> None:
    one = await create_volume(snap, "pvc-1")
    other = await create_volume(snap, "pvc-2")
    a = await snapshot(snap, "a", one.volume_id)
    b = await snapshot(snap, "b", other.volume_id)
    c = await snapshot(snap, "c", one.volume_id)

    def ids(response: pb.ListSnapshotsResponse) -> list[str]:
        return [e.snapshot.snapshot_id for e in response.entries]

    assert ids(await list_snapshots(snap, snapshot_id=b.snapshot_id)) == [b.snapshot_id]
    by_source = await list_snapshots(snap, source_volume_id=one.volume_id)
    assert ids(by_source) == [a.snapshot_id, c.snapshot_id]
    both = await list_snapshots(snap, snapshot_id=b.snapshot_id, source_volume_id=one.volume_id)
    assert ids(both) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"snapshot_id": "none-exist-id"},
        {"snapshot_id": "snap-0123456789abcdef0123456789abcdef"},
        {"source_volume_id": "vol-0123456789abcdef0123456789abcdef"},
    ],
)
async def test_list_snapshots_of_an_unknown_snapshot_or_volume_is_empty(
    snap: RunningDriver, fields: dict[str, str]
) -> None:
    volume = await create_volume(snap, "pvc-1")
    await snapshot(snap, "s1", volume.volume_id)
    response = await list_snapshots(snap, **fields)
    assert not response.entries and not response.next_token


async def test_get_snapshot_returns_the_snapshot(snap: RunningDriver) -> None:
    volume = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "s1", volume.volume_id)
    got = await snap.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id=taken.snapshot_id))
    assert got.snapshot == taken


@pytest.mark.parametrize(
    ("snapshot_id", "code"),
    [
        ("", grpc.StatusCode.INVALID_ARGUMENT),
        ("none-exist-id", grpc.StatusCode.NOT_FOUND),
        ("snap-0123456789abcdef0123456789abcdef", grpc.StatusCode.NOT_FOUND),
    ],
)
async def test_get_snapshot_refuses_a_missing_or_unknown_id(
    snap: RunningDriver, snapshot_id: str, code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snap.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id=snapshot_id))
    assert_status(raised, code, "snapshot_id" if not snapshot_id else "does not exist")


# -- while a copy runs ---------------------------------------------------------------------


async def test_delete_volume_of_a_source_being_copied_is_aborted_and_works_afterwards(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(snap, "pvc-1")
    (data_of(snap, volume.volume_id) / "file").write_text("data")
    with copies_held(monkeypatch, snapshots_module) as copy:
        cutting = asyncio.ensure_future(snapshot(snap, "snapshot-1", volume.volume_id))
        await copy.started()

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snap.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))
        assert_status(raised, grpc.StatusCode.ABORTED, "is in progress", volume.volume_id)

        copy.release()
        taken = await cutting
    assert (snapshot_data(snap, taken.snapshot_id) / "file").read_text() == "data"
    await snap.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))


async def test_a_second_create_snapshot_of_the_same_name_during_the_copy_is_aborted(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(snap, "pvc-1", requisite=["node-1"])
    with copies_held(monkeypatch, snapshots_module) as copy:
        cutting = asyncio.ensure_future(snapshot(snap, "snapshot-1", volume.volume_id))
        await copy.started()

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snapshot(snap, "snapshot-1", volume.volume_id)
        assert_status(raised, grpc.StatusCode.ABORTED, "snapshot name 'snapshot-1'")
        # The charge is reserved while the copy runs: GetCapacity already shows it.
        assert (await capacity(snap, "node-1")).available_capacity == 8 * GiB

        copy.release()
        taken = await cutting
    assert (await snapshot(snap, "snapshot-1", volume.volume_id)) == taken
    assert len((await list_snapshots(snap)).entries) == 1


async def test_two_snapshots_of_one_volume_may_be_cut_at_once(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(snap, "pvc-1")
    with copies_held(monkeypatch, snapshots_module) as copy:
        first = asyncio.ensure_future(snapshot(snap, "snapshot-1", volume.volume_id))
        await copy.started()
        second = asyncio.ensure_future(snapshot(snap, "snapshot-2", volume.volume_id))
        await asyncio.sleep(0.1)
        copy.release()
        taken = await asyncio.gather(first, second)
    assert len({t.snapshot_id for t in taken}) == 2


async def test_a_create_snapshot_whose_caller_gave_up_completes_and_its_retry_finds_it(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(snap, "pvc-1")
    request = pb.CreateSnapshotRequest(name="snapshot-1", source_volume_id=volume.volume_id)
    with copies_held(monkeypatch, snapshots_module) as copy:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await snap.controller.CreateSnapshot(request, timeout=0.3)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        copy.release()

    for _ in range(100):
        if not snap.driver.controller.in_flight.held():  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.02)
    retried = (await snap.controller.CreateSnapshot(request)).snapshot
    assert [e.snapshot.snapshot_id for e in (await list_snapshots(snap)).entries] == [
        retried.snapshot_id
    ]
    assert backing_entries(snap.config.snapshots_dir) == {retried.snapshot_id}


async def test_delete_snapshot_while_a_restore_reads_it_is_aborted(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import csi_mock.backend.content_sources as content_sources_module

    volume = await create_volume(snap, "pvc-1")
    taken = await snapshot(snap, "snapshot-1", volume.volume_id)
    with copies_held(monkeypatch, content_sources_module) as copy:
        restoring = asyncio.ensure_future(
            snap.controller.CreateVolume(from_snapshot("restored", taken.snapshot_id))
        )
        await copy.started()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await delete_snapshot(snap, taken.snapshot_id)
        assert_status(raised, grpc.StatusCode.ABORTED, taken.snapshot_id)
        copy.release()
        await restoring
    await delete_snapshot(snap, taken.snapshot_id)


async def test_a_failed_copy_leaves_no_snapshot_no_data_and_no_charge(
    snap: RunningDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(snap, "pvc-1", GiB, requisite=["node-1"])
    before = await capacity(snap, "node-1")

    def failing_copy(source: object, destination: Path, *args: object) -> None:
        destination.mkdir()
        (destination / "partial").write_text("half a copy")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snapshots_module, "copy_data", failing_copy)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await snapshot(snap, "snapshot-1", volume.volume_id)

    assert_status(raised, grpc.StatusCode.INTERNAL, "No space left on device")
    assert await capacity(snap, "node-1") == before
    assert backing_entries(snap.config.snapshots_dir) == set()
    assert not (await list_snapshots(snap)).entries
    assert not snap.driver.controller.in_flight.held()  # type: ignore[union-attr]
