"""The pool directory's owner lock and the clean-up of directories left by
controllers that are gone (``pytest_plugin/pool_dir.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from csi_harness._internal.pytest_plugin.pool_dir import (
    OWNER_FILE,
    PREFIX,
    make_pool_dir,
    remove_abandoned,
)

HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def left_behind(root: Path, name: str) -> Path:
    """A pool directory as a killed controller leaves it: its owner file unlocked."""
    path = root / (PREFIX + name)
    path.mkdir()
    (path / OWNER_FILE).touch()
    (path / "0001-22045-d6034e6.csi-mock.json").write_text("{}")
    return path


def test_a_directory_whose_controller_is_gone_is_removed_when_the_next_session_starts(
    tmp_path: Path,
) -> None:
    abandoned = left_behind(tmp_path, "killed")
    pool = make_pool_dir(tmp_path)
    try:
        assert not abandoned.exists()
        assert pool.path.is_dir()
        assert pool.path.name.startswith(PREFIX)
    finally:
        pool.remove()
    assert not pool.path.exists()


def test_a_directory_whose_controller_runs_is_kept(tmp_path: Path) -> None:
    running = left_behind(tmp_path, "running")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(running / OWNER_FILE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        assert remove_abandoned(tmp_path) == []
        assert (running / "0001-22045-d6034e6.csi-mock.json").exists()
    finally:
        holder.communicate("")
    # Its controller gone, the lock goes with it.
    assert remove_abandoned(tmp_path) == [running]


def test_a_live_session_keeps_its_own_directory_from_another_sessions_sweep(
    tmp_path: Path,
) -> None:
    first = make_pool_dir(tmp_path)
    second = make_pool_dir(tmp_path)
    try:
        assert first.path.is_dir()
    finally:
        second.remove()
        first.remove()


def test_a_directory_without_an_owner_file_is_not_judged(tmp_path: Path) -> None:
    older = tmp_path / (PREFIX + "older-harness")
    older.mkdir()
    assert remove_abandoned(tmp_path) == []
    assert older.is_dir()
