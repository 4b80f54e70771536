"""Pausing the pod's other programs: real processes of this PID namespace, real signals,
their state read back from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from csi_mock.host import neighbours as neighbours_module
from csi_mock.host.neighbours import Neighbours
from csi_mock.model.errors import FailedPrecondition, NotFound
from tests.unit.host.renamed_programs import is_stopped, start_renamed

# Per pytest process: xdist workers running these side by side must not see each
# other's stand-ins.
SIDECAR = f"csi-test-sidecar-{os.getpid()}"


def stopped(processes: list[subprocess.Popen[bytes]]) -> list[bool]:
    return [is_stopped(p.pid) for p in processes]


@pytest.fixture
def sidecars() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two processes whose argv[0] is SIDECAR (sleep under another name), as two
    replicas of one program in a pod's shared process namespace would be."""
    started = [start_renamed(SIDECAR) for _ in range(2)]
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_pausing_stops_every_process_of_the_program_and_resuming_continues_them(
    sidecars: list[subprocess.Popen[bytes]],
) -> None:
    neighbours = Neighbours([SIDECAR, "csi-other"])

    paused = neighbours.pause(SIDECAR)

    assert sorted(paused.pids) == sorted(p.pid for p in sidecars) and paused.paused
    assert stopped(sidecars) == [True, True]
    assert [(n.name, n.paused) for n in neighbours.list()] == [
        ("csi-other", False),
        (SIDECAR, True),
    ]
    neighbours.resume(SIDECAR)
    assert stopped(sidecars) == [False, False]
    assert not any(n.paused for n in neighbours.list())


def test_resume_all_continues_what_was_paused_so_a_pending_sigterm_ends_it(
    sidecars: list[subprocess.Popen[bytes]],
) -> None:
    neighbours = Neighbours([SIDECAR])
    neighbours.pause(SIDECAR)
    for process in sidecars:
        process.terminate()  # pending while stopped, as the kubelet's SIGTERM would be
    assert stopped(sidecars) == [True, True]

    neighbours.resume_all()

    assert [p.wait(timeout=5) for p in sidecars] == [-15, -15]


def test_a_program_not_configured_is_never_signalled(
    sidecars: list[subprocess.Popen[bytes]],
) -> None:
    neighbours = Neighbours(["csi-attacher"])

    with pytest.raises(NotFound, match=rf"'{SIDECAR}' is not a program .* csi-attacher"):
        neighbours.pause(SIDECAR)
    with pytest.raises(NotFound):
        neighbours.resume(SIDECAR)
    assert stopped(sidecars) == [False, False]


def test_a_configured_program_with_no_process_here_is_a_failed_precondition() -> None:
    neighbours = Neighbours(["csi-not-running"])

    with pytest.raises(FailedPrecondition, match="no process of csi-not-running runs"):
        neighbours.pause("csi-not-running")
    assert neighbours.list()[0].pids == () and not neighbours.list()[0].paused


def test_a_refused_signal_continues_what_was_already_stopped_and_pauses_nothing(
    sidecars: list[subprocess.Popen[bytes]],
) -> None:
    sent: list[tuple[int, int]] = []
    first = min(p.pid for p in sidecars)

    def send(pid: int, signum: int) -> None:
        if pid != first:
            raise PermissionError(1, "Operation not permitted")
        sent.append((pid, signum))
        os.kill(pid, signum)

    neighbours = Neighbours([SIDECAR], send=send)

    with pytest.raises(FailedPrecondition, match=r"may not be signalled .* nothing was paused"):
        neighbours.pause(SIDECAR)
    # /proc lists pids in ascending order: the lower was stopped, then continued.
    assert sent == [(first, signal.SIGSTOP), (first, signal.SIGCONT)]
    assert stopped(sidecars) == [False, False]
    assert not neighbours.list()[0].paused


def test_this_process_is_never_its_own_neighbour() -> None:
    own = Path("/proc/self/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    neighbours = Neighbours([Path(own).name])

    assert all(pid != os.getpid() for n in neighbours.list() for pid in n.pids)


def test_a_pause_that_does_not_take_in_time_is_undone_and_refused(
    sidecars: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(neighbours_module, "PAUSE_TIMEOUT", 0.1)
    sent: list[tuple[int, int]] = []
    # A SIGSTOP that never arrives: the processes go on running.
    neighbours = Neighbours([SIDECAR], send=lambda pid, signum: sent.append((pid, signum)))

    with pytest.raises(FailedPrecondition, match=r"not shown as stopped .* nothing is paused"):
        neighbours.pause(SIDECAR)

    pids = sorted(p.pid for p in sidecars)
    assert sent == [(pid, signal.SIGSTOP) for pid in pids] + [(pid, signal.SIGCONT) for pid in pids]
    assert not neighbours.list()[0].paused


def test_what_proc_shows_stopped_is_listed_paused_and_resumed_after_a_restart(
    sidecars: list[subprocess.Popen[bytes]],
) -> None:
    # Paused by an earlier csi-mock of this pod: this one has no record of it.
    for process in sidecars:
        os.kill(process.pid, signal.SIGSTOP)
    neighbours = Neighbours([SIDECAR])
    deadline = time.monotonic() + 5
    while not all(stopped(sidecars)) and time.monotonic() < deadline:
        time.sleep(0.01)

    assert neighbours.list()[0].paused
    neighbours.resume_all()

    assert stopped(sidecars) == [False, False]
    assert not neighbours.list()[0].paused
