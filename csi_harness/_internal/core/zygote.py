"""Starting csi-mock instances through a zygote (``csi_mock.zygote``): one process that
imported csi-mock once forks each instance, instead of a new interpreter importing
it all again (about a CPU-second per instance)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ZYGOTE_MODULE = "csi_mock.zygote"


class ZygoteError(RuntimeError):
    """The zygote did not start the instance; the message says why."""


def zygote_argv(socket_path: Path) -> list[str]:
    """The command line of a zygote listening on ``socket_path``."""
    return [sys.executable, "-m", ZYGOTE_MODULE, str(socket_path)]


@dataclass(frozen=True)
class Zygote:
    """A client of the zygote listening on ``socket_path``."""

    socket_path: Path
    timeout: float = 10.0

    def spawn(self, argv: Sequence[str], log: Path) -> int:
        """Fork an instance running ``csi-mock *argv`` with its output appended to
        ``log``; returns its PID."""
        request = json.dumps({"argv": list(argv), "log": str(log.resolve())}).encode() + b"\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(self.timeout)
                conn.connect(str(self.socket_path))
                conn.sendall(request)
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except OSError as exc:
            raise ZygoteError(f"zygote {self.socket_path}: {exc}") from exc
        try:
            answer = json.loads(reply)
        except ValueError as exc:
            raise ZygoteError(f"zygote {self.socket_path}: answered {reply!r}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("pid"), int):
            raise ZygoteError(f"zygote {self.socket_path}: {answer.get('error', answer)}")
        return int(answer["pid"])
