"""Filesystem work runs off the event loop: other calls are answered meanwhile.

The volume here holds 3 GiB of allocated data and 30,000 files, which takes the
removal several hundred milliseconds on the disks seen so far. While it runs, Probe
(which touches no state) must keep answering: its slowest answer must be a small part
of the whole operation. With the work on the loop, one Probe waits for all of it (the
ratio is about 1); the bound is a ratio, not a time, so a loaded CI machine, which
slows both, does not change the verdict.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import GiB, create_volume, publish, stage, stats

SHARE_OF_THE_OPERATION = 0.3
GIB_FILES = 3
SMALL_FILES = 30_000


def fill(directory: Path) -> None:
    """3 GiB of allocated (not sparse) space and many small files."""
    for index in range(GIB_FILES):
        fd = os.open(directory / f"big-{index}", os.O_CREAT | os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, GiB)
        finally:
            os.close(fd)
    for group in range(SMALL_FILES // 500):
        sub = directory / f"d{group}"
        sub.mkdir()
        for index in range(500):
            (sub / f"f{index}").touch()


async def slowest_probe_while(
    csi: RunningDriver, work: asyncio.Future[object]
) -> tuple[float, float]:
    """The slowest Probe answered while `work` ran, and how long `work` took."""
    began = time.perf_counter()
    slowest = 0.0
    while not work.done():
        started = time.perf_counter()
        await csi.identity.Probe(pb.ProbeRequest())
        slowest = max(slowest, time.perf_counter() - started)
        await asyncio.sleep(0.005)
    await work
    return slowest, time.perf_counter() - began


def assert_probes_went_on(slowest: float, took: float, operation: str) -> None:
    assert slowest < SHARE_OF_THE_OPERATION * took, (
        f"a Probe took {slowest * 1000:.0f} ms while {operation} ran for {took * 1000:.0f} ms"
    )


async def test_probe_answers_while_a_large_volume_is_deleted(start_driver: StartDriver) -> None:
    csi = await start_driver(pools=[{"name": "big", "size": "100Gi"}])
    volume = await create_volume(csi, "pvc-large", 10 * GiB)
    fill(csi.config.volumes_dir / volume.volume_id)

    deletion = asyncio.ensure_future(
        csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))
    )
    slowest, took = await slowest_probe_while(csi, deletion)

    assert not (csi.config.volumes_dir / volume.volume_id).exists()
    assert_probes_went_on(slowest, took, "DeleteVolume")


async def test_probe_answers_while_a_large_volume_is_measured(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-stats", GiB)
    target = tmp_path / "target"
    await stage(csi, volume.volume_id, tmp_path / "staging")
    await publish(csi, volume.volume_id, target, tmp_path / "staging")
    fill(csi.config.volumes_dir / volume.volume_id)

    measuring = asyncio.ensure_future(stats(csi, volume.volume_id, target))
    slowest, took = await slowest_probe_while(csi, measuring)

    assert_probes_went_on(slowest, took, "NodeGetVolumeStats")
