"""`csi-mock serve` at start-up: one driver per state directory and per socket, private
modes, saved pool sizes, and exit 2 with a message (no traceback) when it cannot start.

Each driver runs as a child process (tests/driver/subprocess_driver.py), since what is
tested is the process: its exit code, its stderr, the files it leaves behind.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from csi_mock.config import validate_config
from csi_mock.driver import Driver
from csi_mock.proto import csi_pb2 as pb
from csi_mock.testing import accepts_connections
from tests.driver.csi_helpers import GiB, create_request
from tests.driver.subprocess_driver import DriverProcess

_REPO = Path(__file__).resolve().parents[2]
EXIT_TIMEOUT = 30.0
NOT_WRITABLE = Path("/sys/csi-mock-startup-test")
"""mkdir there fails with EPERM, even for root (sysfs)."""


def config(pool: str = "fast", size: str = "10Gi") -> dict[str, Any]:
    return {
        "node": {"id": "node-1", "mount": "directory"},
        "pools": [{"name": pool, "size": size}],
    }


@dataclass(frozen=True)
class Exited:
    code: int | None
    """None: still running after EXIT_TIMEOUT (killed)."""
    err: str


def serve(*argv: str) -> Exited:
    """`csi-mock serve ARGV` in a child process, expected to exit at start-up."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _, err = process.communicate(timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        return Exited(None, err)
    return Exited(process.returncode, err)


def refused(exited: Exited, *named: str) -> None:
    """Exit 2, one message naming each of `named`, no traceback."""
    assert exited.code == 2, exited
    assert "Traceback" not in exited.err, exited.err
    for text in named:
        assert text in exited.err, exited.err


def process(root: Path, driver_config: dict[str, Any]) -> DriverProcess:
    root.mkdir(exist_ok=True)
    return DriverProcess(root, driver_config)


@contextmanager
def running(root: Path, driver_config: dict[str, Any]) -> Iterator[DriverProcess]:
    driver = process(root, driver_config)
    driver.start()
    try:
        yield driver
    finally:
        driver.stop()


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- item 5: one driver per state directory, one server per socket -------------------------


def test_a_second_driver_on_the_same_state_directory_exits_2_naming_the_lock_and_pid(
    short_tmp_path: Path,
) -> None:
    with running(short_tmp_path / "a", config()) as first:
        second = process(short_tmp_path / "b", {**config(), "state_dir": str(first.state_dir)})

        exited = serve("--config", str(second.config_path))

        refused(exited, f"{first.state_dir / 'lock'} is locked by PID {first.pid}")
        assert not second.socket.exists()
        assert first.admin_client.health().ready


def test_a_second_driver_on_a_live_endpoint_exits_2_and_leaves_the_socket(
    short_tmp_path: Path,
) -> None:
    with running(short_tmp_path / "a", config()) as first:
        second = process(short_tmp_path / "b", {**config(), "endpoint": f"unix://{first.socket}"})

        exited = serve("--config", str(second.config_path))

        refused(exited, f"endpoint: {first.socket} is a live socket")
        assert accepts_connections(first.socket)
        assert first.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())


def test_a_second_driver_on_a_live_admin_socket_exits_2_and_leaves_the_socket(
    short_tmp_path: Path,
) -> None:
    with running(short_tmp_path / "a", config()) as first:
        admin_socket = first.state_dir / "admin.sock"
        second = process(short_tmp_path / "b", {**config(), "admin": {"socket": str(admin_socket)}})

        exited = serve("--config", str(second.config_path))

        refused(exited, f"admin.socket: {admin_socket} is a live socket")
        assert first.admin_client.health().ready
        assert not second.socket.exists()


# -- item 9: private modes whatever the umask ------------------------------------------------


