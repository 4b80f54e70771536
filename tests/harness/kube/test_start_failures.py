"""The runtime's start failures over one wait: each counted once, kept apart from
crashes, and named in the diagnostics."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Event

from csi_harness._internal.kube.pod_status import CRASH_LOOP_RESTARTS
from csi_harness._internal.kube.start_failures import SANDBOX_FAILED, StartHistory
from tests.harness.kube.test_pod_status import (
    RUNC_EXEC_FAILED,
    crash,
    in_back_off,
    pod,
    start_error,
    status,
)

FREEZE_FAILED = (
    "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to start sandbox "
    '"4f1c": failed to create containerd task: failed to create shim task: OCI runtime '
    "create failed: runc create failed: unable to start container process: error during "
    "container init: error setting cgroup config for procHooks process: unable to freeze"
)
"""The message of the kubelet's FailedCreatePodSandBox event ("Failed to create pod
sandbox: %v", kuberuntime_manager.go) with runc's cgroup v1 freezer error of issue 47."""


def running_after_start_errors(restarts: int, last: int) -> dict[str, Any]:
    return status(
        "csi-attacher",
        {"running": {"startedAt": "2026-11-28T08:43:53Z"}},
        restarts,
        lastState={"terminated": start_error(last)},
        ready=True,
    )


def sandbox_event(pod_name: str, count: int, name: str = "ev1") -> Event:
    return Event.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "ns"},
            "reason": SANDBOX_FAILED,
            "type": "Warning",
            "count": count,
            "message": FREEZE_FAILED,
            "source": {"component": "kubelet", "host": "worker"},
        }
    )


def test_each_failed_start_is_counted_once_however_often_it_is_seen() -> None:
    history = StartHistory()
    # As a real kubelet reports them: the first failed attempt with restartCount 0,
    # then RunContainerError and CrashLoopBackOff around each further attempt.
    run_error = {"waiting": {"reason": "RunContainerError", "message": RUNC_EXEC_FAILED}}
    polls = [
        status("csi-attacher", run_error, 0, lastState={"terminated": start_error(1)}),
        status("csi-attacher", run_error, 1, lastState={"terminated": start_error(2)}),
        in_back_off("csi-attacher", 1, start_error(2)),
        in_back_off("csi-attacher", 1, start_error(2)),
        status("csi-attacher", run_error, 2, lastState={"terminated": start_error(3)}),
        running_after_start_errors(3, 3),
    ]
    new = [line for poll in polls for line in history.observe([pod(poll)])]
    assert len(new) == 3
    assert all("csi-attacher: the container runtime failed to start it" in line for line in new)
    assert history.start_failures(pod()) == {"csi-attacher": 3}


def test_crashes_and_failed_starts_are_told_apart_over_a_wait() -> None:
    history = StartHistory()
    for attempt in range(1, 4):
        history.observe([pod(in_back_off("csi-mock", attempt - 1, start_error(attempt)))])
    # It ran and exited once: restartCount 3 is not three crashes.
    once = pod(in_back_off("csi-mock", CRASH_LOOP_RESTARTS, crash(4)))
    history.observe([once])
    assert history.unrecoverable(once) is None
    thrice = pod(in_back_off("csi-mock", CRASH_LOOP_RESTARTS + 3, crash(7)))
    history.observe([thrice])
    reason = history.unrecoverable(thrice)
    assert reason is not None and "crashed 3 times" in reason


def test_the_summary_names_the_runtime_with_how_often_and_its_last_error() -> None:
    history = StartHistory()
    for attempt in range(1, 4):
        history.observe([pod(in_back_off("csi-attacher", attempt - 1, start_error(attempt)))])
    summary = history.summary()
    assert "not counted as crashes" in summary
    assert "csi-mock-node-abc/csi-attacher: the container runtime failed to start it 3 times" in (
        summary
    )
    assert 'exec: "/late/run": stat /late/run: no such file or directory' in summary


def test_a_sandbox_the_runtime_could_not_create_is_counted_from_the_kubelets_event() -> None:
    history = StartHistory()
    creating = pod(status("csi-attacher", {"waiting": {"reason": "ContainerCreating"}}))
    assert history.observe([creating], [sandbox_event("csi-mock-node-abc", 1)])
    assert history.observe([creating], [sandbox_event("csi-mock-node-abc", 1)]) == []
    assert history.observe([creating], [sandbox_event("csi-mock-node-abc", 3)])
    # Events outlive their pods: another pod's are not this wait's.
    history.observe([creating], [sandbox_event("csi-mock-node-old", 5, name="ev2")])
    assert history.runtime_failures() == [
        "csi-mock-node-abc: the container runtime could not create its sandbox 3 times "
        f"(last: {FREEZE_FAILED})"
    ]
    assert history.unrecoverable(creating) is None


def test_a_container_the_runtime_cannot_create_now_is_named_though_never_terminated() -> None:
    message = "failed to reserve container name"
    failing = pod(
        status("csi-attacher", {"waiting": {"reason": "CreateContainerError", "message": message}})
    )
    history = StartHistory()
    history.observe([failing])
    assert history.unrecoverable(failing) is None
    (line,) = history.runtime_failures([failing])
    assert "csi-attacher: the container runtime cannot start it now" in line
    assert "CreateContainerError" in line and message in line


def test_a_wait_without_runtime_failures_says_so() -> None:
    history = StartHistory()
    history.observe([pod(in_back_off("csi-mock", 1, crash(1)))])
    assert history.runtime_failures() == []
    assert "started every container" in history.summary()
