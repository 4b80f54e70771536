"""csi_mock/host/sockets.py: a stale socket is replaced, a live one refused."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from csi_mock.host.sockets import SocketInUse, claim_socket_path


def test_a_stale_socket_is_removed(short_tmp_path: Path) -> None:
    path = short_tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))  # bound, never listening: connections are refused

    claim_socket_path(path)

    assert not path.exists()


def test_a_live_socket_is_refused_and_kept(short_tmp_path: Path) -> None:
    path = short_tmp_path / "live.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()

        with pytest.raises(SocketInUse, match="live socket"):
            claim_socket_path(path)

        assert path.is_socket()


def test_a_file_of_another_kind_is_left_alone(short_tmp_path: Path) -> None:
    path = short_tmp_path / "plain"
    path.write_text("not a socket")

    claim_socket_path(path)

    assert path.read_text() == "not a socket"
