"""Fuzzing set-up: the hypothesis settings of every fuzz test, and one in-process driver
per test module served from a background event loop.

Budget and seed (docs/fuzzing.md):

* ``CSI_MOCK_FUZZ_PROFILE=ci`` (the default): a fixed seed (``derandomize``), each test's
  own number of examples; the folder takes about two minutes on 2 cores. This is what
  ``make test`` runs.
* ``CSI_MOCK_FUZZ_PROFILE=long``: random seeds, each test's examples times 22 (about
  30 minutes); a failure prints the blob that reproduces it (``@reproduce_failure``).
* ``CSI_MOCK_FUZZ_SCALE=2.5``: multiplies every test's number of examples once more.

The settings are applied per test (``@fuzz_settings(n)``), never loaded as the global
profile, so that other hypothesis tests of the session keep their own.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from hypothesis import HealthCheck, settings

from csi_mock.admin.server import AdminServer
from csi_mock.config import DriverConfig
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.server import Driver, DriverServer
from tests.driver.conftest import driver_config

PROFILE = os.environ.get("CSI_MOCK_FUZZ_PROFILE", "ci")
LONG_FACTOR = 22
_T = TypeVar("_T")

if PROFILE not in ("ci", "long"):
    raise pytest.UsageError(f"CSI_MOCK_FUZZ_PROFILE={PROFILE!r}: expected 'ci' or 'long'")


def _scale() -> float:
    text = os.environ.get("CSI_MOCK_FUZZ_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        raise pytest.UsageError(f"CSI_MOCK_FUZZ_SCALE={text!r} is not a number") from None
    if not scale > 0:
        raise pytest.UsageError(f"CSI_MOCK_FUZZ_SCALE={text!r} must be positive")
    return scale * (LONG_FACTOR if PROFILE == "long" else 1)


def fuzz_settings(examples: int) -> settings:
    """Settings for one fuzz test whose CI share is `examples` examples."""
    return settings(
        max_examples=max(1, round(examples * _scale())),
        derandomize=PROFILE == "ci",
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


# -- an in-process driver on a loop of its own ------------------------------------------


@dataclass
class Sandbox:
    """The directories a fuzz module may touch, below one short temporary root.

    `paths` is where generated host paths point; `outside` and `cwd` must stay empty
    (traversal through '..' or relative paths would land there).
    """

    root: Path

    @property
    def paths(self) -> Path:
        return self.root / "paths"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    def entries_outside_paths(self) -> list[str]:
        """Anything that exists in the sandbox but not where the driver may write."""
        expected = {"paths", "outside", "cwd", "state", "csi.sock"}
        found = [str(self.root / name) for name in os.listdir(self.root) if name not in expected]
        for directory in (self.outside, self.cwd):
            found += [str(directory / name) for name in os.listdir(directory)]
        return sorted(found)

    def empty_paths(self) -> None:
        """Only `file`, a file where generated paths expect a directory."""
        shutil.rmtree(self.paths, ignore_errors=True)
        self.paths.mkdir(exist_ok=True)
        (self.paths / "file").touch()


class BackgroundDriver:
    """A driver (and optionally its admin API) served by an event loop in a thread, so
    that synchronous hypothesis tests can call it through blocking stubs."""

    def __init__(self, config: DriverConfig, sandbox: Sandbox, *, admin: bool) -> None:
        self.config = config
        self.sandbox = sandbox
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server: DriverServer | None = None
        self.admin: AdminServer | None = None
        self.run(self._start(admin))
        self.channel = grpc.insecure_channel(f"unix://{config.socket_path}")
        self.identity = pb_grpc.IdentityStub(self.channel)
        self.controller = pb_grpc.ControllerStub(self.channel)
        self.node = pb_grpc.NodeStub(self.channel)

    @property
    def driver(self) -> Driver:
        assert self.server is not None
        return self.server.driver

    @property
    def admin_socket(self) -> Path:
        assert self.admin is not None
        return self.admin.socket_path

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float = 60) -> _T:
        """Run a coroutine on the driver's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def on_loop(self, function: Callable[[], _T]) -> _T:
        """Call a function on the driver's loop (the only thread that touches its state)."""

        async def call() -> _T:
            return function()

        return self.run(call())

    async def _start(self, admin: bool) -> None:
        self.server = DriverServer(Driver.open(self.config))
        await self.server.start()
        if admin:
            self.admin = AdminServer(self.server.driver, grace=1)
            await self.admin.start()

    async def _stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
        if self.server is not None:
            await self.server.stop(grace=1)

    def close(self) -> None:
        self.channel.close()
        try:
            self.run(self._stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A short root (unix socket paths are limited to 107 bytes), the working directory
    while the module runs, so that relative paths would be created where they are seen."""
    box = Sandbox(Path(tempfile.mkdtemp(prefix="fz-", dir="/tmp")))
    for directory in (box.outside, box.cwd):
        directory.mkdir()
    box.empty_paths()
    previous = os.getcwd()
    os.chdir(box.cwd)
    try:
        yield box
    finally:
        os.chdir(previous)
        shutil.rmtree(box.root, ignore_errors=True)


def start_background_driver(sandbox: Sandbox, *, admin: bool, **overrides: Any) -> BackgroundDriver:
    """A combined-mode driver of tests/driver's default shape, without real mounts."""
    config = driver_config(
        sandbox.root,
        **{"node": {"id": "node-1", "mount": "directory", "block_device": "file"}, **overrides},
    )
    return BackgroundDriver(config, sandbox, admin=admin)
