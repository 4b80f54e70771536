"""Capacity scoring (KEP-1845's successor, KEP-4049 StorageCapacityScoring): the
scheduler's VolumeBinding plugin scores nodes by how much of their published
capacity a pod's new volumes would use, through a configurable shape.

The two candidates come from ``scheduling_nodes`` (on the local provider its
simulated nodes), which are alike, so no other score plugin tells them apart; only
their pools differ. Their pools are resized through the admin API before a pod comes.

Each test's pods are scheduled by a kube-scheduler of the test's own
(``own_scheduler``), so no test restarts the cluster's, and every test runs beside the
others. The two upstream cases keep upstream's setting, the default plugins and
weights, under which another test's pod on a candidate changes its NodeResourcesFit
and BalancedAllocation scores (a pod without requests counts as 100m CPU and 200MB):
about 5 points a pod on a 2-CPU node. Their pools are sized so that capacity decides by
far more (``DECISIVE``: 81 points of VolumeBinding's score), as no other plugin's
score differs between the candidates unless more than a dozen such pods pile onto one
of them. The inverted shape's scheduler weighs VolumeBinding against the pod's
preferred node alone (``capacity_scoring_profile(against_preference=True)``).

Each test's scheduler starts once the resized pools are published, so its first list
of CSIStorageCapacity has them. Started before, it learnt them from its watch, which
nothing orders against the test's pod: the likeliest cause of one failure on kind with
six workers, where the pod was placed as if capacity did not count (docs/benchmarks.md).
A scheduler's cache may still lag later changes, so before each pod the test also
waits until the scheduler has seen the capacity published so far
(``ScoringScheduler.catch_up``).

With scoring off (``CSI_HARNESS_SCORING_OFF``, tests/e2e/conftest.py), the inverted
shape fails every time: its pod prefers the node that capacity must beat, and the
preference then decides. The default-shape cases keep upstream's default plugins and
weights, under which a preference (NodeAffinity, weight 2) would outweigh any capacity
score, so they run in both orders (``ORDERS``) instead: with scoring off the two
candidates tie, kube-scheduler takes the first feasible node in an order its parallel
filter mixes (docs/findings.md), and each decisive placement fails about half the
time; each of these cases has failed in some runs with scoring off, none in all.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.deploy.incluster_layout import COMPONENT_LABEL
from csi_harness._internal.deploy.spec import node_pool_name
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.scheduler_config import PACKING_SHAPE
from csi_harness._internal.kube.waits import SELECTED_NODE, wait_capacity, wait_for
from csi_harness._internal.providers.base import (
    Driver,
    Unsupported,
    pick_nodes,
    scheduling_nodes,
)
from csi_mock.admin.client import AdminClient
from tests.e2e.conftest import ScoringScheduler, wait_pod_placed

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

GI = 1 << 30
FEATURE = "capacity scoring"
DECISIVE = {"roomy": 100 * GI, "smaller": 10 * GI, "claim": "9Gi"}
"""Pools and claim of the default-shape cases: the claim uses 9% of the roomy pool
(score 91) and 90% of the smaller (score 10) under the default shape."""
ORDERS = pytest.mark.parametrize("roomy_first", [False, True], ids=["roomy-2nd", "roomy-1st"])
"""The default-shape cases with the roomy node second by name, and first."""


def roomy_then_smaller(candidates: tuple[str, str], roomy_first: bool) -> tuple[str, str]:
    first, second = candidates
    return (first, second) if roomy_first else (second, first)


def nodes_with_driver_controllers(kube: Client, driver: Driver) -> set[str]:
    """Nodes that run a pod of the driver other than its node plugin (an in-cluster
    controller or sidecar): the scheduler's resource scoring counts those pods too."""
    return {
        str(pod.spec.nodeName)
        for pod in kube.list(Pod, namespace=driver.spec.namespace)
        if pod.spec is not None
        and pod.spec.nodeName
        and ((pod.metadata.labels if pod.metadata else None) or {}).get(COMPONENT_LABEL) != "node"
    }


@pytest.fixture
def candidates(kube: Client, driver: Driver) -> tuple[str, str]:
    """Two alike nodes the pods are pinned to (sorted by name): none of them hosts the
    driver's controller pods."""
    busy = nodes_with_driver_controllers(kube, driver)
    alike = [n for n in scheduling_nodes(driver.nodes) if n.name not in busy]
    try:
        first, second = pick_nodes(alike, 2)
    except Unsupported as unsupported:
        pytest.skip(f"{unsupported} (besides those running the driver's controller)")
    return first.name, second.name


def resize_pools(kube: Client, driver: Driver, admin: AdminClient, sizes: dict[str, int]) -> None:
    """Give each node's pool its size in bytes, and wait until that is published."""
    for node, size in sizes.items():
        admin.resize_pool(node_pool_name(node), size)
    striped = driver.spec.storage_class()
    published = {(node, striped): size for node, size in sizes.items()}
    wait_capacity(kube, driver.spec, published, maximum=published)


