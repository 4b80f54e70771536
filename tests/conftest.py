"""Fixtures every test directory may use."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A fresh directory with a short path, for unix sockets: a socket path may not
    exceed 107 bytes, and pytest's ``tmp_path`` grows with the run count, the test's
    name and, under pytest-xdist, the worker (``popen-gw3``)."""
    directory = Path(tempfile.mkdtemp(prefix="t-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    """A staging_target_path the CO would give (it does not exist yet)."""
    return tmp_path / "staging"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A target_path: the CO creates its parent, the plugin creates it."""
    (tmp_path / "pods").mkdir()
    return tmp_path / "pods" / "target"
