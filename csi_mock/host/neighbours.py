"""The other programs of this process's pod that csi-mock may pause and resume
(``Neighbours``): a test's "stop the attacher" when the sidecars share the driver's pod.

A pod whose containers share one process namespace (``shareProcessNamespace: true``)
shows every container's processes in ``/proc``. The configuration names the programs
that may be paused (``admin.neighbours``, by the base name of their ``argv[0]``, such as
``csi-attacher``); nothing else is ever signalled, and this process never pauses itself.

A pause is SIGSTOP and returns once every matching process shows as stopped; a resume
is SIGCONT. A paused program holds its connections and does no work, as a sidecar whose
pod is gone does none; the kubelet's readiness probe of its container fails meanwhile.
``resume_all`` runs when csi-mock shuts down, so that a paused program sees the SIGTERM
the kubelet sent it and its pod ends within its grace period instead of at the SIGKILL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from csi_mock.model.errors import FailedPrecondition, NotFound

log = logging.getLogger("csi_mock.neighbours")

STOPPED_STATES = frozenset("Tt")
"""/proc/<pid>/stat states of a process that a signal stopped (T) or that a tracer
holds (t)."""
ENDED_STATES = frozenset("ZXx")
"""A zombie (Z), or dead (X, x)."""
PAUSE_TIMEOUT = 2.0
"""How long a pause waits for every process to show as stopped."""


@dataclass(frozen=True)
class Neighbour:
    name: str
    pids: tuple[int, ...]
    paused: bool

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pids": list(self.pids), "paused": self.paused}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Neighbour:
        return cls(str(data["name"]), tuple(int(p) for p in data["pids"]), bool(data["paused"]))


@dataclass
class Neighbours:
    names: Collection[str]
    """The programs that may be paused (admin.neighbours)."""
    proc: Path = Path("/proc")
    send: Callable[[int, int], None] = os.kill
    own_pid: int = field(default_factory=os.getpid)
    _paused: dict[str, tuple[int, ...]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    """A pause runs in a thread (its wait), resume and resume_all on the event loop."""

    def list(self) -> list[Neighbour]:
        """Every configured program, with the processes found of it now; paused when
        /proc shows one of them stopped (so also after this process restarted)."""
        found = []
        for name in sorted(self.names):
            pids = tuple(self._pids_of(name))
            found.append(Neighbour(name, pids, any(self._stopped(pid) for pid in pids)))
        return found

    def pause(self, name: str) -> Neighbour:
        """SIGSTOP every process of ``name`` and wait until each shows as stopped.
        NotFound for a name not configured; FailedPrecondition when no process of it
        runs in this pod's process namespace, when one may not be signalled or does not
        stop in time (then what was stopped is continued: nothing is left paused)."""
        with self._lock:
            sent = self._stop_each(name)
            self._paused[name] = sent
        deadline = time.monotonic() + PAUSE_TIMEOUT
        while not all(self._stopped(pid) for pid in sent):
            if time.monotonic() > deadline:
                with self._lock:
                    for pid in sent:
                        self._continue(pid)
                    self._paused.pop(name, None)
                states = ", ".join(f"{pid} {self._state(pid)}" for pid in sent)
                raise FailedPrecondition(
                    f"{name} was sent SIGSTOP but not shown as stopped within "
                    f"{PAUSE_TIMEOUT:g} s (pid and state: {states}); continued, nothing is "
                    "paused"
                )
            time.sleep(0.01)
        log.info("paused %s (pids %s)", name, ", ".join(map(str, sent)))
        return Neighbour(name, sent, True)

    def resume(self, name: str) -> Neighbour:
        """SIGCONT every process of ``name`` (paused or not: a resume never fails for
        a program that has none running, and then changes nothing)."""
        self._check_name(name)
        with self._lock:
            pids = tuple(self._pids_of(name))
            for pid in pids:
                self._continue(pid)
            self._paused.pop(name, None)
        return Neighbour(name, pids, False)

    def resume_all(self) -> None:
        """Continue every process of the configured programs that this object paused
        or that /proc shows stopped (at SIGTERM, shutdown and reset)."""
        with self._lock:
            for name in sorted(self.names):
                pids = set(self._paused.pop(name, ()))
                pids |= {pid for pid in self._pids_of(name) if self._stopped(pid)}
                for pid in sorted(pids):
                    self._continue(pid)
                if pids:
                    log.info("resumed %s", name)

    def _stop_each(self, name: str) -> tuple[int, ...]:
        """SIGSTOP to each process of ``name``; those it reached (one that ended since
        the scan is skipped). A refusal continues those already stopped."""
        sent: list[int] = []
        for pid in self._running(name):
            try:
                self.send(pid, signal.SIGSTOP)
            except ProcessLookupError:  # ended since the scan: it does no work either
                continue
            except PermissionError:
                for done in sent:
                    self._continue(done)
                raise FailedPrecondition(
                    f"{name} (pid {pid}) may not be signalled by this process (it needs "
                    "the same user or CAP_KILL); nothing was paused"
                ) from None
            sent.append(pid)
        if not sent:
            raise FailedPrecondition(f"every process of {name} ended as it was being paused")
        return tuple(sent)

    # -- /proc ---------------------------------------------------------------------------

    def _running(self, name: str) -> tuple[int, ...]:
        self._check_name(name)
        pids = tuple(self._pids_of(name))
        if not pids:
            raise FailedPrecondition(
                f"no process of {name} runs in this pod's process namespace (a pod shares "
                "one only with shareProcessNamespace: true)"
            )
        return pids

    def _check_name(self, name: str) -> None:
        if name not in self.names:
            known = ", ".join(sorted(self.names)) or "none (admin.neighbours is empty)"
            raise NotFound(f"{name!r} is not a program csi-mock may pause; it may pause: {known}")

    def _pids_of(self, name: str) -> Iterator[int]:
        for entry in self.proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.own_pid:
                continue
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            except OSError:  # gone meanwhile, or not ours to read
                continue
            if os.path.basename(argv0.decode(errors="replace")) == name:
                yield int(entry.name)

    def _stopped(self, pid: int) -> bool:
        """Stopped, or ended (gone, a zombie): either way it does no work."""
        return self._state(pid) in STOPPED_STATES | ENDED_STATES

    def _state(self, pid: int) -> str:
        try:
            stat = (self.proc / str(pid) / "stat").read_text()
        except OSError:
            return "X"  # gone
        # "pid (comm) S ...": comm may hold spaces and parentheses; the state follows
        # the last ")".
        return stat[stat.rindex(")") + 2]

    def _continue(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.send(pid, signal.SIGCONT)
