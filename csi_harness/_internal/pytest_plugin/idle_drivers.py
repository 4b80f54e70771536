"""Where a driver pool keeps its reset, idle drivers: in its own process
(``IdleDrivers``), or in a directory that every pytest-xdist worker of the session
shares (``SharedIdleDrivers``), so that a worker takes the driver another worker reset
instead of deploying one more of the same.

With per-process pools, each of six workers deployed its own driver of a family the
moment it met the family's first test, and dropped it two families later
(session 34: 23 to 25 of the 64 mission tests on kind deployed a driver, and most of
the CPU of a run follows the drivers deployed). A shared directory lets the drivers
follow the tests instead of the workers.

The directory holds one JSON file per idle driver (what the pool knows of it and the
cluster's ``DriverHandover`` state), named so that names sort by when it went idle; a
lock file serialises every change. Each process that uses it leaves a file named after
its PID (``.user-PID``), and it keeps ``max_idle`` drivers for each of them still
running (one that died without closing does not count): a worker that ends leaves its share to the
others and takes away only what no longer fits, so the removals at the end of a
session are spread over the workers as they end, as they were with a pool each.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from csi_harness._internal.core.file_lock import locked
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import Driver, DriverHandover
from csi_harness._internal.pytest_plugin.driver_view import ClusterView

T = TypeVar("T")


@dataclass
class PooledDriver:
    """A poolable driver: its pool key, the spec it was deployed from, how the cluster
    showed it then, its CSIDriver's labels then (``put_back_csidriver``) and the
    fields it keeps from its last test (``pool_in_place.kept_while_idle``)."""

    driver: Driver
    key: str
    baseline: ClusterView
    deployed: DriverDeployment
    csidriver_labels: Mapping[str, str] = field(default_factory=dict)
    left_with: Mapping[str, Any] = field(default_factory=dict)


def _choose(candidates: Sequence[T], left_with: Callable[[T], object], prefer: object) -> T | None:
    """Of ``candidates`` (least recently returned first), the most recently returned one
    left with ``prefer``, else the most recently returned one."""
    if not candidates:
        return None
    return next((c for c in reversed(candidates) if left_with(c) == prefer), candidates[-1])


class IdleDrivers:
    """This process's idle drivers, at most ``max_idle``; the least recently returned
    goes beyond that."""

    def __init__(self, max_idle: int) -> None:
        self._max_idle = max_idle
        self._order: list[PooledDriver] = []
        """Least recently returned first."""

    def take(self, key: str, prefer: Mapping[str, Any] | None = None) -> PooledDriver | None:
        """The most recently returned idle driver of ``key`` (of those left with the
        in-place fields ``prefer``, if any), no longer idle."""
        chosen = _choose(
            [pooled for pooled in self._order if pooled.key == key],
            lambda pooled: pooled.left_with,
            prefer,
        )
        if chosen is not None:
            self._order.remove(chosen)
        return chosen

    def put(self, pooled: PooledDriver) -> list[PooledDriver]:
        """Keep ``pooled`` idle; the drivers that no longer fit, for the caller to remove."""
        self._order.append(pooled)
        evicted = self._order[: max(0, len(self._order) - self._max_idle)]
        del self._order[: len(evicted)]
        return evicted

    def close(self) -> list[PooledDriver]:
        """Every idle driver, for the caller to remove at the end of the session."""
        left, self._order = self._order, []
        return left


LOCK = ".lock"
USER = ".user-"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SharedIdleDrivers:
    """The idle drivers of every process that opens ``directory``, at most ``max_idle``
    for each process still using it; the drivers are handed between processes through
    ``cluster`` (``DriverHandover``)."""

    def __init__(
        self,
        directory: Path,
        max_idle: int,
        cluster: DriverHandover,
        *,
        user: int | None = None,
        running: Callable[[int], bool] = _running,
    ) -> None:
        self._directory = directory
        self._max_idle = max_idle
        self._cluster = cluster
        self._user = os.getpid() if user is None else user
        self._running = running
        directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            (directory / f"{USER}{self._user}").touch()

    def take(self, key: str, prefer: Mapping[str, Any] | None = None) -> PooledDriver | None:
        with self._locked():
            states = [(entry, json.loads(entry.read_text())) for entry in self._entries()]
            chosen = _choose(
                [(entry, state) for entry, state in states if state["key"] == key],
                lambda candidate: candidate[1].get("left_with", {}),
                prefer,
            )
            if chosen is None:
                return None
            entry, state = chosen
            adopted = self._adopt(state)
            entry.unlink()
            return adopted

    def put(self, pooled: PooledDriver) -> list[PooledDriver]:
        state = {
            "key": pooled.key,
            "driver": self._cluster.handover(pooled.driver),
            "baseline": pooled.baseline.to_json(),
            "deployed": pooled.deployed.model_dump(mode="json"),
            "csidriver_labels": dict(pooled.csidriver_labels),
            "left_with": dict(pooled.left_with),
        }
        name = f"{time.time_ns():020d}-{os.getpid()}-{pooled.deployed.name}.json"
        with self._locked():
            temporary = self._directory / f".{name}"
            temporary.write_text(json.dumps(state))
            temporary.rename(self._directory / name)
            evicted = self._beyond(self._users())
        return [self._adopt(state) for state in evicted]

    def close(self) -> list[PooledDriver]:
        """This process stops using the directory: the idle drivers that no longer fit
        (all of them for the last process), for it to remove."""
        with self._locked():
            (self._directory / f"{USER}{self._user}").unlink(missing_ok=True)
            evicted = self._beyond(self._users())
        return [self._adopt(state) for state in evicted]

    def _beyond(self, users: int) -> list[dict[str, Any]]:
        """Take out the least recently returned drivers beyond ``max_idle`` per user."""
        entries = self._entries()
        return [
            self._pop(entry) for entry in entries[: max(0, len(entries) - self._max_idle * users)]
        ]

    def _entries(self) -> list[Path]:
        """The idle drivers' files, least recently returned first."""
        return sorted(self._directory.glob("[0-9]*.json"))

    @staticmethod
    def _pop(entry: Path) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(entry.read_text())
        entry.unlink()
        return state

    def _adopt(self, state: Mapping[str, Any]) -> PooledDriver:
        return PooledDriver(
            self._cluster.adopt_driver(state["driver"]),
            str(state["key"]),
            ClusterView.from_json(state["baseline"]),
            DriverDeployment.model_validate(state["deployed"]),
            dict(state["csidriver_labels"]),
            dict(state.get("left_with", {})),
        )

    def _users(self) -> int:
        """The processes using the directory that are still running."""
        count = 0
        for user in self._directory.glob(f"{USER}*"):
            if self._running(int(user.name.removeprefix(USER))):
                count += 1
            else:
                user.unlink(missing_ok=True)
        return count

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self._directory / LOCK)


IdleStore = IdleDrivers | SharedIdleDrivers
"""What a ``DriverPool`` keeps its idle drivers in."""
