"""kill -9 while snapshot data is copied, or after: no snapshot or a complete one.

A snapshot's copy (and a restore's) is made before its row commits, so a killed driver
leaves at most an orphan copy, which the next start removes. The database is read after
each kill, before the restart, as in test_crash_recovery.py: only then can a commit that
kept a row without its pool charge (or the reverse) be seen.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from csi_mock.host.backing import PENDING_DIR
from csi_mock.proto import csi_pb2 as pb
from tests.driver.csi_helpers import backing_entries
from tests.driver.subprocess_driver import DriverProcess, read_store

GI = 2**30
POOL_SIZE = 64 * GI
FILES = 5000
"""Files in the source volume: its copy takes about 1.5 s here, long enough to kill it
half-way."""

CAPABILITY = pb.VolumeCapability(
    mount=pb.VolumeCapability.MountVolume(),
    access_mode=pb.VolumeCapability.AccessMode(
        mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    ),
)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[DriverProcess]:
    process = DriverProcess(
        tmp_path,
        {
            "node": {"id": "node-1", "mount": "directory"},
            "kinds": {"striped": {"cost": 1}, "mirrored": {"cost": 2}},
            "pools": [{"name": "p", "size": POOL_SIZE, "allocation": "contiguous"}],
            "controller": {"snapshots": {"accounting": "full"}, "clones": True},
        },
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


def create_volume(driver: DriverProcess, name: str, **source: str) -> pb.Volume:
    request = pb.CreateVolumeRequest(
        name=name,
        capacity_range=pb.CapacityRange(required_bytes=GI),
        volume_capabilities=[CAPABILITY],
        parameters={"kind": "mirrored"},
    )
    if "snapshot" in source:
        request.volume_content_source.snapshot.snapshot_id = source["snapshot"]
    return driver.controller.CreateVolume(request, timeout=60).volume


def create_snapshot(driver: DriverProcess, name: str, volume_id: str) -> pb.Snapshot:
    request = pb.CreateSnapshotRequest(name=name, source_volume_id=volume_id)
    return driver.controller.CreateSnapshot(request, timeout=60).snapshot


def fill(directory: Path) -> None:
    for n in range(FILES):
        (directory / f"file-{n:05}").write_bytes(b"x" * 512)


def kill_mid_copy(driver: DriverProcess, call: Callable[[], object], copies: Path) -> Path:
    """Start `call` in a thread, kill -9 the driver once a new entry in `copies` holds
    some files, and return that entry (the copy that was cut short)."""
    before = set(copies.iterdir())
    caller = threading.Thread(target=_ignore_rpc_errors, args=(call,))
    caller.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = set(copies.iterdir()) - before
        if new:
            (entry,) = new
            if len(list(entry.iterdir())) >= 50:
                driver.kill()
                caller.join(timeout=10)
                return entry
        time.sleep(0.005)
    raise AssertionError(f"no copy appeared in {copies} within 30 s")


def _ignore_rpc_errors(call: Callable[[], object]) -> None:
    with contextlib.suppress(grpc.RpcError):  # The driver was killed.
        call()


def available(driver: DriverProcess) -> int:
    request = pb.GetCapacityRequest(parameters={"kind": "striped"})
    return driver.controller.GetCapacity(request).available_capacity


@pytest.mark.slow
def test_kill_9_during_a_snapshot_copy_leaves_no_snapshot_and_start_up_removes_the_copy(
    driver: DriverProcess,
) -> None:
    volume = create_volume(driver, "pvc-1")
    fill(driver.volumes_dir / volume.volume_id)
    snapshots_dir = driver.state_dir / "snapshots"

    cut_short = kill_mid_copy(
        driver,
        lambda: create_snapshot(driver, "snapshot-1", volume.volume_id),
        snapshots_dir / PENDING_DIR,
    )

    left = read_store(driver.database)
    assert left.snapshots == {}
    assert not left.accounting_problems(), left.accounting_problems()
    assert left.pools["p"].used == 2 * GI
    assert 0 < len(list(cut_short.iterdir())) < FILES, "the copy was not cut short"

    driver.start()
    assert not cut_short.exists()
    listed = driver.controller.ListSnapshots(pb.ListSnapshotsRequest())
    assert not listed.entries
    assert available(driver) == POOL_SIZE - 2 * GI
    retried = create_snapshot(driver, "snapshot-1", volume.volume_id)
    assert len(list((snapshots_dir / retried.snapshot_id).iterdir())) == FILES
    assert available(driver) == POOL_SIZE - 4 * GI


@pytest.mark.slow
def test_kill_9_during_a_restore_leaves_no_volume_and_a_snapshot_survives_kill_9(
    driver: DriverProcess,
) -> None:
    source = create_volume(driver, "pvc-1")
    fill(driver.volumes_dir / source.volume_id)
    taken = create_snapshot(driver, "snapshot-1", source.volume_id)

    cut_short = kill_mid_copy(
        driver,
        lambda: create_volume(driver, "restored", snapshot=taken.snapshot_id),
        driver.volumes_dir / PENDING_DIR,
    )

    left = read_store(driver.database)
    assert set(left.volumes) == {source.volume_id}
    assert set(left.snapshots) == {taken.snapshot_id}
    assert not left.accounting_problems(), left.accounting_problems()
    assert left.pools["p"].used == 4 * GI  # the volume and its full snapshot, mirrored
    assert 0 < len(list(cut_short.iterdir())) < FILES, "the copy was not cut short"

    driver.start()
    assert not cut_short.exists()
    assert available(driver) == POOL_SIZE - 4 * GI
    restored = create_volume(driver, "restored", snapshot=taken.snapshot_id)
    assert len(list((driver.volumes_dir / restored.volume_id).iterdir())) == FILES

    # Killed while idle: the snapshot, its charge and the restore's source are kept.
    driver.kill()
    driver.start()
    got = driver.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id=taken.snapshot_id))
    assert got.snapshot.source_volume_id == source.volume_id and got.snapshot.ready_to_use
    assert available(driver) == POOL_SIZE - 6 * GI
    listed = driver.controller.ListVolumes(pb.ListVolumesRequest())
    sources = {e.volume.volume_id: e.volume.content_source for e in listed.entries}
    assert sources[restored.volume_id].snapshot.snapshot_id == taken.snapshot_id
    assert sources[source.volume_id].WhichOneof("type") is None
    driver.controller.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id=taken.snapshot_id))
    assert available(driver) == POOL_SIZE - 4 * GI
    assert backing_entries(driver.state_dir / "snapshots") == set()
