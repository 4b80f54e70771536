"""Upstream's node volume health cases (``csi_node_volume_health.go``), which need the
alpha feature gate CSIVolumeHealth on the kubelet (``feature_gate`` marker: skipped
without it; ``make test`` brings its cluster up with it, docs/harness.md).

With the gate, the 1.37.1 kubelet runs a volume health manager that, every
VolumeStatsAggPeriod, asks each driver whether it has the node capability
GET_VOLUME_HEALTH and, if so, calls NodeGetVolumeHealth and writes
``pod.status.volumeHealth``. csi-mock implements CSI v1.12, which has neither that
capability nor that RPC, so the only upstream case it can take part in is the one
where the driver does not offer volume health: the kubelet gets the volume's stats
(NodeGetVolumeStats, which stays as it was) and never asks for its health. A call to
NodeGetVolumeHealth would be answered UNIMPLEMENTED and still be journaled (csi-mock
records calls of CSI methods its proto lacks), so its absence is observed, not assumed.
"""

from __future__ import annotations

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_pod_running
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

UPSTREAM = "csi_node_volume_health.go"
STATS_WAIT = 150
"""Seconds: the kubelet computes a pod's volume stats every VolumeStatsAggPeriod (1
minute), first when its stats analyser (also every minute) notices the pod."""


@pytest.mark.feature_gate("CSIVolumeHealth")
@pytest.mark.driver(volume_stats=True)
@pytest.mark.upstream(UPSTREAM, "return normal volume stats without volume health")
def test_the_kubelet_gets_volume_stats_and_never_asks_for_volume_health(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[pod_node]),
    )
    wait_pod_running(kube, "app", namespace)
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    volume = pv.spec.csi.volumeHandle

    with driver.admin(pod_node) as node_admin:

        def stats_served() -> tuple[bool, object]:
            calls = node_admin.journal(method="NodeGetVolumeStats", volume=volume)
            return any(call.code == "OK" for call in calls), [call.code for call in calls]

        wait_for(
            f"the kubelet of {pod_node} to get the stats of {volume}",
            stats_served,
            timeout=STATS_WAIT,
            interval=1,
        )
        assert node_admin.journal(method="NodeGetVolumeHealth") == []
    pod = kube.get(Pod, "app", namespace=namespace)
    assert pod.status is not None and not pod.status.volumeHealth, pod.status