def test_under_umask_000_the_sockets_are_0600_and_the_state_directory_0700(
    short_tmp_path: Path,
) -> None:
    with umask(0), running(short_tmp_path, config()) as driver:
        modes = {
            "csi socket": mode(driver.socket),
            "admin socket": mode(driver.state_dir / "admin.sock"),
            "state directory": mode(driver.state_dir),
        }

    assert modes == {"csi socket": 0o600, "admin socket": 0o600, "state directory": 0o700}


# -- item 14: saved pool sizes and pools that were removed ----------------------------------


def test_a_restart_without_a_pool_that_holds_volumes_exits_2_naming_it_and_leaves_no_socket(
    short_tmp_path: Path,
) -> None:
    with running(short_tmp_path, config("fast")) as driver:
        driver.controller.CreateVolume(create_request("pvc-1", GiB))
    driver.config_path.write_text(
        yaml.safe_dump(
            {
                **config("slow"),
                "endpoint": f"unix://{driver.socket}",
                "state_dir": str(driver.state_dir),
            }
        )
    )

    exited = serve("--config", str(driver.config_path))

    refused(exited, "pools that are no longer configured: fast (1 volume or snapshot)")
    assert not driver.socket.exists()
    assert not (driver.state_dir / "admin.sock").exists()


def test_a_saved_pool_size_overrides_the_configured_one_with_a_warning(
    short_tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def driver_config(size: str) -> Any:
        data = {**config("fast", size), "endpoint": f"unix://{short_tmp_path}/csi.sock"}
        return validate_config({**data, "state_dir": str(short_tmp_path / "state")})

    first = Driver.open(driver_config("10Gi"))
    first.load()
    assert first.controller is not None
    first.controller.resize_pool("fast", 20 * GiB)
    first.close()

    with caplog.at_level(logging.WARNING, logger="csi_mock"):
        second = Driver.open(driver_config("30Gi"))
    second.load()
    second.close()

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "pool fast: the saved size 20Gi (from a pool resize) overrides the configured size"
        " 30Gi; `csi-mock ctl pool resize fast 30Gi` restores the configured size"
    ]
    assert second.controller is not None
    assert second.controller.pool("fast").total == 20 * GiB


# -- item 15: exit 2 naming the path and the fix --------------------------------------------


def test_a_socket_path_too_long_for_a_unix_socket_exits_2_naming_it(tmp_path: Path) -> None:
    endpoint = "/tmp/" + "s" * 110 + ".sock"

    exited = serve(
        "--endpoint", f"unix://{endpoint}", "--statedir", str(tmp_path), "--nodeid", "n1"
    )

    refused(exited, f"endpoint: the socket path {endpoint!r} is 120 bytes", "shorter path")


def test_a_corrupt_state_database_exits_2_naming_the_file(short_tmp_path: Path) -> None:
    driver = process(short_tmp_path, config())
    driver.state_dir.mkdir()
    driver.database.write_bytes(b"this is not an SQLite database" * 100)

    exited = serve("--config", str(driver.config_path))

    refused(exited, f"{driver.database} cannot be read", "move it aside")
    assert not driver.socket.exists()


def test_a_state_directory_that_cannot_be_created_exits_2_naming_it(
    short_tmp_path: Path,
) -> None:
    state_dir = NOT_WRITABLE / "state"

    exited = serve(
        "--endpoint",
        f"unix://{short_tmp_path}/csi.sock",
        "--statedir",
        str(state_dir),
        "--nodeid",
        "n1",
    )

    refused(exited, f"state_dir: cannot use {state_dir}", "--statedir")


def test_an_endpoint_directory_that_cannot_be_created_exits_2_naming_it(
    short_tmp_path: Path,
) -> None:
    socket_path = NOT_WRITABLE / "csi.sock"

    exited = serve(
        "--endpoint",
        f"unix://{socket_path}",
        "--statedir",
        str(short_tmp_path / "state"),
        "--nodeid",
        "n1",
    )

    refused(exited, f"endpoint: cannot listen on {socket_path}", "--endpoint")
    assert not (short_tmp_path / "state" / "admin.sock").exists()
