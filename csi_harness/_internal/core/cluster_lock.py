"""Tests that run at the same time on one cluster, and tests that must run alone.

Most tests deploy a driver of their own (its own name, StorageClasses, namespace and
topology keys) and can share the cluster with others. A few change what every test
sees, e.g. they restart kube-scheduler with another configuration: they run while
no other test runs. ``ClusterLock`` is that rule across processes (pytest-xdist
workers): shared for the first kind, exclusive for the second.

``flock`` alone would let a stream of shared holders starve an exclusive one, so a
second lock file is a turnstile: an exclusive holder takes it first and keeps it
until it holds the main lock; a shared one passes through it before taking its share.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from csi_harness._internal.core.file_lock import locked


class ClusterLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.turnstile = path.with_name(path.name + ".turnstile")

    @classmethod
    def for_cluster(cls, key: str) -> ClusterLock:
        """The lock of the cluster ``key`` names (its name, or its kubeconfig), in the
        temporary directory every worker of a session shares."""
        return cls(lock_path(key))

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with locked(self.turnstile, fcntl.LOCK_EX):
            pass
        with locked(self.path, fcntl.LOCK_SH):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with locked(self.turnstile, fcntl.LOCK_EX), locked(self.path, fcntl.LOCK_EX):
            yield


def lock_path(key: str) -> Path:
    """The lock file of ``key``, in the temporary directory every process of this host
    (every worker of a session, every session) shares."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[-80:]
    directory = Path(tempfile.gettempdir()) / "csi-harness-locks"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{safe}.lock"
