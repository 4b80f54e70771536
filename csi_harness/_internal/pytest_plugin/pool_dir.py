"""The directory a session's xdist workers share their idle drivers through, and the
clean-up of those that sessions killed before their end left behind.

The controller makes the directory and holds an ``flock`` on its ``.controller`` file
for as long as it runs; the kernel lets go of that lock when the process goes, however
it ends. A new session removes every such directory whose lock nobody holds: its
controller is gone, and so is the cluster its drivers were in. A directory without
the file (being made, or made by an older harness) is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = "csi-harness-pool-"
OWNER_FILE = ".controller"


@dataclass
class PoolDir:
    """A pool directory and the open file whose lock says its controller runs."""

    path: Path
    _owner_fd: int

    def remove(self) -> None:
        """Remove the directory and let go of its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._owner_fd)


def make_pool_dir(root: Path | None = None) -> PoolDir:
    """A new pool directory under ``root`` (the temporary directory), locked as this
    process's, after removing those left by controllers that are gone."""
    root = Path(root or tempfile.gettempdir())
    remove_abandoned(root)
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    fd = os.open(path / OWNER_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return PoolDir(path, fd)


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the pool directories under ``root`` whose controller is gone (nobody
    holds their ``.controller`` lock); return them."""
    removed = []
    for path in sorted(root.glob(PREFIX + "*")):
        try:
            fd = os.open(path / OWNER_FILE, os.O_RDWR)
        except OSError:
            continue  # no owner file: being made, or not ours to judge
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: its controller runs
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
