"""Volumes in use are not deleted, a deleted volume is gone for the node at once, data
is never removed for want of a row, and paths from the CO never lead elsewhere
(issue 28, items 1-4 and 6-8)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import grpc
import pytest

from csi_mock.host.backing import LOST_DIR
from csi_mock.proto import csi_pb2 as pb
from csi_mock.startup import StartupError
from csi_mock.store.sqlite import StateStore
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    GiB,
    assert_status,
    backing_entries,
    capacity,
    create_volume,
    is_mount_point,
    publish,
    stage,
    staged_and_published,
    unpublish,
    unstage,
)


async def delete(csi: RunningDriver, volume_id: str) -> None:
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume_id))


# -- delete while in use (items 2 and 3) -------------------------------------------------


async def test_delete_of_a_staged_and_published_volume_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    before = (await capacity(csi, "node-1")).available_capacity

    async with staged_and_published(csi, volume.volume_id, staging, target):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await delete(csi, volume.volume_id)
        assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "in use", str(target))
        assert (await capacity(csi, "node-1")).available_capacity == before
        assert backing_entries(csi.config.volumes_dir) == {volume.volume_id}

    await delete(csi, volume.volume_id)
    assert (await capacity(csi, "node-1")).available_capacity == before + GiB


async def test_delete_of_a_volume_staged_only_is_failed_precondition(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await delete(csi, volume.volume_id)
    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "staged at", str(staging))

    await unstage(csi, volume.volume_id, staging)
    await delete(csi, volume.volume_id)


async def test_node_finds_no_volume_once_its_delete_has_committed(
    csi: RunningDriver, staging: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    removing, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    assert csi.driver.controller is not None
    backing = csi.driver.controller.backing
    discard = backing.discard

    def slow_discard(path: Path) -> None:  # The data's removal, still under way.
        loop.call_soon_threadsafe(removing.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)
        discard(path)

    monkeypatch.setattr(backing, "discard", slow_discard)
    deleting = asyncio.create_task(delete(csi, volume.volume_id))
    await asyncio.wait_for(removing.wait(), 10)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stage(csi, volume.volume_id, staging)
        assert_status(raised, grpc.StatusCode.NOT_FOUND, volume.volume_id)
    finally:
        release.set()
        await deleting
    assert backing_entries(csi.config.volumes_dir) == set()


# -- missing rows (item 4) ---------------------------------------------------------------


async def test_a_state_database_without_the_volume_rows_costs_no_data(
    start_driver: StartDriver, caplog: pytest.LogCaptureFixture
) -> None:
    first = await start_driver()
    volume = await create_volume(first, "pvc-1", GiB)
    (first.config.volumes_dir / volume.volume_id / "data").write_text("precious")
    await first.channel.close()
    await first.server.stop(grace=1)
    store = StateStore(first.config.state_dir / "state.db")
    row = store.volume_by_id(volume.volume_id)
    assert row is not None
    with store.transaction():
        store.delete_volume(row)
    store.close()

    await start_driver()

    (parked,) = backing_entries(first.config.volumes_dir)
    assert parked.startswith(f"{LOST_DIR}/{volume.volume_id}.")
    assert (first.config.volumes_dir / parked / "data").read_text() == "precious"
    assert f"moved to {first.config.volumes_dir / parked}" in caplog.text


async def test_an_empty_state_database_beside_volume_data_stops_start_up_naming_both(
    start_driver: StartDriver,
) -> None:
    """An empty (0-byte) state.db is a lost database, not a new one, while the data it
    described is there: start-up refuses (as for an unreadable one) and moves nothing."""
    first = await start_driver()
    volume = await create_volume(first, "pvc-1", GiB)
    (first.config.volumes_dir / volume.volume_id / "data").write_text("precious")
    await first.channel.close()
    await first.server.stop(grace=1)
    database = first.config.state_dir / "state.db"
    database.write_bytes(b"")

    with pytest.raises(StartupError) as refused:
        await start_driver()

    message = str(refused.value)
    assert f"{database} is empty (0 bytes)" in message
    assert f"{first.config.volumes_dir} holds 1 volume" in message
    assert "Restore it from a backup" in message
    assert backing_entries(first.config.volumes_dir) == {volume.volume_id}
    assert database.stat().st_size == 0


async def test_an_empty_state_database_without_volume_data_is_a_new_one(
    start_driver: StartDriver,
) -> None:
    first = await start_driver()
    await first.channel.close()
    await first.server.stop(grace=1)
    (first.config.state_dir / "state.db").write_bytes(b"")

    again = await start_driver()

    assert await create_volume(again, "pvc-1", GiB)


# -- paths (items 6-8) --------------------------------------------------------------------


async def test_publish_onto_a_symbolic_link_is_invalid_argument_and_mounts_nothing(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target.symlink_to(elsewhere)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, staging)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "target_path", "symbolic link")
    assert not is_mount_point(elsewhere)
    assert target.is_symlink()
    await unstage(csi, volume.volume_id, staging)


async def test_staging_below_a_symbolic_link_is_invalid_argument_and_creates_nothing(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "plugins").symlink_to(elsewhere)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, tmp_path / "plugins" / "pv" / "globalmount")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "staging_target_path", "'plugins'")
    assert list(elsewhere.iterdir()) == []


async def test_a_target_inside_the_state_directory_is_invalid_argument(
    csi: RunningDriver, staging: Path
) -> None:
    first = await create_volume(csi, "pvc-1", GiB)
    second = await create_volume(csi, "pvc-2", GiB)
    await stage(csi, first.volume_id, staging)
    inside = csi.config.volumes_dir / second.volume_id / "mnt"

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, first.volume_id, inside, staging)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "target_path", "driver's own")
    assert not inside.exists()
    await unstage(csi, first.volume_id, staging)


async def test_paths_outside_the_allowed_roots_are_invalid_argument(
    start_driver: StartDriver, tmp_path: Path
) -> None:
    allowed = tmp_path / "kubelet"
    allowed.mkdir()
    csi = await start_driver(
        node={"id": "node-1", "mount": "directory", "allowed_roots": [str(allowed)]}
    )
    volume = await create_volume(csi, "pvc-1", GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, tmp_path / "other" / "globalmount")
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "staging_target_path", "allowed roots")

    await stage(csi, volume.volume_id, allowed / "globalmount")
    await unstage(csi, volume.volume_id, allowed / "globalmount")


async def test_unpublish_in_directory_mode_leaves_files_the_driver_did_not_create(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    (target / "someone-elses").write_text("keep me")

    await unpublish(csi, volume.volume_id, target)

    assert (target / "someone-elses").read_text() == "keep me"
    await unstage(csi, volume.volume_id, staging)


async def test_unpublish_removes_the_empty_target_it_created(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    await unpublish(csi, volume.volume_id, target)

    assert not os.path.lexists(target)
    await unstage(csi, volume.volume_id, staging)
