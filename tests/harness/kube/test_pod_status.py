"""Which pod states no amount of waiting cures."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Pod

from csi_harness._internal.kube.pod_status import CRASH_LOOP_RESTARTS, image_failure, unrecoverable


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


def test_a_container_the_runtime_could_not_start_is_waited_for_not_called_a_crash() -> None:
    last = {
        "terminated": {
            "exitCode": 128,
            "reason": "StartError",
            "message": "runc create failed: unable to start container process: error "
            "setting cgroup config for procHooks process: unable to freeze",
        }
    }
    crashing = {"waiting": {"reason": "CrashLoopBackOff"}}
    retried = pod(status("csi-attacher", crashing, CRASH_LOOP_RESTARTS + 1, lastState=last))
    assert unrecoverable(retried) is None
