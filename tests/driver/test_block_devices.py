"""Raw block volumes published as loop device nodes (node.block_device: loop).

What container runtimes and the kubelet's block teardown need: the target is a
block device over the volume's backing file, torn down when the last publication
goes, and put back in order after a crash or a reboot.
"""

from __future__ import annotations

import fcntl
import os
import stat
import struct
from pathlib import Path

import grpc
import pytest

from csi_mock.driver import Driver
from csi_mock.host.loop import KernelLoopDevices, LoopDeviceError
from csi_mock.proto import csi_pb2 as pb
from csi_mock.server import DriverServer
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    assert_status,
    block_capability,
    create_volume,
    publish,
    stage,
    staged_and_published,
    stats,
    unpublish,
    unstage,
)

MiB = 1 << 20
BLKGETSIZE64 = 0x80081272
BYTES = pb.VolumeUsage.Unit.BYTES

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(not KernelLoopDevices.available(), reason="no read-write /dev/loop-control"),
]


@pytest.fixture
async def loop_csi(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(node={"id": "node-1", "mount": "bind", "block_device": "loop"})


def device_size(path: Path) -> int:
    with open(path, "rb") as device:
        buffer = fcntl.ioctl(device.fileno(), BLKGETSIZE64, b"\0" * 8)
    return int(struct.unpack("Q", buffer)[0])


def loops_backed_by(path: Path) -> list[str]:
    wanted = os.path.realpath(path)
    return [d for d, f in KernelLoopDevices().attached().items() if str(f) == wanted]


def backing_file(csi: RunningDriver, volume_id: str) -> Path:
    return csi.config.volumes_dir / volume_id


async def test_published_block_volume_is_a_block_device_of_the_volume_size(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])

    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        assert stat.S_ISBLK(target.stat().st_mode)
        assert device_size(target) == 4 * MiB
        (device,) = loops_backed_by(backing_file(loop_csi, volume.volume_id))
        assert target.stat().st_rdev == os.stat(device).st_rdev


