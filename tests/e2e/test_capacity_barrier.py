"""The capacity barrier the scoring tests wait on (``CapacityBarrier``): its probe is
placed only once the scheduler has the probe's CSIStorageCapacity, which is what
lets a placement stand for "the scheduler's cache has every change made before"."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim

from csi_harness import Driver, objects, scheduling_nodes
from csi_harness._internal.kube.capacity_barrier import EVERY_NODE, PROBE_CAPACITY
from csi_harness._internal.kube.waits import SELECTED_NODE, wait_claim, wait_pod_unschedulable
from tests.e2e.conftest import ScoringScheduler

pytestmark = [pytest.mark.e2e]

NOT_ENOUGH_STORAGE = "node(s) did not have enough free storage"
"""VolumeBinding's reason (``ErrReasonNotEnoughSpace``) for a node where no
CSIStorageCapacity of the claim's class lets the claim in."""


def test_a_claim_of_the_barrier_class_is_placed_only_once_a_capacity_of_it_is_published(
    kube: Client,
    driver: Driver,
    namespace: str,
    own_scheduler: Callable[..., list[ScoringScheduler]],
) -> None:
    (scheduler,) = own_scheduler(None, against_preference=True)
    node = scheduling_nodes(driver.nodes)[0].name
    pod = objects.pod("early", namespace, claims=["early"], nodes=[node])
    pod["spec"]["schedulerName"] = scheduler.name
    objects.create(
        kube, objects.claim("early", namespace, "1Mi", scheduler.barrier.storage_class), pod
    )

    # No capacity of the class anywhere: the scheduler keeps the pod off every node.
    wait_pod_unschedulable(kube, "early", namespace, message=NOT_ENOUGH_STORAGE)
    claim = kube.get(PersistentVolumeClaim, "early", namespace=namespace)
    assert SELECTED_NODE not in ((claim.metadata and claim.metadata.annotations) or {})

    # A capacity of the class that selects every node (as a barrier's probe
    # publishes) lets it in; nothing provisions the claim, so the pod is never bound.
    objects.create(
        kube,
        objects.storage_capacity(
            namespace, scheduler.barrier.storage_class, EVERY_NODE, PROBE_CAPACITY
        ),
    )
    wait_claim(
        kube,
        "early",
        namespace,
        lambda c: ((c.metadata and c.metadata.annotations) or {}).get(SELECTED_NODE) == node,
        what=f"selected node {node}",
    )

    # The barrier's own wait, on the same scheduler, ends.
    scheduler.catch_up(namespace, node)
