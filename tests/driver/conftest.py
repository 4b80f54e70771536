"""In-process driver fixtures: a real gRPC server on a unix socket in tmp_path."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock.config import DriverConfig, validate_config
from csi_mock.driver import Driver
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.server import DriverServer
from csi_mock.store import StateStore, Store


@dataclass
class RunningDriver:
    """A served driver plus typed stubs for its three services."""

    config: DriverConfig
    server: DriverServer
    channel: grpc.aio.Channel
    identity: pb_grpc.IdentityStub
    controller: pb_grpc.ControllerStub
    node: pb_grpc.NodeStub

    @property
    def driver(self) -> Driver:
        return self.server.driver


StartDriver = Callable[..., Awaitable[RunningDriver]]
BIND_NODE = {"id": "node-1", "mount": "bind"}
"""The default node, publishing with real bind mounts (needs root)."""


def driver_config(tmp_path: Path, **overrides: Any) -> DriverConfig:
    """A combined-mode config rooted in tmp_path; keyword arguments replace keys."""
    data: dict[str, Any] = {
        "endpoint": f"unix://{tmp_path}/csi.sock",
        "state_dir": str(tmp_path / "state"),
        "node": {"id": "node-1", "mount": "directory"},
        "kinds": {"striped": {"cost": 1}, "mirrored": {"cost": 2}},
        "pools": [
            {
                "name": "node-1",
                "size": "10Gi",
                "segment": {"topology.csi-mock.example/node": "node-1"},
                "max_volume_size": "4Gi",
            },
            {
                "name": "node-2",
                "size": "20Gi",
                "segment": {"topology.csi-mock.example/node": "node-2"},
                "max_volume_size": "8Gi",
            },
        ],
    }
    data.update(overrides)
    return validate_config(data)


@pytest.fixture
async def start_driver(tmp_path: Path) -> AsyncIterator[StartDriver]:
    """Start drivers on demand (`await start_driver(**config_overrides)`); all stop at the end.
    `backend_store` is Driver.open's: what the backend sees of the store."""
    running: list[RunningDriver] = []

    async def start(
        *, backend_store: Callable[[StateStore], Store] | None = None, **overrides: Any
    ) -> RunningDriver:
        config = driver_config(tmp_path, **overrides)
        server = DriverServer(Driver.open(config, backend_store=backend_store))
        await server.start()
        channel = grpc.aio.insecure_channel(f"unix://{config.socket_path}")
        handle = RunningDriver(
            config=config,
            server=server,
            channel=channel,
            identity=pb_grpc.IdentityStub(channel),
            controller=pb_grpc.ControllerStub(channel),
            node=pb_grpc.NodeStub(channel),
        )
        running.append(handle)
        return handle

    yield start
    for handle in running:
        await handle.channel.close()
        await handle.server.stop(grace=1)


@pytest.fixture
async def csi(start_driver: StartDriver) -> RunningDriver:
    """The default driver: combined mode, two node pools, striped and mirrored kinds."""
    return await start_driver()


# -- real mounts -------------------------------------------------------------------------


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None and os.geteuid() != 0:
        pytest.skip("needs root for real bind mounts")


@pytest.fixture(autouse=True)
def no_leftover_mounts(tmp_path: Path) -> Iterator[None]:
    """Safety net: fail a test that leaves mounts below tmp_path, after detaching them.

    Every mount a test makes must be undone by the driver's own NodeUnpublish and
    NodeUnstage; this only keeps a failing test from leaking mounts into the host.
    """
    yield
    from tests.driver.csi_helpers import mount_points

    root = os.path.realpath(tmp_path)
    leftovers = [p for p in mount_points() if p == root or p.startswith(root + os.sep)]
    for point in sorted(set(leftovers), key=len, reverse=True):
        while point in mount_points():
            subprocess.run(["umount", "-l", point], check=True)
    if leftovers:
        pytest.fail(f"the test left mounts behind (now detached): {sorted(set(leftovers))}")


@pytest.fixture(autouse=True)
def no_leftover_loop_devices(tmp_path: Path) -> Iterator[None]:
    """Safety net as above, for loop devices over files below tmp_path."""
    yield
    from csi_mock.host.loop import KernelLoopDevices

    if not KernelLoopDevices.available():
        return
    loops = KernelLoopDevices()
    root = os.path.realpath(tmp_path) + os.sep
    leftovers = sorted({str(f) for f in loops.attached().values() if str(f).startswith(root)})
    for backing in leftovers:
        loops.detach(Path(backing))
    if leftovers:
        pytest.fail(f"the test left loop devices behind (now detached) over {leftovers}")


@pytest.fixture
async def bind_csi(start_driver: StartDriver) -> RunningDriver:
    """The default driver, but publishing with real bind mounts (needs root)."""
    return await start_driver(node=BIND_NODE)
