"""Cluster names per pytest session (csi_harness/_internal/pytest_plugin/session.py):
a session that brings up a cluster and names none leases one that no other running
session holds; its xdist workers share it; a name the user gives is used as given.
Seen in real pytest sessions whose tests only read the name (no cluster is made)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from csi_harness._internal.core.name_lease import lease_name
from csi_harness._internal.core.run_state import STATE_FILE
from csi_harness._internal.providers.factory import DEFAULT_NAME
from csi_harness._internal.providers.local.config import DEFAULT_RUN_ROOT

NAME_TEST = """
import os, time
from pathlib import Path
from csi_harness._internal.pytest_plugin.providers import cluster_options

def test_name(pytestconfig):
    out = Path(os.environ["NAMES_DIR"])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (out / f"{os.getpid()}-{worker}").write_text(str(cluster_options(pytestconfig).name))
    # Hold the session (and its name) until the test says so.
    release = out / "release"
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)

def test_other(pytestconfig):
    test_name(pytestconfig)
"""


def start(project: Path, names: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env={**os.environ, "NAMES_DIR": str(names)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def names_written(names: Path, count: int) -> list[str]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        files = [p for p in names.iterdir() if p.name != "release"]
        written = [p.read_text() for p in files]
        # A file is made before its name is written into it: wait for the name too.
        if len(files) >= count and all(written):
            return sorted(written)
        time.sleep(0.1)
    raise AssertionError(f"only {sorted(p.name for p in names.iterdir())} written")


def finish(names: Path, *sessions: subprocess.Popen[str]) -> None:
    (names / "release").touch()
    for session in sessions:
        output, _ = session.communicate(timeout=120)
        assert session.returncode == 0, output[-2000:]


def project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "test_names.py").write_text(NAME_TEST)
    (tmp_path / "names").mkdir()
    return tmp_path / "project", tmp_path / "names"


def test_two_sessions_at_once_bring_up_clusters_of_different_names(tmp_path: Path) -> None:
    directory, names = project(tmp_path)
    sessions = [start(directory, names, "-k", "test_name")]
    try:
        (held,) = names_written(names, 1)
        sessions.append(start(directory, names, "-k", "test_name"))
        assert names_written(names, 2) != [held, held]
    finally:
        finish(names, *sessions)
    assert held.startswith(DEFAULT_NAME)


def test_the_xdist_workers_of_a_session_share_its_name(tmp_path: Path) -> None:
    directory, names = project(tmp_path)
    session = start(directory, names, "-n", "2")
    try:
        one, other = names_written(names, 2)
    finally:
        finish(names, session)
    assert one == other and one.startswith(DEFAULT_NAME)


def test_a_name_the_user_gives_is_the_name(tmp_path: Path) -> None:
    directory, names = project(tmp_path)
    session = start(directory, names, "-k", "test_name", "--csi-cluster-name", "mine")
    try:
        assert names_written(names, 1) == ["mine"]
    finally:
        finish(names, session)


def test_an_existing_cluster_is_found_by_the_default_name(tmp_path: Path) -> None:
    """Nothing is brought up, so no name is leased: the session uses the local cluster
    of the default name even while that name is held."""
    running = DEFAULT_RUN_ROOT / DEFAULT_NAME / STATE_FILE
    if running.exists():
        # `make test` runs the unit tests beside the e2e suites on that very cluster: the
        # session below would attach to it and run its tests there.
        pytest.skip(f"a local cluster named {DEFAULT_NAME} runs on this machine ({running})")
    directory, names = project(tmp_path)
    held = lease_name(DEFAULT_NAME, "existing")
    # A missing cluster is a usage error before any test: only the option is read here.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--csi-cluster=existing"],
        cwd=directory,
        env={**os.environ, "NAMES_DIR": str(names)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    held.release()
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"/{DEFAULT_NAME}: no local cluster here" in run.stderr
