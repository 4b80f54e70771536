"""A kubelet restart while a pod uses a claim that is being deleted: the claim stays
Terminating (kubernetes.io/pvc-protection holds it for the pod), and the restarted
kubelet, rebuilding its desired state from the API server, keeps the pod's volume
mounted: no NodeUnpublishVolume, the pod keeps running. (A kubelet that refused the
terminating claim while rebuilding would unmount the volume of a running pod.)

The suite is ``cluster_wide``: it restarts the one real kubelet, which every other
test's running pods depend on. ``real_nodes_only`` tests still run beside it (see
docs/harness.md); a restart only delays what their kubelet does.
"""

from __future__ import annotations

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_for, wait_pod_running
from csi_harness._internal.providers.base import Cluster, Driver, Unsupported, kubelet_restarts
from tests.e2e.conftest import node_calls

pytestmark = [pytest.mark.e2e, pytest.mark.cluster_wide, pytest.mark.disrupts_nodes]

FEATURE = "kubelet restart"
UNPUBLISH = "NodeUnpublishVolume"


def run_pod_with_claim(kube: Client, driver: Driver, namespace: str, name: str, node: str) -> str:
    """A claim and a pod ``name`` using it on ``node``, running; returns the volume
    handle."""
    objects.create(
        kube,
        objects.claim(name, namespace, "1Gi", driver.spec.storage_class()),
        objects.pod(name, namespace, claims=[name], nodes=[node]),
    )
    wait_pod_running(kube, name, namespace)
    pv = wait_bound_volume(kube, name, namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    return str(pv.spec.csi.volumeHandle)


@pytest.mark.driver()
@pytest.mark.upstream(
    "csi_kubelet_restart.go",
    "should not umount volume when the pvc is terminating but still used by a running pod",
)
@pytest.mark.scenario(
    FEATURE, "claim Terminating, still used by a running pod: the restarted kubelet keeps it"
)
def test_restarted_kubelet_keeps_the_volume_of_a_terminating_claim_a_running_pod_uses(
    kube: Client, cluster: Cluster, namespace: str, driver: Driver, pod_node: str
) -> None:
    volume = run_pod_with_claim(kube, driver, namespace, "app", pod_node)
    # A second pod, deleted after the restart: its NodeUnpublishVolume shows that the
    # restarted kubelet has unmounted what it no longer wants. It does that only once
    # it has rebuilt its desired state from every pod, in the same pass that would
    # unmount the first pod's volume had the rebuilt state left it out.
    marker = run_pod_with_claim(kube, driver, namespace, "marker", pod_node)
    uid = kube.get(Pod, "app", namespace=namespace).metadata.uid  # type: ignore[union-attr]

    kube.delete(PersistentVolumeClaim, "app", namespace=namespace)
    try:
        kubelet_restarts(cluster).restart_kubelet(pod_node)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    claim = kube.get(PersistentVolumeClaim, "app", namespace=namespace)
    assert claim.metadata is not None and claim.metadata.deletionTimestamp is not None

    kube.delete(Pod, "marker", namespace=namespace, grace_period=0)

    def marker_unpublished() -> tuple[bool, int]:
        unpublished = node_calls(driver, pod_node, UNPUBLISH, volume)
        assert not unpublished, f"{UNPUBLISH} of the running pod's volume: {unpublished}"
        return bool(node_calls(driver, pod_node, UNPUBLISH, marker)), len(unpublished)

    wait_for(f"{UNPUBLISH} of the marker pod's volume", marker_unpublished, timeout=90)
    assert node_calls(driver, pod_node, UNPUBLISH, volume) == []
    pod = wait_pod_running(kube, "app", namespace)
    assert pod.metadata is not None and pod.metadata.uid == uid
