"""Upstream's node volume and storage health cases (``csi_node_volume_health.go``),
which need the alpha feature gate CSIVolumeHealth (``feature_gate`` marker: skipped
without it; ``make test`` brings its cluster up with it, docs/harness.md).

With the gate, the 1.37.1 kubelet runs a volume health manager that, every minute, asks
each driver for its node capabilities. With GET_VOLUME_HEALTH it calls
NodeGetVolumeHealth for each mounted volume and writes ``pod.status.volumeHealth``; with
GET_STORAGE_HEALTH it calls NodeGetStorageHealth and writes the driver's entry of
``CSINode.status.storageHealth``. csi-mock offers both (CSI v1.13; ``volume_health`` and
``storage_health`` knobs), and a test sets the adverse conditions through the node's
admin API, where upstream's mock rewrites the replies with a hook.

Calls are observed in the node's journal; a call of a method the driver does not offer
is journaled too (UNIMPLEMENTED), so "never asked" is observed, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSINode

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_pod_running
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient

pytestmark = [pytest.mark.e2e]

UPSTREAM = "csi_node_volume_health.go"
STATS_WAIT = 150
"""Seconds: the kubelet computes a pod's volume stats every VolumeStatsAggPeriod (1
minute), first when its stats analyser (also every minute) notices the pod; its health
manager probes every minute too. Upstream waits 2 minutes (csiNodeVolumeStatWaitPeriod)."""
ABNORMAL = {
    "status": "INACCESSIBLE",
    "reason": "AbnormalVolumeHealth",
    "message": "The target path of the volume doesn't exist",
}
UNREACHABLE = {
    "status": "STORAGE_UNREACHABLE",
    "reason": "BackendUnavailable",
    "message": "The storage backend is unreachable",
}


def running_pod_volume(kube: Client, namespace: str, driver: Driver, node: str) -> str:
    """A running pod "app" on the node with claim "data" of the driver; its volume ID."""
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_running(kube, "app", namespace)
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    return pv.spec.csi.volumeHandle


def wait_served(node_admin: AdminClient, volume: str, methods: tuple[str, ...]) -> None:
    """Wait until the kubelet has called each of ``methods`` for the volume with success."""

    def served() -> tuple[bool, object]:
        codes = {
            method: [call.code for call in node_admin.journal(method=method, volume=volume)]
            for method in methods
        }
        return all("OK" in codes[method] for method in methods), codes

    wait_for(f"the kubelet to call {', '.join(methods)} for {volume}", served, timeout=STATS_WAIT)


@pytest.mark.feature_gate("CSIVolumeHealth")
@pytest.mark.driver(volume_stats=True)
@pytest.mark.upstream(UPSTREAM, "return normal volume stats without volume health")
def test_the_kubelet_gets_volume_stats_and_never_asks_for_volume_health(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    volume = running_pod_volume(kube, namespace, driver, pod_node)
    with driver.admin(pod_node) as node_admin:
        wait_served(node_admin, volume, ("NodeGetVolumeStats",))
        assert node_admin.journal(method="NodeGetVolumeHealth") == []
    pod = kube.get(Pod, "app", namespace=namespace)
    assert pod.status is not None and not pod.status.volumeHealth, pod.status


def pod_volume_health(kube: Client, namespace: str) -> list[tuple[str, str]]:
    """(status, reason) of every health condition of the pod's volumes."""
    pod = kube.get(Pod, "app", namespace=namespace)
    assert pod.status is not None
    return [
        (condition.status, condition.reason or "")
        for volume in pod.status.volumeHealth or []
        for condition in volume.healthConditions or []
    ]


@pytest.mark.feature_gate("CSIVolumeHealth")
@pytest.mark.driver(volume_stats=True, volume_health=True)
@pytest.mark.parametrize(
    "abnormal",
    [
        pytest.param(
            False, marks=pytest.mark.upstream(UPSTREAM, "return normal volume health"), id="normal"
        ),
        pytest.param(
            True,
            marks=pytest.mark.upstream(UPSTREAM, "return abnormal volume health"),
            id="abnormal",
        ),
    ],
)
def test_the_kubelet_writes_the_volume_health_the_node_reports_into_the_pod_status(
    kube: Client, namespace: str, driver: Driver, pod_node: str, abnormal: bool
) -> None:
    volume = running_pod_volume(kube, namespace, driver, pod_node)
    with driver.admin(pod_node) as node_admin:
        if abnormal:
            node_admin.set_volume_health(volume, [ABNORMAL])

        wait_served(node_admin, volume, ("NodeGetVolumeStats", "NodeGetVolumeHealth"))

    expected = [("Inaccessible", "AbnormalVolumeHealth")] if abnormal else []

    def status_written() -> tuple[bool, object]:
        conditions = pod_volume_health(kube, namespace)
        return conditions == expected, conditions

    wait_for("pod.status.volumeHealth to be what the node reported", status_written, timeout=90)


def storage_health_of(kube: Client, node: str, driver_name: str) -> list[tuple[str, str]] | None:
    """(status, reason) of the driver's storage health conditions on the node's CSINode;
    None when the CSINode has no entry for the driver."""
    csinode = kube.get(CSINode, node)
    for health in (csinode.status.storageHealth if csinode.status else None) or []:
        if health.name == driver_name:
            return [(c.status, c.reason or "") for c in health.healthConditions or []]
    return None


@pytest.mark.feature_gate("CSIVolumeHealth")
@pytest.mark.driver(storage_health=True)
@pytest.mark.upstream(UPSTREAM, "should mark CSINode unhealthy and then healthy")
def test_the_kubelet_marks_the_csinode_unhealthy_and_then_healthy(
    kube: Client, driver: Driver, pod_node: str
) -> None:
    with driver.admin(pod_node) as node_admin:
        node_admin.set_storage_health([UNREACHABLE])

        def reported(expected: list[tuple[str, str]]) -> Callable[[], tuple[bool, object]]:
            def check() -> tuple[bool, object]:
                conditions = storage_health_of(kube, pod_node, driver.spec.name)
                # Healthy: no conditions, or (before the first probe) no entry at all.
                return (conditions or []) == expected, conditions

            return check

        wait_for(
            f"CSINode {pod_node} to report {driver.spec.name}'s backend unreachable",
            reported([("StorageUnreachable", "BackendUnavailable")]),
            timeout=STATS_WAIT,
            interval=1,
        )
        node_admin.clear_storage_health()
        wait_for(
            f"CSINode {pod_node} to clear {driver.spec.name}'s storage health",
            reported([]),
            timeout=STATS_WAIT,
            interval=1,
        )
        assert any(c.code == "OK" for c in node_admin.journal(method="NodeGetStorageHealth"))
