"""fsGroup as a mount option end to end: when the driver advertises VOLUME_MOUNT_GROUP,
the kubelet leaves the pod's fsGroup to it, in NodeStageVolume's and NodePublishVolume's
``volume_capability.mount.volume_mount_group``; when it does not, both leave the field
empty (the kubelet then applies the fsGroup itself).

The node's csi-mock instance journals whole requests, which show the field. The pod
runs on the node with a real kubelet.
"""

from __future__ import annotations

import random

import pytest
from lightkube import Client

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_pod_running
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "fsGroup as mount option"
FILE = "csi_fsgroup_mount.go"


def mount_groups(driver: Driver, node: str, method: str, volume_id: str) -> list[str]:
    """``volume_mount_group`` of every successful ``method`` call of the volume on
    ``node`` ("" where the request left it out)."""
    with driver.admin(node) as node_admin:
        records = node_admin.journal(method=method, volume=volume_id, code="OK")
    groups = []
    for record in records:
        assert record.whole_request is not None, record
        mount = record.whole_request.get("volume_capability", {}).get("mount", {})
        groups.append(mount.get("volume_mount_group", ""))
    return groups


@pytest.mark.parametrize(
    "mount_group",
    [
        pytest.param(
            True,
            marks=[
                pytest.mark.driver(volume_mount_group=True, journal_requests="whole"),
                pytest.mark.upstream(
                    FILE,
                    "should pass FSGroup to CSI driver if it is set in pod and driver supports"
                    " VOLUME_MOUNT_GROUP",
                ),
            ],
            id="volume-mount-group",
        ),
        pytest.param(
            False,
            marks=[
                pytest.mark.driver(volume_mount_group=False, journal_requests="whole"),
                pytest.mark.upstream(
                    FILE,
                    "should not pass FSGroup to CSI driver if it is set in pod and driver"
                    " supports VOLUME_MOUNT_GROUP",
                ),
            ],
            id="no-volume-mount-group",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "the pod's fsGroup reaches the driver only with VOLUME_MOUNT_GROUP")
def test_the_pods_fs_group_reaches_stage_and_publish_only_with_volume_mount_group(
    kube: Client, namespace: str, driver: Driver, pod_node: str, mount_group: bool
) -> None:
    fs_group = random.randrange(1024, 21024)
    pod = objects.pod("app", namespace, claims=["data"], nodes=[pod_node])
    pod["spec"]["securityContext"] = {"fsGroup": fs_group}
    objects.create(kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class()), pod)
    wait_pod_running(kube, "app", namespace, timeout=120)
    pv = wait_bound_volume(kube, "data", namespace)
    assert pv.spec is not None and pv.spec.csi is not None
    volume_id = pv.spec.csi.volumeHandle

    expected = str(fs_group) if mount_group else ""
    for method in ("NodeStageVolume", "NodePublishVolume"):
        groups = mount_groups(driver, pod_node, method, volume_id)
        assert groups, f"no successful {method} of {volume_id} on {pod_node}"
        assert set(groups) == {expected}, f"{method}: {groups}"
