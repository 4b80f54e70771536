"""Operations that span an `await`: what they hold, so that others wait their turn.

Most handlers change state in one synchronous step (docs/design.md). Copying data for
a snapshot, a restore or a clone cannot: it runs in a worker thread while the event
loop serves other calls. Such an operation holds the names and objects it works on
from before its first `await` until it has committed or cleaned up, and a call that
would disturb them is refused with ABORTED, the code CSI gives for "an operation is
pending" (the caller retries with back-off).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

from csi_mock.model.errors import Aborted

_T = TypeVar("_T")


def volume_key(volume_id: str) -> str:
    return f"volume {volume_id}"


def volume_name_key(name: str) -> str:
    return f"volume name {name!r}"


def snapshot_key(snapshot_id: str) -> str:
    return f"snapshot {snapshot_id}"


def snapshot_name_key(name: str) -> str:
    return f"snapshot name {name!r}"


class InFlight:
    """The keys held by running operations (volume IDs, snapshot IDs, names)."""

    def __init__(self) -> None:
        self._exclusive: dict[str, str] = {}
        self._shared: dict[str, list[str]] = {}

    def check(self, *keys: str) -> None:
        """Aborted when an operation holds any of `keys` (shared or not)."""
        for key in keys:
            holder = self._exclusive.get(key) or next(iter(self._shared.get(key, ())), None)
            if holder is not None:
                raise Aborted(f"an operation on {key} is in progress ({holder})")

    def hold(self, what: str, exclusive: Iterable[str] = (), shared: Iterable[str] = ()) -> Claim:
        """Take the keys now (Aborted, taking none, when one is not free): `exclusive`
        ones against anyone, `shared` ones against exclusive holders only (several
        snapshots may read one volume at once). Released when the claim's `with` ends."""
        exclusive, shared = list(exclusive), list(shared)
        self.check(*exclusive)
        for key in shared:
            holder = self._exclusive.get(key)
            if holder is not None:
                raise Aborted(f"an operation on {key} is in progress ({holder})")
        for key in exclusive:
            self._exclusive[key] = what
        for key in shared:
            self._shared.setdefault(key, []).append(what)
        return Claim(self, what, exclusive, shared)

    def held(self) -> dict[str, str]:
        """Every held key and what holds it (for tests and diagnostics)."""
        found = dict(self._exclusive)
        for key, holders in self._shared.items():
            found.setdefault(key, holders[0])
        return found

    def _release(self, what: str, exclusive: list[str], shared: list[str]) -> None:
        for key in exclusive:
            self._exclusive.pop(key, None)
        for key in shared:
            holders = self._shared.get(key, [])
            if what in holders:
                holders.remove(what)
            if not holders:
                self._shared.pop(key, None)


class Claim:
    """Keys taken by InFlight.hold; `with claim:` gives them back at its end."""

    def __init__(self, owner: InFlight, what: str, exclusive: list[str], shared: list[str]):
        self._owner = owner
        self._what = what
        self._exclusive = exclusive
        self._shared = shared

    def release(self) -> None:
        self._owner._release(self._what, self._exclusive, self._shared)
        self._exclusive, self._shared = [], []

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


_running: set[asyncio.Task[Any]] = set()


async def run_to_completion(operation: Coroutine[Any, Any, _T]) -> _T:
    """Await `operation`, which goes on to its end even when the caller is cancelled
    (a client's deadline): a copy in a worker thread cannot be stopped, and only the
    operation itself knows how to commit or clean up after it. A CO that gave up
    retries with the same name and finds the result (or ABORTED while it runs)."""
    task = asyncio.ensure_future(operation)
    _running.add(task)
    task.add_done_callback(_finished)
    return await asyncio.shield(task)


def _finished(task: asyncio.Task[Any]) -> None:
    _running.discard(task)
    if not task.cancelled():
        task.exception()  # Retrieved: an abandoned operation's error is not a crash.
