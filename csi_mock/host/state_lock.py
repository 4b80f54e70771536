"""One driver per state directory: an exclusive lock held for the process's life."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE_MODE = 0o600


class StateLockHeld(Exception):
    """Another process holds the lock; `pid` is the one written in the lock file."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"PID {pid}" if pid is not None else "a process whose PID is not recorded"
        super().__init__(f"{path} is locked by {holder}")
        self.path = path
        self.pid = pid


class StateLock:
    """An exclusive flock(2) on a lock file that records the holder's PID.

    flock rather than a PID file alone: the kernel drops the lock when the holder dies,
    even by kill -9, so a stale file never blocks a restart. The lock belongs to the
    open file description, so a second StateLock in the same process is refused too.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock and write this process's PID, or raise StateLockHeld.

        An OSError (the directory is not writable, say) propagates unchanged.
        """
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, LOCK_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise StateLockHeld(self.path, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays: removing it would race with a new holder)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
