"""Copying volume data: trees with their odd entries, and sparse files."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from csi_mock.host.copying import copy_data, copy_sparse_file, copy_tree
from csi_mock.model.volume import AccessType

MI = 2**20


def test_a_tree_is_copied_with_its_files_directories_modes_and_times(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "a" / "b").mkdir(parents=True)
    (source / "a" / "b" / "data.txt").write_text("hello")
    (source / "top").write_bytes(b"\x00\x01")
    os.chmod(source / "top", 0o640)
    os.utime(source / "a", (1_000_000, 1_000_000))

    copy_tree(source, tmp_path / "copy")

    assert (tmp_path / "copy" / "a" / "b" / "data.txt").read_text() == "hello"
    assert (tmp_path / "copy" / "top").read_bytes() == b"\x00\x01"
    assert (tmp_path / "copy" / "top").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "copy" / "a").stat().st_mtime == 1_000_000


def test_a_symbolic_link_is_copied_as_a_link_and_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside-secret"
    secret.write_text("not volume data")
    source = tmp_path / "source"
    source.mkdir()
    (source / "link").symlink_to(secret)
    (source / "dir-link").symlink_to(tmp_path)

    copy_tree(source, tmp_path / "copy")

    assert os.readlink(tmp_path / "copy" / "link") == str(secret)
    assert (tmp_path / "copy" / "dir-link").is_symlink()
    assert sorted(os.listdir(tmp_path / "copy")) == ["dir-link", "link"]


def test_a_fifo_is_recreated_without_waiting_for_a_writer_and_a_socket_is_left_out(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    os.mkfifo(source / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(source / "sock"))
    try:
        copy_tree(source, tmp_path / "copy")
    finally:
        listener.close()

    assert os.listdir(tmp_path / "copy") == ["pipe"]
    assert (tmp_path / "copy" / "pipe").is_fifo()


def test_a_sparse_file_stays_sparse_with_its_data_where_it_was(tmp_path: Path) -> None:
    source = tmp_path / "disk"
    with open(source, "wb") as handle:
        handle.truncate(512 * MI)
        handle.seek(300 * MI)
        handle.write(b"middle")
        handle.seek(512 * MI - 3)
        handle.write(b"end")

    copy_sparse_file(source, tmp_path / "copy")

    copied = tmp_path / "copy"
    assert copied.stat().st_size == 512 * MI
    assert copied.stat().st_blocks * 512 < 4 * MI
    with open(copied, "rb") as handle:
        handle.seek(300 * MI)
        assert handle.read(6) == b"middle"
        handle.seek(512 * MI - 3)
        assert handle.read() == b"end"


def test_a_block_volumes_copy_is_extended_to_the_new_size(tmp_path: Path) -> None:
    source = tmp_path / "disk"
    source.write_bytes(b"x" * 4096)

    copy_data(source, tmp_path / "copy", AccessType.BLOCK, size=MI)

    assert (tmp_path / "copy").stat().st_size == MI
    assert (tmp_path / "copy").read_bytes()[:4096] == b"x" * 4096


def test_copying_onto_an_existing_entry_fails(tmp_path: Path) -> None:
    (tmp_path / "source").mkdir()
    (tmp_path / "copy").mkdir()
    with pytest.raises(FileExistsError):
        copy_data(tmp_path / "source", tmp_path / "copy", AccessType.MOUNT)
