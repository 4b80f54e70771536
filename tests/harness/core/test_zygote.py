"""The zygote (csi_mock/zygote.py) and its client (core/zygote.py): an instance forked
from it serves CSI in a session of its own, its output in its log; bad requests are
refused with the reason, and the socket is the owner's alone."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from csi_harness._internal.core.waiting import socket_probe, wait_for
from csi_harness._internal.core.zygote import Zygote, ZygoteError, zygote_argv
from csi_mock.proto import csi_pb2, csi_pb2_grpc
from csi_mock.testing import probe_ready
from csi_mock.zygote import RequestError, parse_request


def exited(pid: int) -> tuple[bool, int]:
    return not Path(f"/proc/{pid}").exists(), pid


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    path = tmp_path / "zygote.sock"
    process = subprocess.Popen(zygote_argv(path), stdout=subprocess.DEVNULL)
    try:
        wait_for("the zygote's socket", lambda: socket_probe(path), timeout=30, interval=0.05)
        yield Zygote(path)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_forked_instance_serves_csi_in_a_session_of_its_own(
    zygote: Zygote, tmp_path: Path
) -> None:
    endpoint = tmp_path / "csi.sock"
    log = tmp_path / "node.log"
    argv = ["serve", f"--endpoint=unix://{endpoint}", f"--statedir={tmp_path / 'state'}"]
    pid = zygote.spawn([*argv, "--nodeid=forked-1"], log)
    try:
        # The socket opens before the state has loaded; until then every call but
        # Probe answers UNAVAILABLE, so wait for Probe to say ready.
        wait_for("the instance to be ready", lambda: probe_ready(endpoint), timeout=30)
        with grpc.insecure_channel(f"unix://{endpoint}") as channel:
            info = csi_pb2_grpc.NodeStub(channel).NodeGetInfo(
                csi_pb2.NodeGetInfoRequest(), timeout=10
            )
        assert info.node_id == "forked-1"
        assert os.getsid(pid) == pid
        assert os.getsid(pid) != os.getsid(0)
        assert "NodeGetInfo" in log.read_text()
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_for("the instance to exit", lambda: exited(pid), timeout=10)


def test_each_request_forks_one_more_instance_with_its_own_arguments(
    zygote: Zygote, tmp_path: Path
) -> None:
    pids = [zygote.spawn(["--version"], tmp_path / f"v{i}.log") for i in range(3)]
    assert len(set(pids)) == 3
    for i, pid in enumerate(pids):
        wait_for(
            "the instance to exit", lambda p=pid: (not Path(f"/proc/{p}").exists(), p), timeout=10
        )
        assert (tmp_path / f"v{i}.log").read_text().startswith("csi-mock ")


def test_the_socket_is_the_owners_alone(zygote: Zygote) -> None:
    assert stat.S_IMODE(zygote.socket_path.stat().st_mode) == 0o600


def test_a_refused_request_names_the_reason(zygote: Zygote) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(zygote.socket_path))
        conn.sendall(json.dumps({"argv": ["serve"], "log": "relative.log"}).encode() + b"\n")
        reply = json.loads(conn.makefile().readline())
    assert reply == {"error": "log must be an absolute path"}


def test_the_client_reports_a_zygote_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(ZygoteError, match=r"zygote .*absent\.sock"):
        Zygote(tmp_path / "absent.sock").spawn(["serve"], tmp_path / "x.log")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"argv": [], "log": "/x"}', "argv must be a non-empty list of strings"),
        (b'{"argv": ["serve", 3], "log": "/x"}', "argv must be a non-empty list of strings"),
        (b'{"argv": ["serve"]}', "log must be an absolute path"),
    ],
)
def test_parse_request_refuses_what_is_not_an_instance(line: bytes, reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        parse_request(line)


def test_parse_request_gives_argv_and_log() -> None:
    assert parse_request(b'{"argv": ["serve", "--config=/c.yaml"], "log": "/l/x.log"}\n') == (
        ["serve", "--config=/c.yaml"],
        Path("/l/x.log"),
    )
