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
