"""Unix socket paths the driver listens on: claimed only when nobody serves there."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path

PROBE_TIMEOUT_SECONDS = 1.0


class SocketInUse(Exception):
    """A process accepts connections on the socket path (or may: the probe timed out)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path


def claim_socket_path(path: Path) -> None:
    """Make `path` free for a new listening socket, or raise SocketInUse.

    A socket nobody accepts on (connection refused: its server is gone) is removed; a
    live one is refused rather than replaced, which would cut its server off. Files of
    any other kind are left alone, so binding over them fails.
    """
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
    except FileNotFoundError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(PROBE_TIMEOUT_SECONDS)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        pass  # stale: removed below
    except FileNotFoundError:
        return  # gone meanwhile
    except TimeoutError:
        raise SocketInUse(
            path, "is a socket that did not answer in time (a busy server?)"
        ) from None
    except OSError as error:
        raise SocketInUse(path, f"is a socket that cannot be probed: {error.strerror}") from None
    else:
        raise SocketInUse(path, "is a live socket: another process accepts connections on it")
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
