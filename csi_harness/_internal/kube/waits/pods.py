"""Waiting for a pod: scheduled, running, succeeded, unschedulable with a reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.core.waiting import WaitTimeout
from csi_harness._internal.kube.describe import describe_pod
from csi_harness._internal.kube.pod_status import image_failure, pod_ready
from csi_harness._internal.kube.start_failures import StartHistory, sandbox_failure_events
from csi_harness._internal.kube.watching import Kube, watch_until


def _watch_pod(
    kube: Kube,
    name: str,
    namespace: str,
    check: Callable[[Pod], tuple[bool, Any]],
    *,
    what: str,
    timeout: float,
) -> Any:
    """``watch_until`` for one pod; while it does not exist, that is what was seen."""

    def check_pods(pods: dict[str, Pod]) -> tuple[bool, Any]:
        pod = pods.get(name)
        return (False, f"no pod {name}") if pod is None else check(pod)

    return watch_until(
        kube, Pod, namespace=namespace, name=name, what=what, check=check_pods, timeout=timeout
    )


def wait_pod_scheduled(kube: Kube, name: str, namespace: str, timeout: float = 60) -> str:
    """Wait until the pod is bound to a node; return the node's name."""

    def check(pod: Pod) -> tuple[bool, str]:
        node = pod.spec.nodeName if pod.spec else None
        return bool(node), node or describe_pod(pod)

    node: str = _watch_pod(
        kube,
        name,
        namespace,
        check,
        what=f"pod {namespace}/{name} to be scheduled",
        timeout=timeout,
    )
    return node


def wait_pod_running(kube: Kube, name: str, namespace: str, timeout: float = 90) -> Pod:
    def check(pod: Pod) -> tuple[bool, Any]:
        running = pod.status is not None and pod.status.phase == "Running"
        if not running and (failure := image_failure(pod)) is not None:
            raise AssertionError(f"pod {namespace}/{name} cannot run: {failure}")
        return running, pod if running else describe_pod(pod)

    pod: Pod = _watch_pod(
        kube, name, namespace, check, what=f"pod {namespace}/{name} to run", timeout=timeout
    )
    return pod


def wait_pod_succeeded(kube: Kube, name: str, namespace: str, timeout: float = 90) -> Pod:
    """Wait until the pod has run to completion; a failed pod fails the wait at once,
    with its containers' termination messages."""

    def check(pod: Pod) -> tuple[bool, Any]:
        phase = pod.status.phase if pod.status else None
        if phase == "Failed":
            raise AssertionError(f"pod {namespace}/{name} failed: {_terminations(pod)}")
        if (failure := image_failure(pod)) is not None:
            raise AssertionError(f"pod {namespace}/{name} cannot run: {failure}")
        return phase == "Succeeded", pod if phase == "Succeeded" else describe_pod(pod)

    pod: Pod = _watch_pod(
        kube, name, namespace, check, what=f"pod {namespace}/{name} to succeed", timeout=timeout
    )
    return pod


def termination_message(pod: Pod, container: str = "app") -> str:
    """What a finished container wrote to its termination log."""
    for status in (pod.status.containerStatuses or []) if pod.status else []:
        if status.name == container and status.state and status.state.terminated:
            return status.state.terminated.message or ""
    raise AssertionError(f"container {container} of pod {pod.metadata.name} has not finished")  # type: ignore[union-attr]


def _terminations(pod: Pod) -> str:
    finished = []
    for status in (pod.status.containerStatuses or []) if pod.status else []:
        terminated = status.state.terminated if status.state else None
        if terminated is not None:
            finished.append(
                f"{status.name}: exit {terminated.exitCode} {terminated.reason}:"
                f" {(terminated.message or '').strip()}"
            )
    return "; ".join(finished) or describe_pod(pod)


def wait_pod_unschedulable(
    kube: Kube, name: str, namespace: str, *, message: str | None = None, timeout: float = 60
) -> str:
    """Wait for PodScheduled=False with reason Unschedulable (and ``message`` in the
    scheduler's message, if given); return the scheduler's message."""

    def check(pod: Pod) -> tuple[bool, str]:
        conditions = (pod.status.conditions if pod.status else None) or []
        condition = next((c for c in conditions if c.type == "PodScheduled"), None)
        if pod.spec and pod.spec.nodeName:
            return False, f"scheduled to {pod.spec.nodeName}"
        if condition is None or condition.status != "False" or condition.reason != "Unschedulable":
            return False, describe_pod(pod)
        text = condition.message or ""
        return message is None or message in text, text

    what = f"pod {namespace}/{name} to be unschedulable" + (
        f" with a message containing {message!r}" if message else ""
    )
    text: str = _watch_pod(kube, name, namespace, check, what=what, timeout=timeout)
    return text


def wait_pods_ready(
    kube: Kube,
    namespace: str,
    *,
    labels: Mapping[str, str] | None = None,
    timeout: float = 90,
    progress: Callable[[str], None] = lambda _: None,
) -> StartHistory:
    """Wait until the selected pods (at least one) are all Ready; return what the
    container runtime failed to start meanwhile.

    The kubelet retries a container the runtime failed to start, or a pod whose sandbox
    it could not create, so the wait goes on through that to its deadline, saying each
    one to ``progress`` as it is seen; only a container that ran and exited counts
    toward a crash loop, which fails the wait at once (``AssertionError``) as a missing
    image does. A timeout's message ends with the runtime's failures."""
    history = StartHistory()

    def sandbox_events() -> list[Any]:
        # A unit test's stand-in that only lists and watches has no events to give.
        return sandbox_failure_events(kube, namespace) if isinstance(kube, Client) else []

    def check(pods: dict[str, Pod]) -> tuple[bool, str]:
        for line in history.observe(pods.values(), sandbox_events()):
            progress(f"{line}; the kubelet retries")
        for pod in pods.values():
            if (reason := history.unrecoverable(pod)) is not None:
                raise AssertionError(
                    f"a pod in {namespace} cannot start: {reason}\n"
                    + history.summary(pods.values())
                )
        waiting = [describe_pod(p) for p in pods.values() if not pod_ready(p)]
        return bool(pods) and not waiting, "; ".join(waiting) or "no pod"

    what = f"the pods of {namespace}" + (f" with labels {dict(labels)}" if labels else "")
    try:
        watch_until(
            kube,
            Pod,
            namespace=namespace,
            labels=labels,
            what=f"{what} to be ready",
            check=check,
            timeout=timeout,
        )
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}\n{history.summary()}") from None
    return history
