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


def write_config(root: Path, node: str = "node-1") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "driver.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "endpoint": f"unix://{root}/csi.sock",
                "state_dir": str(root / "state"),
                "node": {"id": node, "mount": "directory"},
                "kinds": {"striped": {"cost": 1}, "mirrored": {"cost": 2}},
                "pools": [{"name": "p", "size": POOL_SIZE, "allocation": "contiguous"}],
            }
        )
    )
    return path


def start(configs: list[Path]) -> subprocess.Popen[bytes]:
    """One `csi-mock serve` process serving an instance per configuration."""
    flags = [f"--config={config}" for config in configs]
    process = subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", *flags],
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
@pytest.mark.parametrize("instances", [1, 3], ids=["one-instance", "three-instances"])
def test_kill_9_during_a_storm_leaves_database_files_and_capacity_in_agreement(
    tmp_path: Path, instances: int
) -> None:
    """Three rounds of a create/delete storm killed with SIGKILL, then a restart. With
    three instances in one process (``serve --config a --config b --config c``), each
    instance is stormed at once, and each one's state must hold on its own."""
    roots = [tmp_path / f"node-{i}" for i in range(instances)]
    configs = [write_config(root, f"node-{i}") for i, root in enumerate(roots)]
    killed_with_volumes = dict.fromkeys(range(instances), 0)
    for round_number in range(3):
        process = start(configs)
        try:
            channels = [wait_ready(root / "csi.sock") for root in roots]
            stop = threading.Event()
            workers = [
                threading.Thread(
                    target=storm, args=(channel, stop, round_number * 100 + n * 10 + i)
                )
                for n, channel in enumerate(channels)
                for i in range(max(4 // instances, 2))
            ]
            for worker in workers:
                worker.start()
            time.sleep(0.6 + round_number * 0.3)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            stop.set()
            for worker in workers:
                worker.join(timeout=10)
            for channel in channels:
                channel.close()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

        for n, root in enumerate(roots):
            # What the dead driver committed, before the next start's load() rebuilds
            # the pool usage from the volume rows and removes orphan backing entries.
            left = read_store(root / "state" / "state.db")
            problems = left.accounting_problems()
            assert not problems, (round_number, n, problems)
            # A row's data is live, pending (committed, not yet moved into place) or
            # retired (moved aside, its delete not yet committed).
            entries = {e.rsplit("/", 1)[-1] for e in backing_entries(root / "state" / "volumes")}
            assert set(left.volumes) <= entries, (
                f"round {round_number}, instance {n}: volume rows without backing entries:"
                f" {sorted(set(left.volumes) - entries)}"
            )
            killed_with_volumes[n] += bool(left.volumes)

    # Restart: recovery runs at load; then every view must agree exactly, per instance.
    process = start(configs)
    try:
        views = []
        for root in roots:
            channel = wait_ready(root / "csi.sock")
            controller = pb_grpc.ControllerStub(channel)
            listed = controller.ListVolumes(pb.ListVolumesRequest())
            capacity = controller.GetCapacity(pb.GetCapacityRequest(parameters={"kind": "striped"}))
            views.append((listed, capacity))
            channel.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)

    assert killed_with_volumes == dict.fromkeys(range(instances), 3), (
        "a storm created nothing: the test proved nothing"
    )
    all_ids: set[str] = set()
    for root, (listed, capacity) in zip(roots, views, strict=True):
        final = read_store(root / "state" / "state.db")
        ids_in_db = set(final.volumes)
        allocated = final.allocated("p")
        files = backing_entries(root / "state" / "volumes")  # nothing pending, retired, parked
        assert files == ids_in_db
        assert {e.volume.volume_id for e in listed.entries} == ids_in_db
        assert final.pools["p"].used == allocated
        assert capacity.available_capacity == POOL_SIZE - allocated
        assert not all_ids & ids_in_db, "an instance lists another instance's volumes"
        all_ids |= ids_in_db
