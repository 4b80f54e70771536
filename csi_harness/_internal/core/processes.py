"""Starting, watching and stopping the cluster's processes.

Every process is started in its own session with stdout and stderr going to
``logs/<name>.log``. Its PID and kernel start time are recorded in the run state
as soon as it starts, so teardown (even from another process, after a crash)
stops exactly the processes this harness started and never a recycled PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from csi_harness._internal.core.procfs import read_stat
from csi_harness._internal.core.run_state import ProcessRecord, RunState
from csi_harness._internal.core.zygote import Zygote, ZygoteError


class ComponentFailed(RuntimeError):
    """A component exited or did not become ready; the message carries its log tail."""

    def __init__(self, component: str, problem: str, log: Path | None) -> None:
        tail = log_tail(log) if log is not None else ""
        message = f"{component}: {problem}"
        if log is not None:
            message += f"\n--- last lines of {log} ---\n{tail}"
        super().__init__(message)
        self.component = component
        self.log = log


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if it is gone
    (or a zombie)."""
    stat = read_stat(pid)
    return None if stat is None or stat.state == "Z" else stat.start_time


def is_running(record: ProcessRecord) -> bool:
    return process_start_time(record.pid) == record.start_time


@dataclass
class Supervisor:
    """Starts processes for one run and stops them in reverse order."""

    state: RunState
    log_dir: Path
    _children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        zygote: tuple[Zygote, Sequence[str]] | None = None,
    ) -> ProcessRecord:
        """Start ``argv`` as process ``name``, its output appended to its log. With
        ``zygote`` (a zygote and the csi-mock arguments to give it), the zygote forks
        the process instead (``env`` and ``cwd`` are then the zygote's); ``argv`` is
        what the record shows."""
        if name in self.state.processes and is_running(self.state.processes[name]):
            raise ComponentFailed(name, "already running", None)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path(name)
        full_env = dict(os.environ)
        full_env.update(env or {})
        with log.open("ab") as out:
            out.write(f"=== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
            out.flush()
        if zygote is not None:
            return self._forked(name, argv, log, *zygote)
        with log.open("ab") as out:
            try:
                child = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=full_env,
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ComponentFailed(name, f"cannot start {argv[0]}: {exc}", None) from exc
        start_time = process_start_time(child.pid)
        record = ProcessRecord(
            name=name, pid=child.pid, start_time=start_time or 0, argv=list(argv), log=str(log)
        )
        self._children[name] = child
        with self.state.locked() as state:
            state.processes[name] = record
        return record

    def _forked(
        self, name: str, argv: Sequence[str], log: Path, zygote: Zygote, args: Sequence[str]
    ) -> ProcessRecord:
        try:
            pid = zygote.spawn(args, log)
        except ZygoteError as exc:
            raise ComponentFailed(name, str(exc), log) from exc
        record = ProcessRecord(
            name=name,
            pid=pid,
            start_time=process_start_time(pid) or 0,
            argv=list(argv),
            log=str(log),
        )
        with self.state.locked() as state:
            state.processes[name] = record
        return record

    def log_path(self, name: str) -> Path:
        """Where the output of process ``name`` goes (appended to, start after start)."""
        return self.log_dir / f"{name}.log"

    def check_alive(self, names: Sequence[str] | None = None) -> None:
        """Raise ComponentFailed for the first watched process that has exited: a child
        of this supervisor, or a process another one started (an attached cluster)."""
        for name, record in self.state.processes.items():
            if names is not None and name not in names:
                continue
            child = self._children.get(name)
            if child is not None:
                code = child.poll()
                if code is not None:
                    raise ComponentFailed(name, f"exited with code {code}", Path(record.log))
            elif not is_running(record):
                raise ComponentFailed(name, f"pid {record.pid} is gone", Path(record.log))

    def stop(self, name: str, timeout: float = 5.0) -> None:
        # The record goes first: a process another worker attaching at this moment
        # finds in the run state is one meant to run, never one being stopped (an
        # attach checks that every recorded process is alive). A process whose stop
        # fails is still killed by teardown, which finds it by the run directory.
        with self.state.locked() as state:
            record = state.processes.pop(name, None)
        if record is not None:
            stop_processes([record], timeout=timeout)
        child = self._children.pop(name, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=0.1)


def stop_processes(records: Sequence[ProcessRecord], timeout: float = 5.0) -> list[str]:
    """SIGTERM every still-running recorded process, SIGKILL the ones that outlive
    ``timeout`` and wait until they are gone; returns the names that had to be killed."""
    alive = [r for r in records if is_running(r)]
    for record in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive and time.monotonic() < deadline:
        _reap(alive)
        alive = [r for r in alive if is_running(r)]
        if alive:
            time.sleep(0.05)
    killed = [r.name for r in alive]
    for record in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while alive and time.monotonic() < deadline:
        _reap(alive)
        alive = [r for r in alive if is_running(r)]
        if alive:
            time.sleep(0.01)
    return killed


def _reap(records: Sequence[ProcessRecord]) -> None:
    """Collect those of ``records`` that are exited children of this process (only
    them: other children's exit codes belong to their Popen objects)."""
    for record in records:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(record.pid, os.WNOHANG)
