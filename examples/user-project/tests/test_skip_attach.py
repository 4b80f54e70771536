"""Skip attach: with CSIDriver.attachRequired false no VolumeAttachment exists and
ControllerPublishVolume is never called; with true, both happen."""

from __future__ import annotations

import pytest

from csi_harness import (
    objects,
    volume_attachments,
    wait_bound_volume,
    wait_pod_running,
    wait_volume_attachment,
)


def run_pod(kube, namespace, driver, node) -> str:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_running(kube, "app", namespace, timeout=120)
    return wait_bound_volume(kube, "data", namespace).metadata.name


def test_attach_not_required_means_no_volume_attachment(kube, namespace, driver, admin, pod_node):
    pv = run_pod(kube, namespace, driver, pod_node)
    assert volume_attachments(kube, pv) == []
    assert admin.journal(method="ControllerPublishVolume") == []


@pytest.mark.driver(attach_required=True)
def test_attach_required_attaches_before_the_pod_runs(kube, namespace, driver, admin, pod_node):
    pv = run_pod(kube, namespace, driver, pod_node)
    assert wait_volume_attachment(kube, pv, attached=True).spec.nodeName == pod_node
    published = admin.journal(method="ControllerPublishVolume")
    assert {r.request.get("node_id") for r in published} == {pod_node}
