"""Whether waiting longer can help a pod (its one-line description is
``csi_harness._internal.kube.describe.describe_pod``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
"""A container that ran and exited this often is taken as broken, not as starting up."""
RUNTIME_START_ERROR = "StartError"
"""The termination reason of a container the runtime failed to start (runc create)."""
RUNTIME_WAITING_REASONS = frozenset({"RunContainerError", "CreateContainerError"})
"""Waiting reasons of a container the runtime failed to create or start just now."""
_NEVER_STARTED = "1970-01-01T00:00:00"
"""The ``startedAt`` the kubelet reports for a container whose process never ran."""


def pod_name(pod: Pod) -> str:
    return str(pod.metadata.name) if pod.metadata else "?"


def pod_ready(pod: Pod) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


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


def runtime_start_failure(terminated: Mapping[str, Any] | None) -> bool:
    """Whether a container's ``terminated`` state is the runtime failing to start it
    (its process never ran), not the container running and exiting.

    A real kubelet (1.37, containerd and runc) reports an exec that fails in runc as
    ``reason: StartError, exitCode: 128, startedAt: 1970-01-01T00:00:00Z``; exit code
    128 with no start time is taken the same way, whatever the reason."""
    if not terminated:
        return False
    if terminated.get("reason") == RUNTIME_START_ERROR:
        return True
    started = str(terminated.get("startedAt") or "")
    return terminated.get("exitCode") == 128 and (not started or started.startswith(_NEVER_STARTED))


def last_termination(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container's latest termination: its state when terminated, else its last state."""
    terminated = get_path(status.get("state"), "terminated") or get_path(
        status.get("lastState"), "terminated"
    )
    return terminated if isinstance(terminated, Mapping) else None


def unrecoverable(pod: Pod, start_failures: Mapping[str, int] | None = None) -> str | None:
    """Why ``pod`` will not become ready however long one waits, or None.

    A crash loop is a container in CrashLoopBackOff whose latest termination is its
    process exiting and that ran and exited ``CRASH_LOOP_RESTARTS`` times: its restarts
    less ``start_failures[name]``, the times the runtime was seen failing to start it
    (``StartHistory`` keeps them over a wait; without it, only a latest termination
    that was one counts). A container the runtime failed to start is retried by the
    kubelet and is waited for."""
    for status in container_statuses(pod):
        state = status.get("state")
        reason = get_path(state, "waiting", "reason")
        name = str(status.get("name"))
        if reason in _IMAGE_MISSING:
            return image_failure(pod)
        last = last_termination(status)
        if reason != "CrashLoopBackOff" or last is None or runtime_start_failure(last):
            continue
        restarts = status.get("restartCount") or 0
        not_started = (start_failures or {}).get(name, 0)
        crashes = restarts - not_started
        if crashes >= CRASH_LOOP_RESTARTS:
            times = "once" if not_started == 1 else f"{not_started} times"
            not_counted = (
                f" (and the runtime failed to start it {times}, not counted)" if not_started else ""
            )
            seen = describe_container_state(status.get("lastState"))
            return f"{pod_name(pod)}/{name} crashed {crashes} times{not_counted}; last: {seen}"
    return None
