"""Volume limits: NodeGetInfo's max_volumes_per_node becomes the CSINode allocatable
count, and the scheduler places no more volumes on a node than that."""

from __future__ import annotations

import pytest

from csi_harness import (
    MAX_VOLUME_COUNT,
    CSINodeResource,
    csinode_drivers,
    objects,
    wait_pod_scheduled,
    wait_pod_unschedulable,
)


def pod_with_claim(kube, namespace, driver, name, node) -> None:
    objects.create(
        kube,
        objects.claim(name, namespace, "1Gi", driver.spec.storage_class()),
        objects.pod(name, namespace, claims=[name], nodes=[node]),
    )


@pytest.mark.driver(max_volumes_per_node=2)
def test_the_limit_is_the_csinode_count_and_the_third_pod_waits(
    kube, namespace, driver, scheduling_node
):
    counts = {
        csinode.metadata.name: (entry.get("allocatable") or {}).get("count")
        for csinode in kube.list(CSINodeResource)
        for entry in csinode_drivers(csinode)
        if entry["name"] == driver.spec.name
    }
    assert counts == {node.name: 2 for node in driver.nodes}
    for name in ("first", "second"):
        pod_with_claim(kube, namespace, driver, name, scheduling_node)
        assert wait_pod_scheduled(kube, name, namespace) == scheduling_node
    pod_with_claim(kube, namespace, driver, "third", scheduling_node)
    assert MAX_VOLUME_COUNT in wait_pod_unschedulable(kube, "third", namespace)
