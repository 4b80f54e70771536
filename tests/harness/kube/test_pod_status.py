"""Which pod states no amount of waiting cures."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Pod

from csi_harness._internal.kube.pod_status import (
    CRASH_LOOP_RESTARTS,
    image_failure,
    pod_ready,
    runtime_start_failure,
    unrecoverable,
)


def pod(*statuses: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "csi-mock-node-abc"},
            "spec": {"nodeName": "worker", "containers": [{"name": "csi-mock"}]},
            "status": {
                "phase": "Pending",
                "containerStatuses": list(statuses),
                "initContainerStatuses": list(init),
            },
        }
    )


def status(name: str, state: dict[str, Any], restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"csi-mock.local/{name}:dev",
        "imageID": "",
        "ready": False,
        "restartCount": restarts,
        "state": state,
        **extra,
    }


def test_a_missing_image_cannot_be_waited_for() -> None:
    missing = pod(status("csi-mock", {"waiting": {"reason": "ErrImageNeverPull", "message": "no"}}))
    reason = unrecoverable(missing)
    assert reason is not None
    assert "csi-mock-node-abc/csi-mock" in reason and "csi-mock.local/csi-mock:dev" in reason


def test_a_crash_loop_counts_only_after_repeated_crashes() -> None:
    last = {"terminated": {"exitCode": 2, "reason": "Error", "message": "node.id is required"}}
    crashing = {"waiting": {"reason": "CrashLoopBackOff"}}
    early = pod(status("csi-mock", crashing, CRASH_LOOP_RESTARTS - 1, lastState=last))
    assert unrecoverable(early) is None
    broken = pod(status("csi-mock", crashing, CRASH_LOOP_RESTARTS, lastState=last))
    reason = unrecoverable(broken)
    assert reason is not None and "node.id is required" in reason


def test_starting_containers_are_not_failures() -> None:
    assert (
        unrecoverable(pod(status("csi-mock", {"waiting": {"reason": "ContainerCreating"}}))) is None
    )
    assert unrecoverable(pod()) is None


def test_a_failed_pull_names_the_image_and_the_option_that_builds_it_instead() -> None:
    message = 'failed to pull "registry.k8s.io/sig-storage/csi-provisioner:v6.3.0": not found'
    failing = pod(
        status("csi-provisioner", {"waiting": {"reason": "ErrImagePull", "message": message}})
    )
    reason = image_failure(failing)
    assert reason is not None
    assert "csi-mock-node-abc/csi-provisioner" in reason and "not found" in reason
    assert "--csi-images built" in reason
    assert unrecoverable(failing) == reason


def test_an_image_never_pulled_needs_no_pull_hint() -> None:
    missing = pod(status("app", {"waiting": {"reason": "ErrImageNeverPull", "message": "no"}}))
    reason = image_failure(missing)
    assert reason is not None and "--csi-images" not in reason


RUNC_EXEC_FAILED = (
    "failed to create containerd task: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: error during container "
    'init: exec: "/late/run": stat /late/run: no such file or directory'
)
"""What kubelet 1.37.1 with containerd and runc reported on the local provider for a
command that did not exist (tests/e2e/test_runtime_start_failures.py)."""


def start_error(attempt: int, message: str = RUNC_EXEC_FAILED) -> dict[str, Any]:
    """The ``terminated`` state of a real kubelet's failed start: exit 128, never started."""
    return {
        "containerID": f"containerd://{attempt:064x}",
        "exitCode": 128,
        "finishedAt": f"2026-11-28T08:43:{16 + attempt:02d}Z",
        "message": message,
        "reason": "StartError",
        "startedAt": "1970-01-01T00:00:00Z",
    }


def crash(attempt: int) -> dict[str, Any]:
    """The ``terminated`` state of a container that ran and exited."""
    return {
        "containerID": f"containerd://{attempt:064x}",
        "exitCode": 1,
        "finishedAt": f"2026-11-28T08:44:{attempt:02d}Z",
        "message": "node.id is required",
        "reason": "Error",
        "startedAt": f"2026-11-28T08:43:{59 - attempt:02d}Z",
    }


BACK_OFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting"}}


def in_back_off(name: str, restarts: int, last: dict[str, Any]) -> dict[str, Any]:
    return status(name, BACK_OFF, restarts, lastState={"terminated": last})


def test_a_start_the_runtime_failed_is_told_from_a_process_that_ran_and_exited() -> None:
    assert runtime_start_failure(start_error(1))
    froze = {**start_error(1), "reason": "ContainerCannotRun", "startedAt": None}
    assert runtime_start_failure(froze)  # exit 128 with no start time: never ran
    assert not runtime_start_failure(crash(1))
    exited_128 = {**crash(1), "exitCode": 128}  # a process may exit 128 itself
    assert not runtime_start_failure(exited_128)
    assert not runtime_start_failure(None)


def test_a_container_the_runtime_could_not_start_is_waited_for_not_called_a_crash() -> None:
    froze = start_error(4, "runc create failed: ... unable to freeze")
    retried = pod(in_back_off("csi-attacher", CRASH_LOOP_RESTARTS + 1, froze))
    assert unrecoverable(retried) is None


def test_a_crash_loop_counts_only_the_times_the_container_ran_and_exited() -> None:
    # The runtime failed to start it three times, then it ran and exited once:
    # restartCount 3, one crash.
    once = pod(in_back_off("csi-mock", CRASH_LOOP_RESTARTS, crash(4)))
    assert unrecoverable(once, {"csi-mock": 3}) is None
    thrice = pod(in_back_off("csi-mock", CRASH_LOOP_RESTARTS + 2, crash(6)))
    assert unrecoverable(thrice, {"csi-mock": 3}) is None
    broken = pod(in_back_off("csi-mock", CRASH_LOOP_RESTARTS + 3, crash(7)))
    reason = unrecoverable(broken, {"csi-mock": 3})
    assert reason is not None
    assert "csi-mock crashed 3 times (and the runtime failed to start it 3 times, not counted)" in (
        reason
    )
    assert "node.id is required" in reason


def test_a_crash_loop_ending_in_a_failed_start_waits_for_the_next_attempt() -> None:
    # Crashed five times, then the runtime failed to start it: the kubelet tries again,
    # and that attempt (a sixth crash, or a run) decides.
    last_failed_to_start = pod(in_back_off("csi-mock", 6, start_error(6)))
    assert unrecoverable(last_failed_to_start, {"csi-mock": 1}) is None


def with_conditions(*conditions: tuple[str, str]) -> Pod:
    ready_pod = pod()
    data = ready_pod.to_dict()
    data["status"]["conditions"] = [{"type": t, "status": v} for t, v in conditions]
    return Pod.from_dict(data)


def test_a_pod_is_ready_only_with_its_ready_condition_true() -> None:
    assert pod_ready(with_conditions(("PodScheduled", "True"), ("Ready", "True")))
    assert not pod_ready(with_conditions(("PodScheduled", "True"), ("Ready", "False")))
    assert not pod_ready(with_conditions(("ContainersReady", "True")))
    assert not pod_ready(pod())
