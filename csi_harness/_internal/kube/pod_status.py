"""What a pod's containers are doing, in one line, and whether waiting longer can help."""

from __future__ import annotations

from lightkube.models.core_v1 import ContainerState, ContainerStatus
from lightkube.resources.core_v1 import Pod

# Waiting reasons that time does not cure here: no image can be pulled on this
# machine, so one missing from the node stays missing.
_IMAGE_MISSING = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)
CRASH_LOOP_RESTARTS = 3
"""A container that crashed this often is taken as broken, not as starting up."""


def pod_name(pod: Pod) -> str:
    return str(pod.metadata.name) if pod.metadata else "?"


def _statuses(pod: Pod) -> list[ContainerStatus]:
    if pod.status is None:
        return []
    return [*(pod.status.initContainerStatuses or []), *(pod.status.containerStatuses or [])]


def _state(state: ContainerState | None) -> str:
    if state is None:
        return "unknown"
    if state.waiting is not None:
        message = f" ({state.waiting.message})" if state.waiting.message else ""
        return f"waiting {state.waiting.reason}{message}"
    if state.terminated is not None:
        done = state.terminated
        message = f": {done.message.strip()[-300:]}" if done.message else ""
        return f"terminated {done.reason} exit {done.exitCode}{message}"
    return "running"


def describe_pod(pod: Pod) -> str:
    """``name on node: Phase; container: ready|state, restarts=N (last: ...)``."""
    node = pod.spec.nodeName if pod.spec else None
    phase = pod.status.phase if pod.status else None
    parts = []
    for status in _statuses(pod):
        text = f"{status.name}: {'ready' if status.ready else _state(status.state)}"
        if status.restartCount:
            text += f", restarts={status.restartCount} (last: {_state(status.lastState)})"
        parts.append(text)
    return f"{pod_name(pod)} on {node or '(unscheduled)'}: {phase}; " + (
        "; ".join(parts) or "no containers yet"
    )


def unrecoverable(pod: Pod) -> str | None:
    """Why ``pod`` will not become ready however long one waits, or None."""
    for status in _statuses(pod):
        waiting = status.state.waiting if status.state else None
        reason = waiting.reason if waiting else None
        if reason in _IMAGE_MISSING:
            return f"{pod_name(pod)}/{status.name}: {_state(status.state)} (image {status.image})"
        if reason == "CrashLoopBackOff" and status.restartCount >= CRASH_LOOP_RESTARTS:
            return (
                f"{pod_name(pod)}/{status.name} crashed {status.restartCount} times; "
                f"last: {_state(status.lastState)}"
            )
    return None
