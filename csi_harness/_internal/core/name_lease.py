"""A cluster name no other running session on this host holds.

Two pytest sessions that bring up a cluster each must not share one: the second
would tear down the first one's cluster to bring up its own. A session that is not
given a name leases one: the first of ``base``, ``base-2``, ``base-3``, ... whose
lock no live process holds (an ``flock``, let go when the lease is released or the
process ends in any way). So one session at a time keeps the name it always had,
and a session killed before its tear-down lets go of the name: the next session
takes it back, and its bring-up removes what the killed one left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from csi_harness._internal.core.cluster_lock import lock_path

MAX_SESSIONS = 99
"""How many names are tried: sessions at the same time on one host, at most."""


class NameLease:
    """A name held for as long as this object is not released (or its process lives)."""

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class NoNameFree(RuntimeError):
    """Every name of the series is held by a running session."""


def lease_name(base: str, scope: str) -> NameLease:
    """The first of ``base``, ``base-2``, ... ``base-MAX_SESSIONS`` that no other
    process holds in ``scope`` (e.g. the provider: a kind and a local cluster of one
    name do not collide), held until ``release``."""
    for number in range(1, MAX_SESSIONS + 1):
        name = base if number == 1 else f"{base}-{number}"
        fd = os.open(lock_path(f"session-name-{scope}-{name}"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return NameLease(name, fd)
    raise NoNameFree(
        f"{MAX_SESSIONS} sessions hold the names {base} to {base}-{MAX_SESSIONS}: "
        "name the cluster yourself"
    )
