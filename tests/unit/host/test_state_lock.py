"""csi_mock/host/state_lock.py: one holder per lock file, named by its PID."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from csi_mock.host.state_lock import StateLock, StateLockHeld


def test_the_holder_writes_its_pid_into_the_lock_file(tmp_path: Path) -> None:
    lock = StateLock(tmp_path / "lock")

    lock.acquire()

    assert (tmp_path / "lock").read_text() == f"{os.getpid()}\n"
    lock.release()


def test_a_second_lock_on_the_same_file_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first = StateLock(tmp_path / "lock")
    first.acquire()

    with pytest.raises(StateLockHeld) as held:
        StateLock(tmp_path / "lock").acquire()

    assert held.value.pid == os.getpid()
    assert str(held.value) == f"{tmp_path / 'lock'} is locked by PID {os.getpid()}"
    first.release()


def test_a_released_lock_can_be_taken_again(tmp_path: Path) -> None:
    first = StateLock(tmp_path / "lock")
    first.acquire()
    first.release()

    second = StateLock(tmp_path / "lock")
    second.acquire()

    assert second.held
    second.release()
