"""The PVC ``Unused`` condition end to end (PersistentVolumeClaimUnusedSinceTime, beta
and on by default in 1.37): kube-controller-manager's PVC protection controller sets
``Unused=True`` (reason NoPodsUsingPVC) on a bound claim no pod references, and
``Unused=False`` (PodUsingPVC) while a pod that has not terminated references it,
whether it runs or is still unscheduled; a pod that Succeeded does not count.

The controller is driven by events (a claim without the condition, any pod change of a
pod that references a claim), with no period of its own: each wait below answers
within an event, and its timeout only bounds a stuck controller. It sets the
condition only on a Bound claim, so the claims use Immediate binding (as upstream's)
unless a test says otherwise. Running pods are on the node with a real kubelet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    wait_claim,
    wait_for,
    wait_pod_running,
    wait_pod_succeeded,
    wait_pod_unschedulable,
)
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "PVC Unused condition"
FILE = "csi_pvc_unused_condition.go"
UNUSED = "Unused"
IMMEDIATE = "csi-mock-immediate"
NO_PODS = "NoPodsUsingPVC"
POD_USING = "PodUsingPVC"
CONDITION_TIMEOUT = 30
"""Seconds for the controller to react to one event (upstream allows 3 minutes)."""


def unused_condition(pvc: PersistentVolumeClaim) -> Any | None:
    """The claim's Unused condition, if it has one."""
    conditions = (pvc.status.conditions if pvc.status else None) or []
    return next((c for c in conditions if c.type == UNUSED), None)


def wait_unused(kube: Client, namespace: str, status: str, claim: str = "data") -> Any:
    """Wait until the claim's Unused condition has ``status`` ("True"/"False"); return
    the condition."""

    def has_status(pvc: PersistentVolumeClaim) -> bool:
        condition = unused_condition(pvc)
        return condition is not None and condition.status == status

    pvc = wait_claim(
        kube, claim, namespace, has_status, what=f"Unused={status}", timeout=CONDITION_TIMEOUT
    )
    return unused_condition(pvc)


def create_claim(kube: Client, driver: Driver, namespace: str, base: str = IMMEDIATE) -> None:
    objects.create(kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(base)))


def run_pod(kube: Client, namespace: str, name: str, node: str) -> None:
    """A pod using the claim "data" on ``node``, waited for until it runs."""
    objects.create(kube, objects.pod(name, namespace, claims=["data"], nodes=[node]))
    wait_pod_running(kube, name, namespace)


def delete_pod(kube: Client, namespace: str, name: str) -> None:
    """Delete the pod and wait until it is gone from the API server."""
    kube.delete(Pod, name, namespace=namespace)
    wait_for(
        f"pod {name} gone", lambda: objects.gone(kube, Pod, name, namespace=namespace), timeout=60
    )


def transition_time(condition: Any) -> datetime:
    moment = condition.lastTransitionTime
    assert isinstance(moment, datetime), f"lastTransitionTime {moment!r}"
    return moment


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should set Unused=True condition when PVC has no referencing pods")
@pytest.mark.scenario(FEATURE, "a bound claim no pod references: Unused=True, NoPodsUsingPVC")
def test_claim_without_pods_is_unused(kube: Client, namespace: str, driver: Driver) -> None:
    create_claim(kube, driver, namespace)
    condition = wait_unused(kube, namespace, "True")
    assert condition.reason == NO_PODS, condition
    transition_time(condition)


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should set Unused=False when a running pod references the PVC")
@pytest.mark.scenario(FEATURE, "a running pod uses the claim: Unused=False, PodUsingPVC")
def test_claim_of_a_running_pod_is_used(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    create_claim(kube, driver, namespace)
    run_pod(kube, namespace, "app", pod_node)
    condition = wait_unused(kube, namespace, "False")
    assert condition.reason == POD_USING, condition


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should transition Unused from False to True when pod is deleted")
@pytest.mark.scenario(FEATURE, "its pod deleted: Unused False -> True, a later transition time")
def test_claim_becomes_unused_when_its_pod_is_deleted(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    create_claim(kube, driver, namespace)
    run_pod(kube, namespace, "app", pod_node)
    used = wait_unused(kube, namespace, "False")

    delete_pod(kube, namespace, "app")
    unused = wait_unused(kube, namespace, "True")
    assert unused.reason == NO_PODS, unused
    # Whole seconds: a pod that lived less than a second may leave the same one.
    assert transition_time(unused) >= transition_time(used), (used, unused)


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should transition Unused from True to False when new pod starts")
@pytest.mark.scenario(FEATURE, "a pod starts for an unused claim: Unused True -> False")
def test_unused_claim_becomes_used_when_a_pod_starts(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    create_claim(kube, driver, namespace)
    wait_unused(kube, namespace, "True")

    run_pod(kube, namespace, "app", pod_node)
    condition = wait_unused(kube, namespace, "False")
    assert condition.reason == POD_USING, condition


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should show Unused=True when only terminated pods reference the PVC")
@pytest.mark.scenario(FEATURE, "only a Succeeded pod references the claim: Unused=True")
def test_claim_of_a_succeeded_pod_is_unused(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    # Late binding (unlike upstream's Immediate): the claim is bound, and so gets the
    # condition, only once the pod is scheduled, so an Unused=True cannot be one from
    # before the pod existed.
    create_claim(kube, driver, namespace, base="csi-mock")
    pod = objects.pod(
        "app", namespace, claims=["data"], nodes=[pod_node], command=["sh", "-c", "echo done"]
    )
    objects.create(kube, pod)
    wait_pod_succeeded(kube, "app", namespace)

    condition = wait_unused(kube, namespace, "True")
    assert condition.reason == NO_PODS, condition
    assert objects.exists(kube, Pod, "app", namespace=namespace)


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should show Unused=False for pending unscheduled pod")
@pytest.mark.scenario(FEATURE, "an unschedulable pod references the claim: Unused=False")
def test_claim_of_an_unschedulable_pod_is_used(
    kube: Client, namespace: str, driver: Driver
) -> None:
    create_claim(kube, driver, namespace)
    wait_unused(kube, namespace, "True")
    pod = objects.pod("app", namespace, claims=["data"])
    pod["spec"]["nodeSelector"] = {"non-existent-node": "true"}
    objects.create(kube, pod)
    wait_pod_unschedulable(kube, "app", namespace)

    condition = wait_unused(kube, namespace, "False")
    assert condition.reason == POD_USING, condition


@pytest.mark.driver()
@pytest.mark.upstream(FILE, "should track Unused correctly with multiple pods")
@pytest.mark.scenario(FEATURE, "two pods: used until the last one goes")
def test_claim_stays_used_until_its_last_pod_is_deleted(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    create_claim(kube, driver, namespace)
    run_pod(kube, namespace, "first", pod_node)
    used = wait_unused(kube, namespace, "False")
    run_pod(kube, namespace, "second", pod_node)

    delete_pod(kube, namespace, "first")
    # Still False, and the same transition: it never went True in between.
    still = wait_unused(kube, namespace, "False")
    assert transition_time(still) == transition_time(used), (used, still)

    delete_pod(kube, namespace, "second")
    unused = wait_unused(kube, namespace, "True")
    assert unused.reason == NO_PODS, unused
