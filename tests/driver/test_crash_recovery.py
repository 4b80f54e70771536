"""kill -9 during a create/delete storm loses nothing and leaks no capacity.

The database is read after each kill, before the next start: `load()` rebuilds pool
usage from the volume rows, so only a check before it can see a transaction that
committed a volume row without its usage (or the reverse).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
import yaml

from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from tests.driver.csi_helpers import backing_entries
from tests.driver.subprocess_driver import read_store

GI = 2**30
MI = 2**20
POOL_SIZE = 64 * GI


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "driver.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "endpoint": f"unix://{tmp_path}/csi.sock",
                "state_dir": str(tmp_path / "state"),
                "node": {"id": "node-1", "mount": "directory"},
                "kinds": {"striped": {"cost": 1}, "mirrored": {"cost": 2}},
                "pools": [{"name": "p", "size": POOL_SIZE, "allocation": "contiguous"}],
            }
        )
    )
    return path


def start(config: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process


def wait_ready(socket: Path, timeout: float = 15.0) -> grpc.Channel:
    deadline = time.monotonic() + timeout
    channel = grpc.insecure_channel(f"unix://{socket}")
    identity = pb_grpc.IdentityStub(channel)
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            if identity.Probe(pb.ProbeRequest(), timeout=1).ready.value:
                return channel
            last = "not ready"
        except grpc.RpcError as error:
            last = error.code().name
        time.sleep(0.05)
    raise AssertionError(f"driver at {socket} not ready after {timeout}s (last: {last})")


def storm(channel: grpc.Channel, stop: threading.Event, seed: int) -> None:
    controller = pb_grpc.ControllerStub(channel)
    rng = random.Random(seed)
    capability = pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(),
        access_mode=pb.VolumeCapability.AccessMode(
            mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
        ),
    )
    created: list[str] = []
    while not stop.is_set():
        try:
            if created and rng.random() < 0.4:
                volume_id = created.pop(rng.randrange(len(created)))
                controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume_id), timeout=2)
            else:
                response = controller.CreateVolume(
                    pb.CreateVolumeRequest(
                        name=f"s{seed}-{rng.getrandbits(40):x}",
                        capacity_range=pb.CapacityRange(required_bytes=rng.randint(1, 64) * MI),
                        volume_capabilities=[capability],
                        parameters={"kind": rng.choice(["striped", "mirrored"])},
                    ),
                    timeout=2,
                )
                created.append(response.volume.volume_id)
        except grpc.RpcError:
            return  # The driver was killed.


@pytest.mark.slow
def test_kill_9_during_a_storm_leaves_database_files_and_capacity_in_agreement(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path)
    socket = tmp_path / "csi.sock"
    database = tmp_path / "state" / "state.db"
    volumes_dir = tmp_path / "state" / "volumes"
    killed_with_volumes = 0
    for round_number in range(3):
        process = start(config)
        try:
            channel = wait_ready(socket)
            stop = threading.Event()
            workers = [
                threading.Thread(target=storm, args=(channel, stop, round_number * 10 + i))
                for i in range(4)
            ]
            for worker in workers:
                worker.start()
            time.sleep(0.6 + round_number * 0.3)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            stop.set()
            for worker in workers:
                worker.join(timeout=10)
            channel.close()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

        # What the dead driver committed, before the next start's load() rebuilds the
        # pool usage from the volume rows and removes orphan backing entries.
        left = read_store(database)
        assert not left.accounting_problems(), (round_number, left.accounting_problems())
        # A row's data is live, pending (committed, not yet moved into place) or
        # retired (moved aside, its delete not yet committed).
        entries = {name.rsplit("/", 1)[-1] for name in backing_entries(volumes_dir)}
        assert set(left.volumes) <= entries, (
            f"round {round_number}: volume rows without backing entries:"
            f" {sorted(set(left.volumes) - entries)}"
        )
        killed_with_volumes += bool(left.volumes)

    # Restart: recovery runs at load; then every view must agree exactly.
    process = start(config)
    try:
        channel = wait_ready(socket)
        controller = pb_grpc.ControllerStub(channel)
        listed = controller.ListVolumes(pb.ListVolumesRequest())
        capacity = controller.GetCapacity(pb.GetCapacityRequest(parameters={"kind": "striped"}))
        channel.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)

    final = read_store(database)
    ids_in_db = set(final.volumes)
    allocated = final.allocated("p")
    files = backing_entries(volumes_dir)  # Nothing pending, retired or parked is left.

    assert killed_with_volumes == 3, "a storm created nothing: the test proved nothing"
    assert files == ids_in_db
    assert {e.volume.volume_id for e in listed.entries} == ids_in_db
    assert final.pools["p"].used == allocated
    assert capacity.available_capacity == POOL_SIZE - allocated
