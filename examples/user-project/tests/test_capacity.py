"""Storage capacity tracking: a claim larger than every node's pool keeps its pod off
every node; one that fits is provisioned where the scheduler put the pod."""

from __future__ import annotations

import pytest
from harness import FITS_A_POOL, LARGER_THAN_A_POOL, POOL_SIZE

from csi_harness import (
    NOT_ENOUGH_STORAGE,
    Driver,
    objects,
    wait_bound_volume,
    wait_pod_running,
    wait_pod_unschedulable,
)


@pytest.mark.driver(node_pool_size=POOL_SIZE)
def test_a_claim_larger_than_every_pool_keeps_its_pod_pending(kube, namespace, driver: Driver):
    objects.create(
        kube,
        objects.claim("big", namespace, LARGER_THAN_A_POOL, driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["big"]),
    )
    message = wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    assert f"{len(driver.nodes)} node(s) {NOT_ENOUGH_STORAGE}" in message


@pytest.mark.driver(node_pool_size=POOL_SIZE)
def test_a_claim_that_fits_is_provisioned_on_the_pods_node(
    kube, namespace, driver, admin, pod_node
):
    objects.create(
        kube,
        objects.claim("small", namespace, FITS_A_POOL, driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["small"], nodes=[pod_node]),
    )
    wait_pod_running(kube, "app", namespace, timeout=120)
    volume = wait_bound_volume(kube, "small", namespace)
    (created,) = [v for v in admin.volumes().volumes if v.id == volume.spec.csi.volumeHandle]
    assert pod_node in created.segment.values()
