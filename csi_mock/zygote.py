"""A pre-imported csi-mock that forks ready instances: ``python -m csi_mock.zygote SOCKET``.

Starting ``csi-mock serve`` costs about a CPU-second, almost all of it importing grpc,
protobuf, pydantic and aiohttp; a harness that starts five instances per test pays
that on every test. The zygote imports everything once, then listens on a unix
socket (mode 0600). Each connection sends one JSON line, ``{"argv": [...], "log":
PATH}``, the arguments of ``csi-mock`` (e.g. ``["serve", "--config=..."]``); the zygote
forks, and the child becomes that instance: a session of its own, stdin from
/dev/null, stdout and stderr appended to ``log``, default signal handling, then
``csi_mock.cli.main(argv)``. The reply is one JSON line, ``{"pid": N}``, or
``{"error": "..."}`` for a request it refuses.

Forking is safe here because the zygote has one thread and has created no gRPC
channel, server or event loop: grpc is imported, not started. Children are reaped by
the kernel (SIGCHLD ignored in the zygote), so the caller watches them by PID and
start time, as it watches any process it did not start itself. An instance runs the
code the zygote imported: restart the zygote after changing csi-mock.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import csi_mock.cli
import csi_mock.server

MAX_REQUEST = 1024 * 1024
"""A request line: room for the argv of a process serving a thousand instances."""


class RequestError(ValueError):
    """A request the zygote refuses; the message says why."""


def parse_request(line: bytes) -> tuple[list[str], Path]:
    """The argv and log path of one request line, or RequestError."""
    try:
        request: Any = json.loads(line)
    except ValueError as exc:
        raise RequestError(f"not JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise RequestError("the request must be a JSON object with argv and log")
    argv, log = request.get("argv"), request.get("log")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise RequestError("argv must be a non-empty list of strings")
    if not isinstance(log, str) or not os.path.isabs(log):
        raise RequestError("log must be an absolute path")
    return argv, Path(log)


def _become_instance(argv: Sequence[str], log: Path) -> None:
    """In the child: detach, redirect, run csi-mock, never return."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        try:
            code = csi_mock.cli.main(list(argv))
        except SystemExit as exited:
            code = exited.code if isinstance(exited.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _answer(conn: socket.socket, reply: dict[str, object]) -> None:
    conn.sendall(json.dumps(reply).encode() + b"\n")


def _serve_one(listener: socket.socket, conn: socket.socket) -> None:
    with conn:
        data = b""
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        try:
            argv, log = parse_request(data)
        except RequestError as exc:
            _answer(conn, {"error": str(exc)})
            return
        pid = os.fork()
        if pid == 0:
            conn.close()
            listener.close()
            _become_instance(argv, log)
        _answer(conn, {"pid": pid})


def serve(path: Path) -> None:
    """Listen on ``path`` until SIGTERM or SIGINT."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(16)
    print(f"csi-mock zygote: pid {os.getpid()}, listening on {path}", flush=True)
    try:
        while True:
            conn, _ = listener.accept()
            _serve_one(listener, conn)
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m csi_mock.zygote SOCKET", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        serve(Path(args[0]))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
