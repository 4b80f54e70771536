"""An ``flock`` on a file, held for a ``with`` block: how the processes of a session
(pytest-xdist workers) take turns at files they share."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
    """Hold ``path``'s lock (made if missing) in ``mode`` (exclusive unless told)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)
