"""Capacity scoring in depth (issue 31, item 4): how kube-scheduler's VolumeBinding
score (StorageCapacityScoring) combines a pod's claims, which drivers' capacity it
reads, what it reads for a pool several nodes share, and two shapes in one scheduler.

What kube-scheduler 1.37 computes (pkg/scheduler/framework/plugins/volumebinding,
``VolumeBinding.Score`` and ``scorer.go``), per node and per storage class of the
pod's claims to provision: utilization = 100 x the class's requested bytes (summed
over its claims) // the capacity of the CSIStorageCapacity that let the node pass;
the shape maps utilization to a score (the default: 100 at 0 %, 0 at 100 %, so
100 - utilization); the node's score is the mean over the classes, rounded. A claim
of a driver whose CSIDriver has ``storageCapacity`` false is not checked against any
CSIStorageCapacity, so its class is left out. The comments give each node's score
by that rule.

As in ``test_capacity_scoring.py`` the candidates are alike nodes (on the local
provider its simulated ones), and each test's pods are scheduled by a kube-scheduler
of the test's own (``own_scheduler``). Its profiles score with VolumeBinding and
NodeAffinity alone (``capacity_scoring_profile(against_preference=True)``), so other
tests' pods on the candidates (which NodeResourcesFit would weigh) do not count and
the suite runs beside the others. A pod placed to prepare a later one is still
deleted once scheduled; only its claim stays. Before each pod the test waits until
its scheduler has seen the capacity published so far (``ScoringScheduler.catch_up``):
a scheduler scores from its cache, which may lag the API server the test reads (once
on kind, a pod was placed by the capacity of the step before).

Each decisive pod prefers the node that capacity must beat (``leaning_to``): the
preference is worth 100 points, VolumeBinding's score 20 times its own, so every
capacity difference below (9 points or more) outweighs it, and with VolumeBinding's
score off (``CSI_HARNESS_SCORING_OFF``) the preference decides and every test fails,
each time: none can pass by a tie-break.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from csi_harness import (
    Cluster,
    Driver,
    DriverDeployment,
    Unsupported,
    empty_namespace,
    objects,
    scheduling_nodes,
    wait_capacity,
    wait_for,
    wait_pod_scheduled,
)
from csi_harness._internal.deploy.spec import node_pool_name
from csi_harness._internal.kube.scheduler_config import PACKING_SHAPE
from tests.e2e.conftest import ScoringScheduler

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

GI = 1 << 30
FEATURE = "capacity scoring: depth"
ZONE_POOLS_ONLY = pytest.mark.driver(node_pool_size=None, zone_pool_size="10Gi")
OwnScheduler = Callable[..., list[ScoringScheduler]]


@pytest.fixture
def scheduler(own_scheduler: OwnScheduler) -> ScoringScheduler:
    """A scheduler of the test's own whose one profile weighs VolumeBinding's score, in
    the default shape, against the pod's preferred node alone."""
    (profile,) = own_scheduler(None, against_preference=True)
    return profile


# -- helpers -------------------------------------------------------------------------


def nodes_with_controller_pods(kube: Client, driver: Driver) -> set[str]:
    """Nodes running a pod of the driver that is not one of its per-node DaemonSet
    pods (an in-cluster controller or sidecar): resource scoring counts those too."""
    busy = set()
    for pod in kube.list(Pod, namespace=driver.spec.namespace):
        owners = (pod.metadata.ownerReferences if pod.metadata else None) or []
        if pod.spec and pod.spec.nodeName and not any(o.kind == "DaemonSet" for o in owners):
            busy.add(str(pod.spec.nodeName))
    return busy


def alike_nodes(kube: Client, *drivers: Driver) -> list[str]:
    """The scheduling nodes (sorted by name) that host none of the drivers' controllers."""
    busy = set().union(*(nodes_with_controller_pods(kube, d) for d in drivers))
    return [n.name for n in scheduling_nodes(drivers[0].nodes) if n.name not in busy]


def two_candidates(kube: Client, *drivers: Driver) -> tuple[str, str]:
    """Two alike nodes the pods are pinned to, or the test is skipped."""
    names = alike_nodes(kube, *drivers)
    if len(names) < 2:
        pytest.skip(f"needs 2 alike scheduling nodes without driver controllers; has {names}")
    return names[0], names[1]


def resize_node_pools(kube: Client, driver: Driver, sizes: Mapping[str, int]) -> None:
    """Give each node's own pool its size in bytes and wait until it is published for
    the driver's default class (capacity and maximumVolumeSize alike)."""
    with driver.admin() as admin:
        for node, size in sizes.items():
            admin.resize_pool(node_pool_name(node), size)
    wait_published(kube, driver, sizes)


def wait_published(kube: Client, driver: Driver, free: Mapping[str, int]) -> None:
    """Wait until each node's CSIStorageCapacity of the driver's default class has the
    given capacity and maximumVolumeSize (one pool behind each)."""
    published = {(node, driver.spec.storage_class()): size for node, size in free.items()}
    wait_capacity(kube, driver.spec, published, maximum=published)


