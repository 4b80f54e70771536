"""csi-mock in a unit test: a real driver process on a temporary socket, no cluster.

For testing your own CSI client code (a sidecar, an operator, a CSI library) against
a driver that speaks CSI exactly and can be told to fail::

    import grpc

    from csi_mock.proto import csi_pb2, csi_pb2_grpc
    from csi_mock.testing import running_csi_mock

    block = csi_pb2.VolumeCapability(
        block=csi_pb2.VolumeCapability.BlockVolume(),
        access_mode=csi_pb2.VolumeCapability.AccessMode(mode="SINGLE_NODE_WRITER"),
    )
    request = csi_pb2.CreateVolumeRequest(name="data", volume_capabilities=[block])

    with running_csi_mock({"pools": [{"name": "fast", "size": "10Gi"}]}) as mock:
        mock.admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=1)
        # The code under test, here one call: it talks to mock.channel(), or to
        # mock.endpoint (unix://...) if it makes its own channel.
        controller = csi_pb2_grpc.ControllerStub(mock.channel())
        try:
            controller.CreateVolume(request, timeout=10)
        except grpc.RpcError as error:
            assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert controller.CreateVolume(request, timeout=10).volume.volume_id
        calls = mock.admin.journal(method="CreateVolume")
        assert [call.code for call in calls] == ["RESOURCE_EXHAUSTED", "OK"]

(``tests/testing/test_running_csi_mock.py`` runs this example as printed.)

Under pytest the ``csi_mock`` fixture does the same (``csi_mock.pytest_fixtures``,
loaded automatically once csi-mock is installed); see docs/testing.md.

The driver runs as ``python -m csi_mock.cli serve`` in a child process, so a test can
kill it, and nothing it does (threads, signal handlers, an event loop) leaks into the
test's process. By default it needs no privileges: it publishes by creating
directories (``node.mount: directory``) and raw block volumes as files. Only the
driver package is imported here: no cluster harness, no Kubernetes client.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml

from csi_mock.admin.client import AdminClient
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

__all__ = ["DEFAULT_CONFIG", "CsiMockStartError", "RunningCsiMock", "running_csi_mock"]

DEFAULT_CONFIG: Mapping[str, Any] = {
    "mode": "all",
    "node": {"id": "node-1", "mount": "directory", "block_device": "file"},
    "pools": [{"name": "default", "size": "100Gi"}],
}
"""What a test gets without configuration: controller and node on one socket, one
100Gi pool, no privileges needed. A test's configuration is deep-merged over it."""

START_TIMEOUT = 30.0


class CsiMockStartError(RuntimeError):
    """The driver did not become ready; the message carries its own words (e.g. which
    configuration key is bad)."""


class RunningCsiMock:
    """A started driver: where to reach it, and its admin API.

    ``endpoint`` is what CSI clients are given (``unix:///.../csi.sock``); ``channel()``
    opens a gRPC channel to it; ``admin`` sets faults and knobs and reads the journal.
    """

    def __init__(self, directory: Path, config: Mapping[str, Any], log: Path) -> None:
        self.directory = directory
        self.config = config
        self.log = log
        self.socket_path = Path(str(config["endpoint"]).removeprefix("unix://"))
        self.admin_socket_path = Path(config["state_dir"]) / "admin.sock"
        self.process: subprocess.Popen[bytes] | None = None
        self._admin: AdminClient | None = None
        self._channels: list[grpc.Channel] = []

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            raise RuntimeError("the driver is not running")
        return self._admin

    def channel(self) -> grpc.Channel:
        """A new channel to the driver's CSI socket, closed when the driver stops."""
        channel = grpc.insecure_channel(self.endpoint)
        self._channels.append(channel)
        return channel

    def aio_channel(self) -> grpc.aio.Channel:
        """A new asyncio channel; the caller closes it (``await channel.close()``)."""
        return grpc.aio.insecure_channel(self.endpoint)

    def log_text(self) -> str:
        """What the driver has written to its log so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    # -- life cycle ---------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the driver and wait until its Probe says ready and its admin API answers."""
        if self.process is not None:
            raise RuntimeError("the driver is already running")
        config_path = self.directory / "driver.yaml"
        config_path.write_text(yaml.safe_dump(dict(self.config)))
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(config_path)],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if the driver does not exit in time. Idempotent."""
        for channel in self._channels:
            channel.close()
        self._channels.clear()
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL: what a crash looks like (state committed so far survives a restart)."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.stop()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "the admin socket does not accept connections"
        while time.monotonic() < deadline:
            self._check_alive()
            if accepts_connections(self.admin_socket_path):
                break
            time.sleep(0.02)
        while time.monotonic() < deadline:
            self._check_alive()
            ready, last = probe_ready(self.socket_path)
            if ready:
                self._admin = AdminClient(self.admin_socket_path)
                return
            time.sleep(0.05)
        raise CsiMockStartError(
            f"csi-mock at {self.endpoint} was not ready within {timeout:g} s ({last});"
            f" its log:\n{self.log_text()[-4000:]}"
        )

    def _check_alive(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            raise CsiMockStartError(
                f"csi-mock exited with status {code} at start-up:\n{self.log_text()[-4000:]}"
            )


@contextmanager
def running_csi_mock(
    config: Mapping[str, Any] | None = None,
    *,
    directory: Path | None = None,
    timeout: float = START_TIMEOUT,
) -> Iterator[RunningCsiMock]:
    """Run csi-mock for the duration of the block.

    ``config`` is csi-mock's configuration (the keys of its config file), deep-merged
    over ``DEFAULT_CONFIG``; ``endpoint`` and ``state_dir`` default to a fresh
    temporary directory (removed afterwards) unless ``directory`` is given (then kept,
    with the driver's log in it). A bad configuration raises CsiMockStartError with
    csi-mock's message naming the key.
    """
    owned = directory is None
    # A short path of our own: a unix socket path must fit in 107 bytes, and pytest's
    # tmp_path often does not.
    root = Path(tempfile.mkdtemp(prefix="csi-mock-")) if directory is None else directory
    root.mkdir(parents=True, exist_ok=True)
    merged = merge_config(
        DEFAULT_CONFIG,
        {"endpoint": f"unix://{root / 'csi.sock'}", "state_dir": str(root / "state")},
        config or {},
    )
    mock = RunningCsiMock(root, merged, root / "csi-mock.log")
    try:
        mock.start(timeout)
        yield mock
    finally:
        mock.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def merge_config(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge mappings, later ones winning; lists and scalars are replaced whole."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            current = merged.get(key)
            if isinstance(current, dict) and isinstance(value, Mapping):
                merged[key] = merge_config(current, value)
            else:
                merged[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)
    return merged


def probe_ready(socket_path: Path) -> tuple[bool, str]:
    """(ready, what was seen) from one Identity.Probe over a unix socket."""
    if not socket_path.exists():
        return False, "no socket yet"
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        try:
            probe = pb_grpc.IdentityStub(channel).Probe(pb.ProbeRequest(), timeout=2)
        except grpc.RpcError as error:
            return False, f"Probe answered {error.code().name}"
    return (True, "ready") if probe.ready.value else (False, "Probe says not ready")


def accepts_connections(path: Path) -> bool:
    """Whether a unix socket accepts connections (a killed process's file does not)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
