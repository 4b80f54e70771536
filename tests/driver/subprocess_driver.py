"""A csi-mock driver run as `csi-mock serve` in a child process, and its database read
from outside.

Used by the tests that kill the driver with SIGKILL: the crash test and the stateful
property test. `read_store` opens the SQLite file read-only, so a test can look at what
a killed driver left behind *before* a restart's `load()` repairs anything.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml

from csi_mock.admin.client import AdminClient
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.testing import accepts_connections

_REPO = Path(__file__).resolve().parents[2]


class DriverProcess:
    """`csi-mock serve --config <state_dir>/../driver.yaml`, restartable after kill -9.

    The child imports csi_mock from this checkout (PYTHONPATH), so a test run in a
    copy of the tree exercises that copy's driver.
    """

    def __init__(
        self,
        root: Path,
        config: Mapping[str, Any],
        log: Path | None = None,
        *,
        siblings: int = 0,
    ) -> None:
        """``siblings``: other instances the same process serves (``serve --config
        ... --config ...``), each with this configuration but a node ID, socket and
        state directory of its own, under ``root/sibling-N``."""
        self.root = root
        self.socket = root / "csi.sock"
        self.state_dir = root / "state"
        self.database = self.state_dir / "state.db"
        self.volumes_dir = self.state_dir / "volumes"
        self.config_path = root / "driver.yaml"
        full = {
            "endpoint": f"unix://{self.socket}",
            "state_dir": str(self.state_dir),
            **config,
        }
        self.config_path.write_text(yaml.safe_dump(full))
        self.sibling_roots = [root / f"sibling-{n}" for n in range(siblings)]
        self.sibling_configs: list[Path] = []
        for n, sibling in enumerate(self.sibling_roots):
            sibling.mkdir(parents=True, exist_ok=True)
            node = {**full.get("node", {}), "id": f"sibling-{n}"}
            settings = {
                **full,
                "endpoint": f"unix://{sibling / 'csi.sock'}",
                "state_dir": str(sibling / "state"),
                "node": node,
            }
            path = sibling / "driver.yaml"
            path.write_text(yaml.safe_dump(settings))
            self.sibling_configs.append(path)
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.channel: grpc.Channel | None = None
        self.admin: AdminClient | None = None

    # -- life cycle ------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        """Start the driver and wait until Probe says ready and the admin API answers."""
        assert self.process is None, "already running"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
        output = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "csi_mock.cli",
                    "serve",
                    *(f"--config={c}" for c in [self.config_path, *self.sibling_configs]),
                ],
                stdout=output,
                stderr=output,
                env=env,
            )
        finally:
            if self.log:
                output.close()  # type: ignore[union-attr]
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        admin_socket = self.state_dir / "admin.sock"
        last = "admin socket not accepting"
        # The admin API listens once the CSI server runs and the state is loaded. A
        # socket file left by a killed driver refuses connections, so connect rather
        # than look for the file; connecting gRPC only then spares its reconnect backoff.
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"driver exited with {self.process.returncode} at start-up")
            if accepts_connections(admin_socket):
                break
            time.sleep(0.01)
        while time.monotonic() < deadline:
            channel = grpc.insecure_channel(f"unix://{self.socket}")
            try:
                if pb_grpc.IdentityStub(channel).Probe(pb.ProbeRequest(), timeout=1).ready.value:
                    self.channel = channel
                    self.admin = AdminClient(admin_socket, timeout=10)
                    return
                last = "not ready"
            except grpc.RpcError as error:
                last = error.code().name
            channel.close()
            time.sleep(0.02)
        raise AssertionError(f"driver at {self.socket} not ready after {timeout}s (last: {last})")

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed but what was committed."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._forget()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM and wait (SIGKILL if it does not exit in time)."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._forget()

    def _forget(self) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.admin is not None:
            self.admin.close()
        self.process = self.channel = self.admin = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    # -- stubs -----------------------------------------------------------------------

    @property
    def controller(self) -> pb_grpc.ControllerStub:
        assert self.channel is not None, "driver not running"
        return pb_grpc.ControllerStub(self.channel)

    @property
    def node(self) -> pb_grpc.NodeStub:
        assert self.channel is not None, "driver not running"
        return pb_grpc.NodeStub(self.channel)

    @property
    def admin_client(self) -> AdminClient:
        assert self.admin is not None, "driver not running"
        return self.admin


# -- the database, read from outside ------------------------------------------------------


@dataclass(frozen=True)
class VolumeRow:
    id: str
    name: str
    pool: str
    kind: str
    size: int
    allocation: int
    offset: int
    access_type: str


@dataclass(frozen=True)
class SnapshotRow:
    id: str
    name: str
    source_volume_id: str
    pool: str
    charge: int
    offset: int


@dataclass(frozen=True)
class PoolRow:
    name: str
    total: int | None
    used: int
    external: int


@dataclass(frozen=True)
class StoreSnapshot:
    """Every row of csi_mock/store/sqlite/schema.py's tables that the tests look at."""

    volumes: dict[str, VolumeRow]
    pools: dict[str, PoolRow]
    attachments: frozenset[tuple[str, str]]
    stagings: dict[str, str]
    """volume ID -> staging path"""
    publications: frozenset[tuple[str, str]]
    """(volume ID, target path)"""
    snapshots: dict[str, SnapshotRow] = field(default_factory=dict)

    def allocated(self, pool: str) -> int:
        """The volumes' allocations and the snapshots' charges in `pool`."""
        volumes = sum(v.allocation for v in self.volumes.values() if v.pool == pool)
        return volumes + sum(s.charge for s in self.snapshots.values() if s.pool == pool)

    def accounting_problems(self) -> list[str]:
        """Pools whose `used` column is not the sum of their volumes' allocations (and
        their snapshots' charges).

        `load()` recomputes `used` from the volume rows at start-up, so this holds in
        a database a killed driver left behind only if every commit kept both in step.
        """
        problems = []
        pools = {v.pool for v in self.volumes.values()} | {s.pool for s in self.snapshots.values()}
        for pool in sorted(set(self.pools) | pools):
            row = self.pools.get(pool)
            used = row.used if row is not None else 0
            if used != self.allocated(pool):
                problems.append(
                    f"pool {pool}: used column {used} != sum of volume allocations and"
                    " snapshot charges"
                    f" {self.allocated(pool)}"
                )
        return problems


def read_store(database: Path) -> StoreSnapshot:
    """Read the database read-only (WAL included); call it only when the driver is dead
    or between its transactions."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        volumes = {
            row[0]: VolumeRow(*row)
            for row in connection.execute(
                "SELECT id, name, pool, kind, size, allocation, extent_offset, access_type"
                " FROM volumes"
            )
        }
        pools = {row[0]: PoolRow(*row) for row in connection.execute("SELECT * FROM pools")}
        attachments = frozenset(
            (row[0], row[1])
            for row in connection.execute("SELECT volume_id, node_id FROM attachments")
        )
        stagings = dict(
            connection.execute("SELECT volume_id, staging_path FROM stagings").fetchall()
        )
        publications = frozenset(
            (row[0], row[1])
            for row in connection.execute("SELECT volume_id, target_path FROM publications")
        )
        snapshots = {
            row[0]: SnapshotRow(*row)
            for row in connection.execute(
                "SELECT id, name, source_volume_id, pool, charge, extent_offset FROM snapshots"
            )
        }
    finally:
        connection.close()
    return StoreSnapshot(volumes, pools, attachments, stagings, publications, snapshots)