def zonal_candidates(kube: Client, driver: Driver) -> tuple[str, str, str]:
    """(shared, lone, neighbour): two alike nodes in different zones, and another
    node (of any kind) in the zone of the first; or the test is skipped."""
    alike = alike_nodes(kube, driver)
    zone_of = {node.name: node.zone for node in driver.nodes}
    for shared in alike:
        zone = zone_of[shared]
        neighbours = [n for n, z in zone_of.items() if z == zone and n != shared]
        lone = [n for n in alike if zone_of[n] not in (None, zone)]
        if zone is not None and neighbours and lone:
            return shared, lone[0], neighbours[0]
    layout = {node.name: node.zone for node in driver.nodes}
    pytest.skip(
        f"needs two alike nodes in two zones, one with a neighbour in its zone; has {layout}"
    )


def resize_zone_pools(driver: Driver, sizes: Mapping[str, int]) -> None:
    """Give each zone's shared pool (the pool whose segment is the zone) its size in bytes."""
    with driver.admin() as admin:
        by_segment = {tuple(sorted(p.segment.items())): p.name for p in admin.pools()}
        for zone, size in sizes.items():
            admin.resize_pool(by_segment[((driver.spec.zone_topology_key, zone),)], size)


def node_chosen_for(
    kube: Client,
    namespace: str,
    pod: str,
    claims: Sequence[str],
    nodes: Sequence[str],
    scheduler: ScoringScheduler,
    *,
    leaning_to: str | None = None,
) -> str:
    """The node ``scheduler`` binds a new pod with ``claims`` (pinned to ``nodes``,
    preferring ``leaning_to``) to, once it has seen the capacity published so far. The
    pod is deleted once scheduled; its claims and their volumes stay."""
    scheduler.catch_up(namespace, nodes[0])
    manifest = objects.pod(
        pod, namespace, claims=list(claims), nodes=list(nodes), preferred_node=leaning_to
    )
    manifest["spec"]["schedulerName"] = scheduler.name
    objects.create(kube, manifest)
    node = wait_pod_scheduled(kube, pod, namespace, timeout=90)
    kube.delete(Pod, pod, namespace=namespace, grace_period=0)
    wait_for(
        f"pod {namespace}/{pod} to be deleted",
        lambda: objects.gone(kube, Pod, pod, namespace=namespace),
        timeout=60,
    )
    return node


def create_claims(kube: Client, namespace: str, *claims: tuple[str, str, str]) -> None:
    """Create (name, size, storage class) claims."""
    objects.create(kube, *(objects.claim(n, namespace, s, c) for n, s, c in claims))


@pytest.fixture
def deploy_second_driver(
    cluster: Cluster, kube: Client, driver: Driver, namespace: str
) -> Iterator[Callable[..., Driver]]:
    """Deploys another csi-mock beside the test's driver (a name, StorageClasses and
    namespace of its own; ``**fields`` of ``DriverDeployment``). Afterwards the test
    namespace's pods and claims are deleted while it still runs to delete its
    volumes, then it is removed."""
    if not cluster.concurrent_drivers:
        pytest.skip(f"cluster {cluster.name!r} runs one driver at a time")
    deployed: list[Driver] = []

    def deploy(**fields: Any) -> Driver:
        tag = "s" + secrets.token_hex(3)
        spec = cluster.default_driver.model_dump()
        spec.update(fields, name=f"{tag}.csi-mock", suffix=f"-{tag}")
        try:
            second = cluster.deploy_driver(DriverDeployment.model_validate(spec))
        except Unsupported as unsupported:
            pytest.skip(str(unsupported))
        deployed.append(second)
        return second

    yield deploy
    try:
        empty_namespace(kube, namespace)
    finally:
        for second in deployed:
            cluster.remove_driver(second)


# -- tests ---------------------------------------------------------------------------


@pytest.mark.scenario(
    FEATURE, "claims in two classes: the mean of the class scores picks the node, not one claim"
)
def test_the_node_score_is_the_mean_of_the_scores_of_the_pods_storage_classes(
    kube: Client,
    driver: Driver,
    deploy_second_driver: Callable[..., Driver],
    namespace: str,
    scheduler: ScoringScheduler,
) -> None:
    other = deploy_second_driver()
    first, second = two_candidates(kube, driver, other)
    resize_node_pools(kube, driver, {first: 40 * GI, second: 20 * GI})
    resize_node_pools(kube, other, {first: 10 * GI, second: 40 * GI})
    ours, theirs = driver.spec.storage_class(), other.spec.storage_class()
    candidates = (first, second)

    # One claim of our class alone: 4/40 -> 90 on first, 4/20 -> 80 on second.
    create_claims(kube, namespace, ("alone", "4Gi", ours))
    assert (
        node_chosen_for(
            kube, namespace, "alone", ["alone"], candidates, scheduler, leaning_to=second
        )
        == first
    )
    wait_published(kube, driver, {first: 36 * GI})

    # The same claim with two of the other class (their requests add up, 6Gi): on
    # first ours 4/36 -> 89, theirs 6/10 -> 40, mean 64.5 -> 65; on second ours
    # 4/20 -> 80, theirs 6/40 -> 85, mean 82.5 -> 83.
    create_claims(
        kube,
        namespace,
        ("ours", "4Gi", ours),
        ("theirs-1", "3Gi", theirs),
        ("theirs-2", "3Gi", theirs),
    )
    claims = ["ours", "theirs-1", "theirs-2"]
    assert (
        node_chosen_for(kube, namespace, "mixed", claims, candidates, scheduler, leaning_to=first)
        == second
    )


