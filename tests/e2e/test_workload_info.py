"""Workload information (CSIDriver.spec.podInfoOnMount) end to end: with it, the kubelet
passes the pod's name, namespace, UID and service account, and whether the volume is a
CSI inline ephemeral one, in NodePublishVolume's volume_context; without it, or without
a CSIDriver object, none of them. The driver's journal keeps whole requests
(``admin.journal_requests: whole``), so each test reads the volume_context the kubelet
sent for its own pod.

Pods run on a node with a real kubelet (the local provider's node-1).
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_pod_running
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "workload information"


POD_NAME = "csi.storage.k8s.io/pod.name"
POD_NAMESPACE = "csi.storage.k8s.io/pod.namespace"
POD_UID = "csi.storage.k8s.io/pod.uid"
SERVICE_ACCOUNT = "csi.storage.k8s.io/serviceAccount.name"
EPHEMERAL = "csi.storage.k8s.io/ephemeral"
WORKLOAD_KEYS = (POD_NAME, POD_NAMESPACE, POD_UID, SERVICE_ACCOUNT, EPHEMERAL)


def run_pod(
    kube: Client, driver: Driver, namespace: str, node: str, name: str, *, inline: bool = False
) -> Pod:
    """A running pod ``name`` on ``node`` with one volume of the driver: a claim of its
    own (same name), or a CSI inline ephemeral volume."""
    if inline:
        objects.create(
            kube,
            objects.pod(
                name, namespace, inline=[{"size": "1Gi"}], csi_driver=driver.spec.name, nodes=[node]
            ),
        )
    else:
        objects.create(
            kube,
            objects.claim(name, namespace, "1Gi", driver.spec.storage_class()),
            objects.pod(name, namespace, claims=[name], nodes=[node]),
        )
    return wait_pod_running(kube, name, namespace)


def node_publish_requests(driver: Driver, node: str, pod: Pod) -> list[dict[str, Any]]:
    """The whole NodePublishVolume requests the kubelet made for ``pod`` (their target
    paths are in the pod's directory), oldest first. A running pod's volumes are
    published, so there is at least one."""
    uid = pod.metadata.uid  # type: ignore[union-attr]
    with driver.admin(node) as node_admin:
        records = node_admin.journal(
            method="NodePublishVolume", code="OK", where={"target_path": f"*/pods/{uid}/*"}
        )
    assert records, f"no NodePublishVolume on {node} for pod {uid}"
    requests = [record.whole_request for record in records]
    assert all(r is not None for r in requests), "the journal did not keep the whole requests"
    return [r for r in requests if r is not None]


def volume_contexts(driver: Driver, node: str, pod: Pod) -> list[dict[str, str]]:
    return [dict(r.get("volume_context", {})) for r in node_publish_requests(driver, node, pod)]


def workload_info(pod: Pod, *, ephemeral: bool) -> dict[str, str]:
    """What the kubelet adds to volume_context with podInfoOnMount."""
    assert pod.metadata is not None
    return {
        POD_NAME: str(pod.metadata.name),
        POD_NAMESPACE: str(pod.metadata.namespace),
        POD_UID: str(pod.metadata.uid),
        SERVICE_ACCOUNT: "default",
        EPHEMERAL: "true" if ephemeral else "false",
    }


def assert_workload_info(driver: Driver, node: str, pod: Pod, *, ephemeral: bool = False) -> None:
    expected = workload_info(pod, ephemeral=ephemeral)
    for context in volume_contexts(driver, node, pod):
        assert {key: context.get(key) for key in expected} == expected, context


def assert_no_workload_info(driver: Driver, node: str, pod: Pod) -> None:
    for context in volume_contexts(driver, node, pod):
        assert [key for key in WORKLOAD_KEYS if key in context] == [], context


def set_pod_info_on_mount(kube: Client, driver: Driver, value: bool) -> None:
    """Patch the running driver's CSIDriver (podInfoOnMount may change; the kubelet
    reads it from its informer at every mount)."""
    kube.patch(
        CSIDriver, driver.spec.name, {"spec": {"podInfoOnMount": value}}, patch_type=PatchType.MERGE
    )
    spec = kube.get(CSIDriver, driver.spec.name).spec
    assert spec is not None and spec.podInfoOnMount is value, spec


@pytest.mark.driver(pod_info_on_mount=True, journal_requests="whole")
@pytest.mark.upstream("csi_workload.go", "should be passed when podInfoOnMount=true")
@pytest.mark.scenario(FEATURE, "podInfoOnMount true: the pod in NodePublishVolume's context")
def test_pod_info_on_mount_passes_the_pod_to_node_publish(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    assert_workload_info(driver, pod_node, pod, ephemeral=False)


@pytest.mark.driver(pod_info_on_mount=True, journal_requests="whole")
@pytest.mark.upstream("csi_workload.go", "contain ephemeral=true when using inline volume")
@pytest.mark.scenario(FEATURE, "podInfoOnMount true, CSI inline volume: ephemeral=true too")
def test_pod_info_on_mount_marks_an_inline_volume_ephemeral(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    pod = run_pod(kube, driver, namespace, pod_node, "app", inline=True)
    assert_workload_info(driver, pod_node, pod, ephemeral=True)


@pytest.mark.driver(pod_info_on_mount=False, journal_requests="whole")
@pytest.mark.upstream("csi_workload.go", "should not be passed when podInfoOnMount=false")
@pytest.mark.scenario(FEATURE, "podInfoOnMount false: no pod in NodePublishVolume's context")
def test_without_pod_info_on_mount_node_publish_has_no_pod(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    assert_no_workload_info(driver, pod_node, pod)


@pytest.mark.driver(csidriver=False, journal_requests="whole")
@pytest.mark.upstream("csi_workload.go", "should not be passed when CSIDriver does not exist")
@pytest.mark.scenario(FEATURE, "no CSIDriver object: no pod in NodePublishVolume's context")
def test_without_a_csidriver_object_node_publish_has_no_pod(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    # Without a CSIDriver attach is required: external-attacher marks the
    # VolumeAttachment attached (csi-mock does not advertise PUBLISH_UNPUBLISH).
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    assert_no_workload_info(driver, pod_node, pod)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            True,
            False,
            marks=[
                pytest.mark.driver(pod_info_on_mount=True, journal_requests="whole"),
                pytest.mark.upstream(
                    "csi_workload.go", "should not be passed when update from true to false"
                ),
            ],
            id="true-to-false",
        ),
        pytest.param(
            False,
            True,
            marks=[
                pytest.mark.driver(pod_info_on_mount=False, journal_requests="whole"),
                pytest.mark.upstream(
                    "csi_workload.go", "should be passed when update from false to true"
                ),
            ],
            id="false-to-true",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "podInfoOnMount changed on a running driver: the next pod sees it")
def test_pod_info_on_mount_change_applies_to_the_next_mount(
    kube: Client, namespace: str, driver: Driver, pod_node: str, before: bool, after: bool
) -> None:
    first = run_pod(kube, driver, namespace, pod_node, "first")
    (assert_workload_info if before else assert_no_workload_info)(driver, pod_node, first)

    # The kubelet's CSIDriver informer sees the patch within milliseconds; the next pod
    # reaches its mount only after scheduling and provisioning (upstream retries here).
    set_pod_info_on_mount(kube, driver, after)
    second = run_pod(kube, driver, namespace, pod_node, "second")
    (assert_workload_info if after else assert_no_workload_info)(driver, pod_node, second)
