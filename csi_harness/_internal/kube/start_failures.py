"""Runtime start failures seen over one wait for pods: the container runtime failing to
start a container (``StartError``: runc's exec failing, or its cgroup v1 freezer
"unable to freeze" under load) or to create a pod's sandbox (``FailedCreatePodSandBox``).

The kubelet retries both with back-off, so a wait goes on through them until its
deadline, and they are not the pod's containers crashing: ``StartHistory`` keeps each
one, so that only a container that ran and exited counts toward "crashed N times"
(``pod_status.unrecoverable``) and the wait's diagnostics name the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event, Pod

from csi_harness._internal.kube.describe import (
    container_statuses,
    describe_container_state,
    get_path,
    one_line,
    plain,
)
from csi_harness._internal.kube.pod_status import (
    RUNTIME_WAITING_REASONS,
    last_termination,
    pod_name,
    runtime_start_failure,
    unrecoverable,
)

SANDBOX_FAILED = "FailedCreatePodSandBox"
"""The reason of the kubelet's event for a pod whose sandbox the runtime could not create."""


@dataclass
class _RuntimeFailures:
    """The runtime failing to start one container (or create one pod's sandbox)."""

    seen: set[str] = field(default_factory=set)
    """One key per failure: the failed container's ID (or the event's name)."""
    counts: dict[str, int] = field(default_factory=dict)
    """For sandbox events: the count of each event, which the kubelet bumps."""
    last: str = ""

    def times(self) -> int:
        return len(self.seen) + sum(self.counts.values())


@dataclass
class StartHistory:
    """What the runtime did to the containers of some pods over one wait: every time it
    failed to start a container or to create a pod's sandbox, each failure once."""

    _containers: dict[tuple[str, str], _RuntimeFailures] = field(default_factory=dict)
    _sandboxes: dict[str, _RuntimeFailures] = field(default_factory=dict)

    def observe(self, pods: Iterable[Pod], events: Iterable[Event] = ()) -> list[str]:
        """Take in the pods' container statuses and the namespace's
        ``FailedCreatePodSandBox`` events; return a line for each failure not seen before."""
        new: list[str] = []
        names = set()
        for pod in pods:
            names.add(pod_name(pod))
            for status in container_statuses(pod):
                new += self._observe_container(pod_name(pod), status)
        for event in map(plain, events):
            # Events outlive their pods: an earlier deployment's are not this wait's.
            if get_path(event, "involvedObject", "name") in names:
                new += self._observe_sandbox_event(event)
        return new

    def _observe_container(self, pod: str, status: Mapping[str, Any]) -> list[str]:
        container = f"{pod}/{status.get('name')}"
        terminated = last_termination(status)
        if not runtime_start_failure(terminated):
            return []
        assert terminated is not None
        # Each attempt is a container of its own (a new ID); a status without IDs
        # is told apart by when the attempt ended.
        key = str(terminated.get("containerID") or terminated.get("finishedAt") or "")
        record = self._containers.setdefault((pod, str(status.get("name"))), _RuntimeFailures())
        if key in record.seen:
            return []
        record.seen.add(key)
        record.last = describe_container_state({"terminated": terminated})
        return [f"{container}: the container runtime failed to start it ({record.last})"]

    def _observe_sandbox_event(self, event: Mapping[str, Any]) -> list[str]:
        if event.get("reason") != SANDBOX_FAILED:
            return []
        if get_path(event, "involvedObject", "kind") not in (None, "Pod"):
            return []
        pod = str(get_path(event, "involvedObject", "name") or "?")
        key = str(get_path(event, "metadata", "name") or event.get("message"))
        count = int(event.get("count") or get_path(event, "series", "count") or 1)
        record = self._sandboxes.setdefault(pod, _RuntimeFailures())
        if record.counts.get(key, 0) >= count:
            return []
        record.counts[key] = count
        record.last = one_line(str(event.get("message") or ""))
        return [f"{pod}: the container runtime could not create its sandbox ({record.last})"]

    def start_failures(self, pod: Pod) -> dict[str, int]:
        """Container name -> how often the runtime was seen failing to start it."""
        name = pod_name(pod)
        return {c: r.times() for (p, c), r in self._containers.items() if p == name}

    def unrecoverable(self, pod: Pod) -> str | None:
        """``pod_status.unrecoverable`` with the runtime's start failures seen so far."""
        return unrecoverable(pod, self.start_failures(pod))

    def runtime_failures(self, pods: Iterable[Pod] = ()) -> list[str]:
        """One line per container the runtime failed to start and per pod whose sandbox
        it could not create, with how often and the last error; and each container of
        ``pods`` the runtime is failing to create or start right now
        (``RunContainerError``, ``CreateContainerError``) but never saw terminate."""
        lines = [
            f"{pod}/{container}: the container runtime failed to start it {_times(r)} "
            f"(last: {r.last})"
            for (pod, container), r in sorted(self._containers.items())
        ]
        lines += [
            f"{pod}: the container runtime could not create its sandbox {_times(r)} "
            f"(last: {r.last})"
            for pod, r in sorted(self._sandboxes.items())
        ]
        for pod in pods:
            name = pod_name(pod)
            for status in container_statuses(pod):
                waiting = get_path(status.get("state"), "waiting", "reason")
                if waiting in RUNTIME_WAITING_REASONS and (
                    (name, str(status.get("name"))) not in self._containers
                ):
                    state = describe_container_state(status.get("state"))
                    lines.append(
                        f"{name}/{status.get('name')}: the container runtime cannot start it "
                        f"now ({state})"
                    )
        return lines

    def summary(self, pods: Iterable[Pod] = ()) -> str:
        """For a wait's diagnostics: the runtime's failures (``runtime_failures``), said
        to be the runtime's and not counted as crashes, or that there were none."""
        lines = self.runtime_failures(pods)
        if not lines:
            return "the container runtime started every container it was asked to"
        return (
            "the container runtime failed to start containers (retried by the kubelet, "
            "not counted as crashes):\n" + "\n".join(f"  {line}" for line in lines)
        )


def _times(record: _RuntimeFailures) -> str:
    n = record.times()
    return "once" if n == 1 else f"{n} times"


def sandbox_failure_events(kube: Client, namespace: str) -> list[Event]:
    """The namespace's ``FailedCreatePodSandBox`` events (the kubelet's, one per pod
    and error, with a count)."""
    try:
        return list(kube.list(Event, namespace=namespace, fields={"reason": SANDBOX_FAILED}))
    except ApiError:  # events only add to the diagnostics; a wait goes on without them
        return []