def place(
    kube: Client,
    driver: Driver,
    namespace: str,
    name: str,
    size: str,
    nodes: tuple[str, str],
    scheduler: ScoringScheduler,
    *,
    leaning_to: str | None = None,
) -> str:
    """Create a claim and a pod of ``scheduler`` pinned to ``nodes`` (preferring
    ``leaning_to``, against which a profile ``against_preference`` weighs capacity), once the
    scheduler has seen the capacity published so far; return the node it landed on,
    once the pod runs there where the node has a real kubelet and the claim's
    selected-node names it (as upstream checks)."""
    scheduler.catch_up(namespace, nodes[0])
    pod = objects.pod(name, namespace, claims=[name], nodes=list(nodes), preferred_node=leaning_to)
    pod["spec"]["schedulerName"] = scheduler.name
    objects.create(kube, objects.claim(name, namespace, size, driver.spec.storage_class()), pod)
    node = wait_pod_placed(kube, driver, name, namespace)
    claim = kube.get(PersistentVolumeClaim, name, namespace=namespace)
    assert (claim.metadata.annotations or {}).get(SELECTED_NODE) == node  # type: ignore[union-attr]
    return node


@pytest.mark.upstream(
    "csi_storage_capacity_scoring.go",
    "should prefer a node with the largest available space by default",
)
# Upstream's "when configured" case configures nothing beyond the default shape: it is
# this test with other pool sizes.
@pytest.mark.upstream(
    "csi_storage_capacity_scoring.go",
    "should prefer a node with the maximum allocatable when configured",
)
@pytest.mark.scenario(FEATURE, "default shape: the node with the most free capacity wins")
@ORDERS
def test_default_shape_places_the_pod_on_the_node_with_most_free_capacity(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    candidates: tuple[str, str],
    own_scheduler: Callable[..., list[ScoringScheduler]],
    roomy_first: bool,
) -> None:
    roomy, smaller = roomy_then_smaller(candidates, roomy_first)
    resize_pools(kube, driver, admin, {roomy: DECISIVE["roomy"], smaller: DECISIVE["smaller"]})
    (scheduler,) = own_scheduler(None, against_preference=False)
    assert place(kube, driver, namespace, "data", DECISIVE["claim"], candidates, scheduler) == roomy


def delete_and_wait(kube: Client, resource: type, name: str, namespace: str) -> None:
    """Delete a namespaced object and wait until it is gone (finalizers done)."""
    kube.delete(resource, name, namespace=namespace, grace_period=0)
    wait_for(
        f"{resource.__name__} {namespace}/{name} to be deleted",
        lambda: objects.gone(kube, resource, name, namespace=namespace),
        timeout=60,
    )


@pytest.mark.upstream(
    "csi_storage_capacity_scoring.go",
    "should schedule the recreated pod to the same expected node",
)
@pytest.mark.scenario(FEATURE, "a pod and claim deleted and created again land on the same node")
@ORDERS
def test_recreated_pod_and_claim_land_on_the_node_with_most_free_capacity_again(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    candidates: tuple[str, str],
    own_scheduler: Callable[..., list[ScoringScheduler]],
    roomy_first: bool,
) -> None:
    roomy, smaller = roomy_then_smaller(candidates, roomy_first)
    striped = driver.spec.storage_class()
    sizes = {roomy: DECISIVE["roomy"], smaller: DECISIVE["smaller"]}
    resize_pools(kube, driver, admin, sizes)
    (scheduler,) = own_scheduler(None, against_preference=False)
    assert place(kube, driver, namespace, "data", DECISIVE["claim"], candidates, scheduler) == roomy
    delete_and_wait(kube, Pod, "data", namespace)
    delete_and_wait(kube, PersistentVolumeClaim, "data", namespace)
    # The volume is deleted too (reclaim policy Delete): the roomy node is back at its
    # size, as the first pod found it.
    wait_capacity(kube, driver.spec, {(node, striped): size for node, size in sizes.items()})
    assert place(kube, driver, namespace, "data", DECISIVE["claim"], candidates, scheduler) == roomy


@pytest.mark.scenario(FEATURE, "inverted shape: the fullest node that still fits wins")
def test_inverted_shape_places_the_pod_on_the_fullest_node_that_still_fits(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    candidates: tuple[str, str],
    own_scheduler: Callable[..., list[ScoringScheduler]],
) -> None:
    # Higher utilization of the published capacity scores higher: fill the fullest
    # node that still fits. VolumeBinding scores against the pod's preference alone,
    # so other tests' pods on the candidates do not count.
    roomy, tight = candidates
    resize_pools(kube, driver, admin, {roomy: 30 * GI, tight: 6 * GI})
    (scheduler,) = own_scheduler(PACKING_SHAPE, against_preference=True)
    assert (
        place(kube, driver, namespace, "fits", "5Gi", candidates, scheduler, leaning_to=roomy)
        == tight
    )
    # The tight node now has 1Gi left: the next 5Gi claim no longer fits there.
    wait_capacity(kube, driver.spec, {(tight, driver.spec.storage_class()): 1 * GI})
    assert (
        place(kube, driver, namespace, "next", "5Gi", candidates, scheduler, leaning_to=tight)
        == roomy
    )
