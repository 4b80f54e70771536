"""NodeStageVolume and NodeUnstageVolume errors end to end: how the kubelet reacts to
a final error (INVALID_ARGUMENT: the volume is surely not staged) and to a transient
one (DEADLINE_EXCEEDED: it may be staged, or become so). It retries NodeStage while the
pod exists, whatever the error; after a transient NodeStage error it calls NodeUnstage
when the pod goes, after a final one it does not; after a failed NodeUnstage the next
pod's volume is staged again.

Fault rules on the node's csi-mock instance make the errors; its journal shows which
calls the kubelet made, in order. Pods run on the node with a real kubelet.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_for, wait_pod_running
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "NodeStage and NodeUnstage errors"

STAGE = "NodeStageVolume"
UNSTAGE = "NodeUnstageVolume"
FINAL = "INVALID_ARGUMENT"
TRANSIENT = "DEADLINE_EXCEEDED"
OK = "OK"

Call = tuple[str, str]
"""(method, status code) of a journal record."""


def collapse(calls: Iterable[Call]) -> list[Call]:
    """The calls with repeats in a row folded into one, as upstream's compareCSICalls
    matches them: the kubelet retries with backoff, how often is not the point."""
    folded: list[Call] = []
    for call in calls:
        if not folded or folded[-1] != call:
            folded.append(call)
    return folded


def stage_calls(driver: Driver, node: str, volume: str) -> list[Call]:
    """NodeStage and NodeUnstage calls of ``node``'s instance for the volume, oldest
    first, repeats folded."""
    with driver.admin(node) as node_admin:
        records = node_admin.journal(volume=volume)
    return collapse((r.method, r.code) for r in records if r.method in (STAGE, UNSTAGE))


def wait_stage_calls(driver: Driver, node: str, volume: str, expected: list[Call]) -> None:
    """Wait until the calls are ``expected``; fail at once if they are not a prefix of
    it (a call that must never come)."""

    def probe() -> tuple[bool, list[Call]]:
        calls = stage_calls(driver, node, volume)
        assert calls == expected[: len(calls)], f"calls {calls}, expected {expected}"
        return calls == expected, calls

    wait_for(f"the calls {expected} on {node}", probe, timeout=60, interval=0.2)


def volume_handle(kube: Client, claim: str, namespace: str) -> str:
    pv = wait_bound_volume(kube, claim, namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    return str(pv.spec.csi.volumeHandle)


def create_pod(kube: Client, namespace: str, node: str, name: str, claim: str) -> None:
    objects.create(kube, objects.pod(name, namespace, claims=[claim], nodes=[node]))


def delete_pod(kube: Client, namespace: str, name: str) -> None:
    """Delete the pod and wait until it is gone from the API server (its grace period
    is 0: the kubelet tears it down after that)."""
    kube.delete(Pod, name, namespace=namespace)
    wait_for(
        f"pod {name} gone", lambda: objects.gone(kube, Pod, name, namespace=namespace), timeout=60
    )


def pod_phase(kube: Client, namespace: str, name: str) -> str:
    status = kube.get(Pod, name, namespace=namespace).status
    return str(status.phase) if status else "?"


# --- CSI NodeStage error cases ---------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "failures"),
    [
        pytest.param(
            None,
            0,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go", "should call NodeUnstage after NodeStage success"
            ),
            id="success",
        ),
        pytest.param(
            FINAL,
            3,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "should retry NodeStage after NodeStage final error",
            ),
            id="final",
        ),
        pytest.param(
            TRANSIENT,
            3,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "should retry NodeStage after NodeStage ephemeral error",
            ),
            id="transient",
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(FEATURE, "NodeStage fails 3 times: the kubelet retries, the pod starts")
def test_node_stage_is_retried_until_it_succeeds_and_unstaged_after_the_pod(
    kube: Client, namespace: str, driver: Driver, pod_node: str, code: str | None, failures: int
) -> None:
    expected: list[Call] = [(STAGE, code)] if code else []
    if code:
        with driver.admin(pod_node) as node_admin:
            node_admin.add_fault(STAGE, code=code, times=failures)
    objects.create(kube, objects.claim("app", namespace, "1Gi", driver.spec.storage_class()))
    create_pod(kube, namespace, pod_node, "app", "app")
    volume = volume_handle(kube, "app", namespace)

    wait_stage_calls(driver, pod_node, volume, [*expected, (STAGE, OK)])
    wait_pod_running(kube, "app", namespace)
    with driver.admin(pod_node) as node_admin:
        failed = node_admin.journal(method=STAGE, volume=volume, code=code) if code else []
    assert len(failed) == failures

    delete_pod(kube, namespace, "app")
    wait_stage_calls(driver, pod_node, volume, [*expected, (STAGE, OK), (UNSTAGE, OK)])


@pytest.mark.parametrize(
    ("code", "unstaged"),
    [
        pytest.param(
            TRANSIENT,
            True,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "should call NodeUnstage after NodeStage ephemeral error",
            ),
            id="transient",
        ),
        pytest.param(
            FINAL,
            False,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "should not call NodeUnstage after NodeStage final error",
            ),
            id="final",
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(
    FEATURE, "NodeStage always fails, the pod is deleted: NodeUnstage only if it was transient"
)
def test_pod_deleted_while_node_stage_fails_is_unstaged_only_after_a_transient_error(
    kube: Client, namespace: str, driver: Driver, pod_node: str, code: str, unstaged: bool
) -> None:
    # A marker: a pod whose volume stages normally, deleted with the test's pod. Its
    # NodeUnstage shows the kubelet has torn both pods' volumes down (the reconciler
    # unstages every volume no pod wants in the same pass), so a NodeUnstage of the
    # failed volume would have come by then.
    objects.create(kube, objects.claim("marker", namespace, "1Gi", driver.spec.storage_class()))
    create_pod(kube, namespace, pod_node, "marker", "marker")
    wait_pod_running(kube, "marker", namespace)
    marker = volume_handle(kube, "marker", namespace)

    with driver.admin(pod_node) as node_admin:
        node_admin.add_fault(STAGE, code=code)
    objects.create(kube, objects.claim("app", namespace, "1Gi", driver.spec.storage_class()))
    create_pod(kube, namespace, pod_node, "app", "app")
    volume = volume_handle(kube, "app", namespace)
    wait_stage_calls(driver, pod_node, volume, [(STAGE, code)])
    assert pod_phase(kube, namespace, "app") == "Pending"

    delete_pod(kube, namespace, "app")
    delete_pod(kube, namespace, "marker")
    wait_stage_calls(driver, pod_node, marker, [(STAGE, OK), (UNSTAGE, OK)])
    if unstaged:
        wait_stage_calls(driver, pod_node, volume, [(STAGE, code), (UNSTAGE, OK)])
    else:
        assert stage_calls(driver, pod_node, volume) == [(STAGE, code)]


# --- CSI NodeUnstage error cases -------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(
            None,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go", "should call NodeStage after NodeUnstage success"
            ),
            id="success",
        ),
        pytest.param(
            FINAL,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "two pods: should call NodeStage after previous NodeUnstage final error",
            ),
            id="final",
        ),
        pytest.param(
            TRANSIENT,
            marks=pytest.mark.upstream(
                "csi_node_stage_error_cases.go",
                "two pods: should call NodeStage after previous NodeUnstage transient error",
            ),
            id="transient",
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(
    FEATURE, "NodeUnstage fails for the first pod: the second pod's volume is staged again"
)
def test_node_stage_follows_a_failed_node_unstage_for_the_next_pod(
    kube: Client, namespace: str, driver: Driver, pod_node: str, code: str | None
) -> None:
    objects.create(kube, objects.claim("app", namespace, "1Gi", driver.spec.storage_class()))
    create_pod(kube, namespace, pod_node, "first", "app")
    volume = volume_handle(kube, "app", namespace)
    wait_pod_running(kube, "first", namespace)
    if code:
        # Upstream's hook: NodeUnstage fails for as long as the first pod is the last
        # one deleted.
        with driver.admin(pod_node) as node_admin:
            rule = node_admin.add_fault(UNSTAGE, code=code, volume=volume)

    delete_pod(kube, namespace, "first")
    unstaged = (UNSTAGE, code or OK)
    wait_stage_calls(driver, pod_node, volume, [(STAGE, OK), unstaged])

    create_pod(kube, namespace, pod_node, "second", "app")
    wait_pod_running(kube, "second", namespace)
    if code:
        with driver.admin(pod_node) as node_admin:
            node_admin.remove_fault(rule.id)
    delete_pod(kube, namespace, "second")
    wait_stage_calls(driver, pod_node, volume, [(STAGE, OK), unstaged, (STAGE, OK), (UNSTAGE, OK)])
