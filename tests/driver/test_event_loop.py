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
import threading
import time
from pathlib import Path

import grpc

from csi_mock.backend.controller import CreateRequest
from csi_mock.model.volume import AccessMode, AccessType, Capability
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import GiB, MiB, create_volume, publish, stage, stats

SHARE_OF_THE_OPERATION = 0.3
GIB_FILES = 3
SMALL_FILES = 30_000
SNAPSHOT_FILES = 10_000


def fill(directory: Path, small_files: int = SMALL_FILES) -> None:
    """3 GiB of allocated (not sparse) space and many small files."""
    for index in range(GIB_FILES):
        fd = os.open(directory / f"big-{index}", os.O_CREAT | os.O_WRONLY)
        try:
            os.posix_fallocate(fd, 0, GiB)
        finally:
            os.close(fd)
    for group in range(small_files // 500):
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


async def slowest_probe_from_a_thread(
    csi: RunningDriver, work: asyncio.Future[object]
) -> tuple[float, float]:
    """As slowest_probe_while, with the Probes sent by a blocking client in a thread of
    its own: a client on the driver's event loop cannot send while the loop is blocked,
    so a block that falls between two of its Probes goes unseen."""
    began = time.perf_counter()
    stop = threading.Event()
    slowest = [0.0]

    def probe() -> None:
        with grpc.insecure_channel(f"unix://{csi.config.socket_path}") as channel:
            identity = pb_grpc.IdentityStub(channel)
            while not stop.is_set():
                started = time.perf_counter()
                identity.Probe(pb.ProbeRequest(), timeout=60)
                slowest[0] = max(slowest[0], time.perf_counter() - started)
                time.sleep(0.005)

    prober = asyncio.ensure_future(asyncio.to_thread(probe))
    try:
        await work
    finally:
        stop.set()
        await prober
    return slowest[0], time.perf_counter() - began


async def test_probe_answers_while_a_large_volume_is_snapshotted_and_restored(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(
        pools=[{"name": "big", "size": "100Gi"}],
        controller={"snapshots": {"accounting": "used"}},
    )
    volume = await create_volume(csi, "pvc-large", 10 * GiB)
    # A third of the files: a copy costs about 0.2 ms per file, ten times a removal.
    fill(csi.config.volumes_dir / volume.volume_id, SNAPSHOT_FILES)

    cutting = asyncio.ensure_future(
        csi.controller.CreateSnapshot(
            pb.CreateSnapshotRequest(name="snapshot-large", source_volume_id=volume.volume_id)
        )
    )
    slowest, took = await slowest_probe_from_a_thread(csi, cutting)
    assert_probes_went_on(slowest, took, "CreateSnapshot")
    snapshot_id = cutting.result().snapshot.snapshot_id
    print(f"CreateSnapshot: {took * 1000:.0f} ms, slowest Probe {slowest * 1000:.1f} ms")

    request = pb.CreateVolumeRequest(
        name="pvc-restored",
        volume_capabilities=[
            pb.VolumeCapability(
                mount=pb.VolumeCapability.MountVolume(),
                access_mode=pb.VolumeCapability.AccessMode(
                    mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                ),
            )
        ],
    )
    request.volume_content_source.snapshot.snapshot_id = snapshot_id
    restoring = asyncio.ensure_future(csi.controller.CreateVolume(request))
    slowest, took = await slowest_probe_from_a_thread(csi, restoring)
    assert_probes_went_on(slowest, took, "CreateVolume from a snapshot")
    print(f"restore: {took * 1000:.0f} ms, slowest Probe {slowest * 1000:.1f} ms")
    restored = csi.config.volumes_dir / restoring.result().volume.volume_id
    assert len(os.listdir(restored)) == GIB_FILES + SNAPSHOT_FILES // 500


LISTED_VOLUMES = 2_000
LISTING_ATTEMPTS = 3


async def test_probe_answers_while_every_volume_is_listed(start_driver: StartDriver) -> None:
    csi = await start_driver(pools=[{"name": "big", "size": "100Gi"}])
    # Through the backend, not gRPC: the listing is under test, and this is 3x faster.
    capabilities = [Capability(AccessType.MOUNT, AccessMode.SINGLE_NODE_WRITER)]
    for index in range(LISTED_VOLUMES):
        csi.driver.controller.create_volume(
            CreateRequest(name=f"pvc-{index}", capabilities=capabilities, required_bytes=MiB)
        )

    # The listing takes only a few hundred milliseconds, so one descheduling of the
    # probing thread on a loaded machine is a large share of it. The best of a few
    # listings is measured: with the listing on the loop, every one of them has a
    # ratio near 1, so the retries cannot hide that.
    attempts: list[tuple[float, float]] = []
    for _ in range(LISTING_ATTEMPTS):
        listing = asyncio.ensure_future(csi.controller.ListVolumes(pb.ListVolumesRequest()))
        slowest, took = await slowest_probe_from_a_thread(csi, listing)
        assert len(listing.result().entries) == LISTED_VOLUMES
        assert listing.result().next_token == ""
        attempts.append((slowest, took))
        if slowest < SHARE_OF_THE_OPERATION * took:
            break
    slowest, took = min(attempts, key=lambda attempt: attempt[0] / attempt[1])
    assert_probes_went_on(
        slowest, took, f"ListVolumes without max_entries (best of {len(attempts)})"
    )