async def test_bytes_written_to_the_device_land_in_the_backing_file(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        fd = os.open(target, os.O_WRONLY)
        try:
            os.pwrite(fd, b"block-data", MiB)
            os.fsync(fd)  # Out of the device's page cache, through the loop to the file.
        finally:
            os.close(fd)

    with open(backing_file(loop_csi, volume.volume_id), "rb") as data:
        data.seek(MiB)
        assert data.read(10) == b"block-data"


async def test_unpublishing_the_last_target_detaches_the_loop_device(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", MiB, capabilities=[block_capability()])
    await stage(loop_csi, volume.volume_id, staging, block_capability())
    await publish(loop_csi, volume.volume_id, target, staging, block_capability())
    assert loops_backed_by(backing_file(loop_csi, volume.volume_id))

    await unpublish(loop_csi, volume.volume_id, target)
    await unstage(loop_csi, volume.volume_id, staging)

    assert loops_backed_by(backing_file(loop_csi, volume.volume_id)) == []
    assert not target.exists()


async def test_stats_answer_for_another_bind_mount_of_the_published_device(
    loop_csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    """The kubelet asks at <global map path>/<pod UID>, its own bind mount of our node."""
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    global_map = tmp_path / "volumeDevices" / "pv" / "dev"
    global_map.mkdir(parents=True)
    kubelet_path = global_map / "pod-uid"
    kubelet_path.touch()
    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        mounter = loop_csi.driver.node.mounter  # type: ignore[union-attr]
        mounter.bind(str(target), str(kubelet_path), readonly=False)
        try:
            report = await stats(loop_csi, volume.volume_id, kubelet_path)
        finally:
            mounter.unmount(str(kubelet_path))

    assert [u.unit for u in report.usage] == [BYTES]
    assert report.usage[0].total == 4 * MiB
    assert not report.volume_condition.abnormal


async def test_expansion_grows_the_published_device(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", 2 * MiB, capabilities=[block_capability()])
    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        await loop_csi.controller.ControllerExpandVolume(
            pb.ControllerExpandVolumeRequest(
                volume_id=volume.volume_id,
                capacity_range=pb.CapacityRange(required_bytes=3 * MiB),
                volume_capability=block_capability(),
            )
        )
        await loop_csi.node.NodeExpandVolume(
            pb.NodeExpandVolumeRequest(
                volume_id=volume.volume_id,
                volume_path=str(target),
                capacity_range=pb.CapacityRange(required_bytes=3 * MiB),
                volume_capability=block_capability(),
            )
        )
        assert device_size(target) == 3 * MiB


async def test_deleting_a_volume_detaches_a_loop_device_left_on_it(
    loop_csi: RunningDriver,
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", MiB, capabilities=[block_capability()])
    backing = backing_file(loop_csi, volume.volume_id)
    KernelLoopDevices().attach(backing)

    await loop_csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert loops_backed_by(backing) == []


async def restart(csi: RunningDriver) -> Driver:
    """Stop the served driver and open its state again, as a restarted process would."""
    await csi.server.stop(grace=1)
    driver = Driver.open(csi.config)
    driver.load()
    return driver


async def test_a_restart_detaches_a_device_no_recorded_publication_needs(
    loop_csi: RunningDriver,
) -> None:
    """A crash between setting the device up and recording the publication."""
    volume = await create_volume(loop_csi, "pvc-blk", MiB, capabilities=[block_capability()])
    backing = backing_file(loop_csi, volume.volume_id)
    KernelLoopDevices().attach(backing)

    driver = await restart(loop_csi)
    try:
        assert loops_backed_by(backing) == []
    finally:
        driver.close()


async def test_a_restart_sets_up_a_recorded_publication_whose_device_is_gone(
    loop_csi: RunningDriver, staging: Path, target: Path, start_driver: StartDriver
) -> None:
    """A reboot: the record survives, the loop device and the bind mount do not."""
    volume = await create_volume(loop_csi, "pvc-blk", MiB, capabilities=[block_capability()])
    await stage(loop_csi, volume.volume_id, staging, block_capability())
    await publish(loop_csi, volume.volume_id, target, staging, block_capability())
    backing = backing_file(loop_csi, volume.volume_id)
    mounter = loop_csi.driver.node.mounter  # type: ignore[union-attr]
    mounter.unmount(str(target))
    KernelLoopDevices().detach(backing)

    driver = await restart(loop_csi)
    driver.close()
    (device,) = loops_backed_by(backing)
    assert mounter.is_mounted(str(target))
    assert target.stat().st_rdev == os.stat(device).st_rdev

    again = await start_driver(node={"id": "node-1", "mount": "bind", "block_device": "loop"})
    await unpublish(again, volume.volume_id, target)
    await unstage(again, volume.volume_id, staging)
    assert loops_backed_by(backing) == []


async def test_loop_mode_without_real_mounts_is_a_config_error(tmp_path: Path) -> None:
    from csi_mock.config import ConfigError
    from tests.driver.conftest import driver_config

    config = driver_config(
        tmp_path, node={"id": "node-1", "mount": "directory", "block_device": "loop"}
    )
    with pytest.raises(ConfigError, match=r"node\.block_device: loop needs real mounts"):
        DriverServer(Driver.open(config))


# -- a loop device is never reused while a mount shows it (issue 28, item 1) -------------


async def test_delete_of_a_published_block_volume_is_refused_and_keeps_its_device(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])

    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await loop_csi.controller.DeleteVolume(
                pb.DeleteVolumeRequest(volume_id=volume.volume_id)
            )
        assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "in use", str(target))
        (device,) = loops_backed_by(backing_file(loop_csi, volume.volume_id))
        assert target.stat().st_rdev == os.stat(device).st_rdev

    await loop_csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))


async def test_delete_is_refused_while_a_mount_shows_the_device_though_no_row_says_so(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    # A node service in another process: this controller's store has no record of the
    # publication, only the host's mounts tell.
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    store = loop_csi.driver.store
    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        staged = store.staging(volume.volume_id)
        (published,) = store.publications_of_volume(volume.volume_id)
        assert staged is not None
        with store.transaction():
            store.remove_publication(volume.volume_id, str(target))
            store.remove_staging(volume.volume_id)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await loop_csi.controller.DeleteVolume(
                    pb.DeleteVolumeRequest(volume_id=volume.volume_id)
                )
            assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "mounted at", str(target))
        finally:
            with store.transaction():
                store.add_staging(staged)
                store.add_publication(published)


async def test_a_loop_device_that_a_mount_shows_is_not_detached(
    loop_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(loop_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    backing = backing_file(loop_csi, volume.volume_id)

    async with staged_and_published(
        loop_csi, volume.volume_id, staging, target, block_capability()
    ):
        with pytest.raises(LoopDeviceError) as raised:
            KernelLoopDevices().detach(backing)
        assert str(target) in str(raised.value)
        assert len(loops_backed_by(backing)) == 1

    assert loops_backed_by(backing) == []
