"""/v1/neighbours through the admin client: a program of the pod paused and resumed, the
refusals, and every pause undone when the driver is reset or closes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from csi_mock.admin import AdminError
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

    await running.admin.reset()
    assert not is_stopped(sidecar.pid)

    await running.admin.pause_neighbour(SIDECAR)
    running.driver.close()
    assert not is_stopped(sidecar.pid)
