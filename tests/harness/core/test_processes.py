import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from csi_harness._internal.core.processes import (
    ComponentFailed,
    Supervisor,
    is_running,
    process_start_time,
    stop_processes,
)
from csi_harness._internal.core.run_state import ProcessRecord, RunState

# Ignores SIGTERM (an ignored signal stays ignored across exec), says so, then sleeps.
IGNORES_TERM = ["sh", "-c", "trap '' TERM; echo ready; exec sleep 30"]


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    supervisor = Supervisor(RunState(tmp_path), tmp_path / "logs")
    yield supervisor
    stop_processes(list(supervisor.state.processes.values()), timeout=0.2)


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def exited(record: ProcessRecord) -> Callable[[], bool]:
    """True once the process is gone or a zombie (exited, not yet reaped)."""
    return lambda: process_start_time(record.pid) is None


def test_start_records_pid_and_kernel_start_time(supervisor: Supervisor) -> None:
    record = supervisor.start("sleeper", ["sleep", "30"])
    assert record.start_time == process_start_time(record.pid)
    assert record.start_time > 0
    assert supervisor.state.processes["sleeper"] == record
    assert is_running(record)


def test_start_writes_the_record_to_run_json(supervisor: Supervisor, tmp_path: Path) -> None:
    record = supervisor.start("sleeper", ["sleep", "30"])
    saved = RunState.load(tmp_path)
    assert saved is not None
    assert saved.processes == {"sleeper": record}


def test_start_sends_output_to_the_components_log(supervisor: Supervisor, tmp_path: Path) -> None:
    record = supervisor.start("talker", ["sh", "-c", "echo hello; echo oops >&2"])
    assert record.log == str(tmp_path / "logs" / "talker.log")
    # Line 1 of the log is the argv, which contains "oops" too.
    eventually(lambda: len(Path(record.log).read_text().splitlines()) == 3)
    lines = Path(record.log).read_text().splitlines()
    assert lines[0].startswith("=== ") and lines[0].endswith("sh -c echo hello; echo oops >&2")
    assert lines[1:] == ["hello", "oops"]


def test_start_of_a_missing_binary_raises_component_failed(supervisor: Supervisor) -> None:
    with pytest.raises(ComponentFailed, match=r"ghost: cannot start /nonexistent/ghost"):
        supervisor.start("ghost", ["/nonexistent/ghost"])
    assert "ghost" not in supervisor.state.processes


def test_start_refuses_a_name_that_is_still_running(supervisor: Supervisor) -> None:
    supervisor.start("sleeper", ["sleep", "30"])
    with pytest.raises(ComponentFailed, match="sleeper: already running"):
        supervisor.start("sleeper", ["sleep", "30"])


def test_check_alive_is_quiet_while_processes_run(supervisor: Supervisor) -> None:
    supervisor.start("sleeper", ["sleep", "30"])
    supervisor.check_alive()


def test_check_alive_raises_with_exit_code_and_log_tail(supervisor: Supervisor) -> None:
    record = supervisor.start("crasher", ["sh", "-c", "echo boom; exit 3"])
    eventually(exited(record))
    with pytest.raises(ComponentFailed) as raised:
        supervisor.check_alive()
    message = str(raised.value)
    assert message.startswith("crasher: exited with code 3")
    assert f"last lines of {record.log}" in message
    assert message.rstrip().endswith("boom")
    assert raised.value.component == "crasher"


def test_check_alive_ignores_exited_processes_it_was_not_asked_about(
    supervisor: Supervisor,
) -> None:
    record = supervisor.start("crasher", ["sh", "-c", "exit 3"])
    supervisor.start("sleeper", ["sleep", "30"])
    eventually(exited(record))
    supervisor.check_alive(["sleeper"])
    with pytest.raises(ComponentFailed, match="crasher"):
        supervisor.check_alive(["crasher"])


