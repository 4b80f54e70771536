"""/v1/neighbours through the admin client: a program of the pod paused and resumed, the
refusals, and every pause undone when the driver is reset or closes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from csi_mock.admin import AdminClient, AdminError
from tests.control.conftest import StartAdmin
from tests.unit.host.renamed_programs import is_stopped, start_renamed

SIDECAR = f"csi-test-attacher-{os.getpid()}"  # per pytest process (xdist)


@pytest.fixture
def sidecar() -> Iterator[subprocess.Popen[bytes]]:
    process = start_renamed(SIDECAR)
    yield process
    process.kill()
    process.wait()


async def test_a_configured_program_is_paused_and_resumed(
    start_admin: StartAdmin, sidecar: subprocess.Popen[bytes]
) -> None:
    running = await start_admin(admin={"neighbours": [SIDECAR]})

    paused = await running.admin.pause_neighbour(SIDECAR)

    assert paused.pids == (sidecar.pid,) and paused.paused and is_stopped(sidecar.pid)
    assert [(n.name, n.paused) for n in await running.admin.neighbours()] == [(SIDECAR, True)]
    await running.admin.resume_neighbour(SIDECAR)
    assert not is_stopped(sidecar.pid)


async def test_unknown_or_absent_programs_are_refused_by_name(
    start_admin: StartAdmin, sidecar: subprocess.Popen[bytes]
) -> None:
    running = await start_admin(admin={"neighbours": ["csi-not-running"]})

    with pytest.raises(AdminError) as unknown:
        await running.admin.pause_neighbour(SIDECAR)
    with pytest.raises(AdminError) as absent:
        await running.admin.pause_neighbour("csi-not-running")

    assert unknown.value.status == 404 and "it may pause: csi-not-running" in str(unknown.value)
    assert absent.value.status == 409 and "no process of csi-not-running" in str(absent.value)
    assert not is_stopped(sidecar.pid)


async def test_a_reset_and_the_drivers_close_resume_what_it_paused(
    start_admin: StartAdmin, sidecar: subprocess.Popen[bytes]
) -> None:
    running = await start_admin(admin={"neighbours": [SIDECAR]})
    await running.admin.pause_neighbour(SIDECAR)
    assert is_stopped(sidecar.pid)

    await running.admin.reset()
    assert not is_stopped(sidecar.pid)

    await running.admin.pause_neighbour(SIDECAR)
    assert is_stopped(sidecar.pid)
    running.driver.close()
    assert not is_stopped(sidecar.pid)


def test_csi_mock_ended_by_sigterm_leaves_no_program_it_paused_stopped(
    tmp_path: Path, sidecar: subprocess.Popen[bytes]
) -> None:
    config = {
        "mode": "controller",
        "endpoint": f"unix://{tmp_path}/csi.sock",
        "state_dir": str(tmp_path / "state"),
        "admin": {"neighbours": [SIDECAR]},
    }
    (tmp_path / "driver.yaml").write_text(yaml.safe_dump(config))
    served = subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(tmp_path / "driver.yaml")],
        stderr=subprocess.DEVNULL,
    )
    try:
        socket = tmp_path / "state" / "admin.sock"
        deadline = time.monotonic() + 30
        while not socket.exists():
            assert served.poll() is None and time.monotonic() < deadline, "csi-mock did not start"
            time.sleep(0.05)
        with AdminClient(socket) as admin:
            admin.pause_neighbour(SIDECAR)
        assert is_stopped(sidecar.pid)

        served.send_signal(signal.SIGTERM)

        assert served.wait(timeout=30) == 0
        assert not is_stopped(sidecar.pid)
    finally:
        served.kill()
        served.wait()
