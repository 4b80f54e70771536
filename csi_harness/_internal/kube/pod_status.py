"""Whether waiting longer can help a pod (its one-line description is
``csi_harness._internal.kube.describe.describe_pod``)."""

from __future__ import annotations

from lightkube.resources.core_v1 import Pod

from csi_harness._internal.kube.describe import (
    container_statuses,
    describe_container_state,
    get_path,
)

# Waiting reasons that time does not cure here: no image can be pulled on this
# machine, so one missing from the node stays missing.
_IMAGE_MISSING = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)
_PULL_FAILED = frozenset({"ErrImagePull", "ImagePullBackOff"})
PULL_HINT = (
    "the node could not pull it: check the name and the registry, or let csi-harness build "
    "every image here instead (--csi-images built with pytest, --images built with "
    "csi-harness), or pull them from a mirror (--csi-images REGISTRY)"
)
CRASH_LOOP_RESTARTS = 3
RUNTIME_START_ERROR = "StartError"
"""The termination reason of a container the runtime failed to start (runc create)."""
"""A container that crashed this often is taken as broken, not as starting up."""


def pod_name(pod: Pod) -> str:
    return str(pod.metadata.name) if pod.metadata else "?"


def image_failure(pod: Pod) -> str | None:
    """Why a container of ``pod`` has no image and will not get one, or None."""
    for status in container_statuses(pod):
        state = status.get("state")
        reason = get_path(state, "waiting", "reason")
        if reason in _IMAGE_MISSING:
            hint = f"; {PULL_HINT}" if reason in _PULL_FAILED else ""
            name = f"{pod_name(pod)}/{status.get('name')}"
            return f"{name}: {describe_container_state(state)} (image {status.get('image')}){hint}"
    return None


def unrecoverable(pod: Pod) -> str | None:
    """Why ``pod`` will not become ready however long one waits, or None."""
    for status in container_statuses(pod):
        state = status.get("state")
        reason = get_path(state, "waiting", "reason")
        name = f"{pod_name(pod)}/{status.get('name')}"
        restarts = status.get("restartCount") or 0
        if reason in _IMAGE_MISSING:
            return image_failure(pod)
        if reason == "CrashLoopBackOff" and restarts >= CRASH_LOOP_RESTARTS:
            if get_path(status.get("lastState"), "terminated", "reason") == RUNTIME_START_ERROR:
                # The runtime could not start the process (e.g. runc's "unable to freeze"
                # of a cgroup v1 freezer under load): the kubelet retries it, and the
                # container never ran, so it is not the driver crashing.
                continue
            last = describe_container_state(status.get("lastState"))
            return f"{name} crashed {restarts} times; last: {last}"
    return None