@ZONE_POOLS_ONLY
@pytest.mark.scenario(
    FEATURE, "zone pools: the zone with more free capacity wins, whichever node of it used it"
)
def test_a_pool_shared_by_a_zone_scores_by_what_all_its_nodes_left_free(
    kube: Client, namespace: str, driver: Driver, scheduler: ScoringScheduler
) -> None:
    shared, lone, neighbour = zonal_candidates(kube, driver)
    zone_of = {node.name: node.zone for node in driver.nodes}
    resize_zone_pools(driver, {str(zone_of[shared]): 30 * GI, str(zone_of[lone]): 20 * GI})
    wait_published(kube, driver, {shared: 30 * GI, neighbour: 30 * GI, lone: 20 * GI})
    cls = driver.spec.storage_class()
    candidates = (shared, lone)

    # 5/30 -> 84 in the larger zone, 5/20 -> 75 in the other.
    create_claims(kube, namespace, ("first", "5Gi", cls))
    assert (
        node_chosen_for(kube, namespace, "first", ["first"], candidates, scheduler, leaning_to=lone)
        == shared
    )
    wait_published(kube, driver, {shared: 25 * GI, neighbour: 25 * GI})

    # A volume for the other node of the zone comes from the same pool, and every
    # node of the zone publishes what is left.
    create_claims(kube, namespace, ("neighbours", "15Gi", cls))
    assert (
        node_chosen_for(kube, namespace, "neighbours", ["neighbours"], [neighbour], scheduler)
        == neighbour
    )
    wait_published(kube, driver, {shared: 10 * GI, neighbour: 10 * GI, lone: 20 * GI})

    # 5/10 -> 50 in the larger zone now, 5/20 -> 75 in the other.
    create_claims(kube, namespace, ("next", "5Gi", cls))
    assert (
        node_chosen_for(kube, namespace, "next", ["next"], candidates, scheduler, leaning_to=shared)
        == lone
    )


@pytest.mark.scenario(
    FEATURE, "two drivers, one with storageCapacity off: only the tracking one's capacity weighs"
)
def test_only_the_capacity_of_the_driver_that_tracks_it_weighs_in_the_score(
    kube: Client,
    driver: Driver,
    deploy_second_driver: Callable[..., Driver],
    namespace: str,
    scheduler: ScoringScheduler,
) -> None:
    untracked = deploy_second_driver(storage_capacity=False)
    first, second = two_candidates(kube, driver, untracked)
    resize_node_pools(kube, driver, {first: 20 * GI, second: 30 * GI})
    # Published all the same: the scheduler has them, and must not read them.
    resize_node_pools(kube, untracked, {first: 60 * GI, second: 6 * GI})
    create_claims(
        kube,
        namespace,
        ("tracked", "5Gi", driver.spec.storage_class()),
        ("untracked", "5Gi", untracked.spec.storage_class()),
    )

    # Ours alone: 5/20 -> 75 on first, 5/30 -> 84 on second. Were the untracked
    # driver's capacity read, first would score (75 + 92) / 2 -> 84 and second
    # (84 + 17) / 2 -> 51.
    claims = ["tracked", "untracked"]
    assert (
        node_chosen_for(
            kube, namespace, "both", claims, (first, second), scheduler, leaning_to=first
        )
        == second
    )


@pytest.mark.scenario(
    FEATURE, "two scheduler profiles: the default shape and a packing one side by side"
)
def test_a_packing_profile_and_the_default_profile_score_the_same_pools_each_their_way(
    kube: Client, namespace: str, driver: Driver, own_scheduler: OwnScheduler
) -> None:
    default, packing = own_scheduler(None, PACKING_SHAPE, against_preference=True)
    roomy, tight = two_candidates(kube, driver)
    resize_node_pools(kube, driver, {roomy: 30 * GI, tight: 6 * GI})
    cls = driver.spec.storage_class()
    create_claims(kube, namespace, ("spread", "5Gi", cls), ("packed", "5Gi", cls))
    candidates = (roomy, tight)

    # The default shape: 5/30 -> 84 on roomy, 5/6 -> 17 on tight.
    assert (
        node_chosen_for(
            kube, namespace, "spread", ["spread"], candidates, default, leaning_to=tight
        )
        == roomy
    )
    wait_published(kube, driver, {roomy: 25 * GI})
    # The packing shape (score = utilization) of the other profile, in the same
    # scheduler: 5/25 -> 20 on roomy, 5/6 -> 83 on tight.
    assert (
        node_chosen_for(
            kube, namespace, "packed", ["packed"], candidates, packing, leaning_to=roomy
        )
        == tight
    )
