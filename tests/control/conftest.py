"""Drivers with their admin API, in process: gRPC and HTTP on one event loop.

The driver fixtures of tests/driver are reused as they are; `start_admin` adds an
AdminServer (unix socket, and TCP when the config asks) and a client for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from csi_mock.admin import AsyncAdminClient
from csi_mock.admin.server import AdminServer
from csi_mock.driver import Driver
from tests.driver.conftest import RunningDriver, StartDriver, csi, start_driver

__all__ = ["AdminDriver", "StartAdmin", "csi", "start_driver"]  # fixtures re-used as is


@dataclass
class AdminDriver:
    """A served driver, its admin server and a client on the admin unix socket."""

    csi: RunningDriver
    server: AdminServer
    admin: AsyncAdminClient

    @property
    def driver(self) -> Driver:
        return self.csi.driver


StartAdmin = Callable[..., Awaitable[AdminDriver]]


@pytest.fixture
async def start_admin(start_driver: StartDriver) -> AsyncIterator[StartAdmin]:
    """Start a driver (`**config_overrides` and `backend_store` as for start_driver) with
    its admin API."""
    running: list[AdminDriver] = []

    async def start(**overrides: Any) -> AdminDriver:
        handle = await start_driver(**overrides)
        server = AdminServer(handle.driver, grace=1)
        await server.start()
        admin = AdminDriver(handle, server, AsyncAdminClient(server.socket_path, timeout=10))
        running.append(admin)
        return admin

    yield start
    # Before start_driver's own teardown: the admin API stops before the gRPC server.
    for admin in running:
        await admin.admin.aclose()
        await admin.server.stop()


@pytest.fixture
async def with_admin(start_admin: StartAdmin) -> AdminDriver:
    """The default driver of tests/driver (two node pools, two kinds) with its admin API."""
    return await start_admin()