def test_check_alive_reports_the_real_exit_code_after_another_process_was_stopped(
    supervisor: Supervisor,
) -> None:
    crasher = supervisor.start("crasher", ["sh", "-c", "exit 3"])
    supervisor.start("sleeper", ["sleep", "30"])
    eventually(exited(crasher))
    supervisor.stop("sleeper", timeout=1.0)
    with pytest.raises(ComponentFailed, match="exited with code 3"):
        supervisor.check_alive()


def test_supervisor_stop_ends_the_process_and_forgets_it(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    record = supervisor.start("sleeper", ["sleep", "30"])
    supervisor.stop("sleeper", timeout=1.0)
    assert not is_running(record)
    saved = RunState.load(tmp_path)
    assert saved is not None and saved.processes == {}


def test_stop_processes_ends_a_process_with_sigterm(supervisor: Supervisor) -> None:
    record = supervisor.start("sleeper", ["sleep", "30"])
    assert stop_processes([record], timeout=2.0) == []
    assert not is_running(record)


def test_stop_processes_sigkills_a_process_that_ignores_sigterm(supervisor: Supervisor) -> None:
    record = supervisor.start("stubborn", IGNORES_TERM)
    # Line 1 of the log is the argv (which contains "echo ready" too).
    eventually(lambda: Path(record.log).read_text().splitlines()[1:] == ["ready"])
    started = time.monotonic()
    assert stop_processes([record], timeout=0.3) == ["stubborn"]
    assert time.monotonic() - started >= 0.3
    eventually(lambda: not is_running(record), timeout=2.0)


def test_stop_processes_returns_only_after_a_killed_process_is_gone(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = supervisor.start("stubborn", IGNORES_TERM)
    eventually(lambda: Path(record.log).read_text().splitlines()[1:] == ["ready"])
    real_kill = os.kill

    def slow_to_die(pid: int, sig: int) -> None:
        # Stands in for a process that takes a while to exit after SIGKILL (a large
        # address space to free, or uninterruptible I/O on a mount being torn down).
        if sig == signal.SIGKILL:
            threading.Timer(0.3, real_kill, (pid, sig)).start()
        else:
            real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", slow_to_die)
    stop_processes([record], timeout=0.1)
    monkeypatch.undo()
    try:
        assert not is_running(record)
    finally:
        eventually(lambda: not is_running(record), timeout=2.0)


def test_stop_processes_leaves_a_recycled_pid_alone(supervisor: Supervisor) -> None:
    live = supervisor.start("sleeper", ["sleep", "30"])
    stale = ProcessRecord("old", live.pid, live.start_time - 1, ["old"], "old.log")
    assert stop_processes([stale], timeout=0.2) == []
    assert is_running(live)


def test_is_running_is_true_for_a_live_process(supervisor: Supervisor) -> None:
    assert is_running(supervisor.start("sleeper", ["sleep", "30"]))


def test_is_running_is_false_for_a_recycled_pid() -> None:
    start_time = process_start_time(os.getpid())
    assert start_time is not None
    recycled = ProcessRecord("old", os.getpid(), start_time + 1, ["old"], "old.log")
    assert not is_running(recycled)


def test_is_running_is_false_for_an_exited_unreaped_process(supervisor: Supervisor) -> None:
    record = supervisor.start("quick", ["true"])
    eventually(lambda: not is_running(record))
    assert Path(f"/proc/{record.pid}").exists()  # a zombie until reaped


def test_process_start_time_is_none_for_a_pid_that_does_not_exist() -> None:
    max_pid = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert process_start_time(max_pid + 1) is None


def test_check_alive_watches_processes_another_supervisor_started(
    supervisor: Supervisor, tmp_path: Path
) -> None:
    # An attached cluster: the records come from run.json, the processes are not children.
    record = supervisor.start("adopted", ["sleep", "30"])
    adopter = Supervisor(RunState.load(tmp_path) or RunState(tmp_path), tmp_path / "logs")
    adopter.check_alive(["adopted"])
    os.kill(record.pid, signal.SIGKILL)
    supervisor.check_alive([])  # reap the child, so its pid is really gone
    eventually(exited(record))
    with pytest.raises(ComponentFailed, match=f"adopted.*pid {record.pid} is gone"):
        adopter.check_alive(["adopted"])
