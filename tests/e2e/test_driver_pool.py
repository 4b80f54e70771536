"""The driver pool: a driver handed to the next test after a reset carries nothing of
the test before it over, and a driver a test broke is never handed on.

Each test runs a pool of its own (not the session's), so what it hands out and takes
back is known: a driver is left with a fault rule, a drained pool and a changed limit,
taken back, and given out again to the same fields; the next "test" then provisions
and runs a pod on it as on a new driver. A driver whose StorageClass got a
CSIStorageCapacity from a test is not given out again. A driver asked for with another
node limit is changed to it in place, and the cluster's CSINodes show it, then back;
one asked for with another attach limit has its controller refuse attachments beyond
it, then not; one asked for with another CSIDriver storageCapacity gets it patched,
then back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.resources.storage_v1 import CSIDriver

from csi_harness._internal.deploy.incluster import InClusterDriver
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.namespaces import empty_namespace
from csi_harness._internal.kube.nodes import pick_nodes
from csi_harness._internal.kube.waits import wait_pod_running
from csi_harness._internal.providers.base import Cluster, Driver
from csi_harness._internal.pytest_plugin.driver_view import ClusterView, observe
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool
from csi_harness._internal.pytest_plugin.session import TEST_DRIVER_DOMAIN

pytestmark = [pytest.mark.e2e]

FEATURE = "driver pool"


@pytest.fixture
def pool(cluster: Cluster, kube: Client, cluster_access: None) -> Iterator[DriverPool]:
    if not cluster.concurrent_drivers:
        pytest.skip(f"cluster {cluster.name!r} runs one driver at a time: nothing is pooled")
    pool = DriverPool.for_cluster(cluster, kube, domain=TEST_DRIVER_DOMAIN)
    yield pool
    pool.close()


def fields_of(cluster: Cluster) -> dict[str, object]:
    return cluster.default_driver.model_dump()


def idle_in_pool(
    pool: DriverPool, kube: Client, fields: dict[str, object]
) -> tuple[Driver, ClusterView]:
    """A driver deployed from ``fields`` and given back to the pool unused, and what
    the cluster showed of it as deployed."""
    driver, _ = pool.acquire(fields)
    baseline = observe(kube, driver)
    pool.release(driver, test_failed=False)
    return driver, baseline


def run_pod(kube: Client, driver: Driver, namespace: str, node: str) -> None:
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", driver.spec.storage_class()),
        objects.pod("app", namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_running(kube, "app", namespace)


def leave_everything_behind(driver: Driver, node: str) -> None:
    """What a careless test leaves: a fault that fails every CreateVolume, its pod's
    node pool drained from outside CSI, and the node's volume limit at 1."""
    with driver.admin() as admin:
        admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", message="left behind")
        pool = next(
            p for p in admin.pools() if p.segment.get(driver.spec.node_topology_key) == node
        )
        admin.consume(pool.name, pool.free)
        admin.set_limits(attach_limit=1)
    with driver.admin(node) as node_admin:
        node_admin.set_limits(max_volumes_per_node=1)


@pytest.mark.scenario(FEATURE, "a reset driver carries no fault, drained pool or limit over")
def test_a_reset_driver_carries_nothing_of_the_test_before_over(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    fields = fields_of(cluster)
    first, reused = pool.acquire(fields)
    assert not reused
    node = pick_nodes(first.nodes, 1, runs_pods=True)[0].name
    baseline = observe(kube, first)
    leave_everything_behind(first, node)

    pool.release(first, test_failed=False)
    second, reused = pool.acquire(fields)

    assert reused and second is first, pool.stats
    with second.admin() as admin:
        assert admin.faults() == []
        assert all(p.external == 0 and p.free == p.total for p in admin.pools())
        assert admin.limits().attach_limit == DriverDeployment.model_validate(fields).attach_limit
        assert admin.journal(method="CreateVolume") == []
    with second.admin(node) as node_admin:
        expected = DriverDeployment.model_validate(fields).max_volumes_per_node
        assert node_admin.limits().max_volumes_per_node == expected
    assert observe(kube, second) == baseline
    namespace = "t-pool-reuse"
    kube.create(Namespace.from_dict({"metadata": {"name": namespace}}))
    try:
        run_pod(kube, second, namespace, node)
        assert kube.get(Pod, "app", namespace=namespace).spec.nodeName == node  # type: ignore[union-attr]
    finally:
        empty_namespace(kube, namespace)
        kube.delete(Namespace, namespace)
    pool.release(second, test_failed=False)
    assert pool.stats.resets == 2 and pool.stats.reused == 1 and pool.stats.deployed == 1


@pytest.mark.scenario(FEATURE, "a driver with a stopped instance or a failed test is replaced")
def test_a_driver_a_test_broke_or_failed_with_is_replaced(
    pool: DriverPool, cluster: Cluster
) -> None:
    fields = fields_of(cluster)
    broken, _ = pool.acquire(fields)
    # Its csi-mock controller stopped for good: a process gone, or a pod scaled away.
    broken.stop_component("csi-mock-controller")
    pool.release(broken, test_failed=False)

    failed_with, reused = pool.acquire(fields)
    assert not reused and failed_with is not broken
    pool.release(failed_with, test_failed=True)

    third, reused = pool.acquire(fields)
    assert not reused and third not in (broken, failed_with)
    assert pool.stats.not_reused == {"a component stopped": 1, "its test failed": 1}
    pool.release(third, test_failed=False)


@pytest.mark.scenario(FEATURE, "a sidecar its test paused goes on, and the driver is reused")
def test_a_sidecar_its_test_paused_goes_on_after_it_and_the_driver_is_handed_on(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    """In-cluster, ``stop_component`` pauses a sidecar of the controller's pod; the
    reset lets it go on, and the driver is handed on with the sidecar running, not
    restarted. Locally it stops the sidecar's process for good: the driver is replaced."""
    fields = fields_of(cluster)
    first, baseline = idle_in_pool(pool, kube, fields)
    again, _ = pool.acquire(fields)
    again.stop_component("csi-attacher")
    assert again.failed_component() == "stopped: csi-attacher"
    pool.release(again, test_failed=False)

    after, reused = pool.acquire(fields)

    if isinstance(first, InClusterDriver):
        assert reused and after is first, pool.stats
        assert after.failed_component() is None  # and not restarted
        with after.admin() as admin:
            attacher = [n for n in admin.neighbours() if n.name == "csi-attacher"]
        assert len(attacher) == 1 and attacher[0].pids and not attacher[0].paused, attacher
        assert observe(kube, after) == baseline
    else:
        assert not reused and after is not first
        assert pool.stats.not_reused == {"a component stopped": 1}
    pool.release(after, test_failed=False)


@pytest.mark.scenario(FEATURE, "a driver with a CSIStorageCapacity a test made is replaced")
def test_a_driver_whose_class_has_a_csistoragecapacity_a_test_made_is_replaced(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    # The scheduler reads every CSIStorageCapacity of a class, whoever made it: one left
    # in the driver's namespace would give the next test's pods room it does not have.
    fields = fields_of(cluster)
    first, _ = pool.acquire(fields)
    spec = first.spec
    baseline = observe(kube, first)
    topology = {spec.node_topology_key: first.nodes[0].name}
    objects.create(
        kube, objects.storage_capacity(spec.namespace, spec.storage_class(), topology, "100Gi")
    )
    differences = observe(kube, first).differences(baseline)
    assert len(differences) == 1 and differences[0].startswith("capacity: "), differences
    assert f"{spec.namespace}/{spec.storage_class()}" in differences[0]
    pool.release(first, test_failed=False)

    # Not reused: for that change, or (on a loaded kind) for a sidecar's restart first.
    second, reused = pool.acquire(fields)
    assert not reused and second is not first
    assert sum(pool.stats.not_reused.values()) == 1, pool.stats
    pool.release(second, test_failed=False)


def node_limits(kube: Client, driver: Driver) -> dict[str, int | None]:
    """Each of the driver's nodes -> its CSINode allocatable count for the driver."""
    view = observe(kube, driver)
    return {
        node: (entry.get("allocatable") or {}).get("count")
        for node, entry in view.csinode_entries.items()
    }


@pytest.mark.scenario(FEATURE, "a pooled driver takes another node limit in place and back")
def test_a_pooled_driver_takes_another_node_limit_in_place_keeps_it_idle_and_gives_it_back(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    fields = fields_of(cluster)
    deployed_limit = DriverDeployment.model_validate(fields).max_volumes_per_node
    first, baseline = idle_in_pool(pool, kube, fields)

    limited, reused = pool.acquire({**fields, "max_volumes_per_node": 1})

    assert reused and limited is first, pool.stats
    assert limited.spec.max_volumes_per_node == 1
    # The kubelets (or the node simulator) asked NodeGetInfo again: what the
    # scheduler's volume-limit plugin reads is the new count on every node.
    assert set(node_limits(kube, limited).values()) == {1}
    assert len(node_limits(kube, limited)) == len(limited.nodes)
    node = pick_nodes(limited.nodes, 1, runs_pods=True)[0].name
    with limited.admin(node) as node_admin:
        assert node_admin.health().registration.registered is True  # type: ignore[union-attr]

    pool.release(limited, test_failed=False)
    # Idle, it keeps the limit (each change is a registration with every kubelet): the
    # next test that asks for it gets the driver as it is, on instances and CSINodes.
    assert set(node_limits(kube, limited).values()) == {1}
    same, reused = pool.acquire({**fields, "max_volumes_per_node": 1})
    assert reused and same is first and pool.stats.changed_in_place == 1, pool.stats
    with same.admin(node) as node_admin:
        assert node_admin.limits().max_volumes_per_node == 1
    pool.release(same, test_failed=False)

    again, reused = pool.acquire(fields)

    assert reused and again is first, pool.stats
    assert again.spec.max_volumes_per_node == deployed_limit
    assert set(node_limits(kube, again).values()) == {deployed_limit}
    assert observe(kube, again) == baseline
    assert pool.stats.changed_in_place == 2 and pool.stats.deployed == 1
    pool.release(again, test_failed=False)


@pytest.mark.scenario(FEATURE, "a pooled driver takes another attach limit in place")
def test_a_pooled_driver_takes_another_attach_limit_in_place_and_gives_it_back(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    fields = fields_of(cluster)
    deployed = DriverDeployment.model_validate(fields)
    first, baseline = idle_in_pool(pool, kube, fields)
    controller = first.instances()[0]  # the central one, or a node's that runs it

    limited, reused = pool.acquire({**fields, "attach_limit": deployed.attach_limit + 1})

    assert reused and limited is first, pool.stats
    with limited.admin(controller) as admin:
        assert admin.limits().attach_limit == deployed.attach_limit + 1
    pool.release(limited, test_failed=False)
    again, reused = pool.acquire(fields)

    assert reused and again is first, pool.stats
    with again.admin(controller) as admin:
        limits = admin.limits()
    assert limits.attach_limit == deployed.attach_limit
    if limits.max_volumes_per_node is not None:  # not moved with it (distributed)
        assert limits.max_volumes_per_node == deployed.max_volumes_per_node
    assert observe(kube, again) == baseline
    assert pool.stats.changed_in_place == 1 and pool.stats.deployed == 1
    pool.release(again, test_failed=False)


@pytest.mark.scenario(FEATURE, "a pooled driver takes another CSIDriver storageCapacity in place")
def test_a_pooled_driver_takes_another_storage_capacity_in_place_and_gives_it_back(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    fields = fields_of(cluster)
    first, baseline = idle_in_pool(pool, kube, fields)

    changed, reused = pool.acquire({**fields, "storage_capacity": False})

    assert reused and changed is first, pool.stats
    live = kube.get(CSIDriver, changed.spec.name)
    assert live.spec is not None and live.spec.storageCapacity is False
    assert live.spec.attachRequired == baseline.csidriver["attachRequired"]  # type: ignore[index]

    pool.release(changed, test_failed=False)
    again, reused = pool.acquire(fields)

    assert reused and again is first, pool.stats
    live = kube.get(CSIDriver, again.spec.name)
    assert live.spec is not None and live.spec.storageCapacity is True
    assert observe(kube, again) == baseline
    assert pool.stats.changed_in_place == 1 and pool.stats.deployed == 1
    pool.release(again, test_failed=False)


@pytest.mark.scenario(FEATURE, "a CSIDriver a test replaced is made again as deployed")
def test_a_driver_whose_csidriver_a_test_replaced_gets_it_back_and_runs_a_pod(
    pool: DriverPool, cluster: Cluster, kube: Client
) -> None:
    """attachRequired cannot be patched: a test that flips it (as upstream's skip-attach
    cases do) deletes the CSIDriver and makes another, without the deployment's labels.
    The reset makes the deployed one again, the driver is handed on, and a pod that
    needs its attach flag as deployed runs on it."""
    fields = fields_of(cluster)
    first, baseline = idle_in_pool(pool, kube, fields)
    driver, _ = pool.acquire(fields)
    deployed = kube.get(CSIDriver, driver.spec.name)
    assert deployed.spec is not None and deployed.metadata is not None
    flipped = not deployed.spec.attachRequired
    kube.delete(CSIDriver, driver.spec.name)
    objects.create(
        kube,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": driver.spec.name},
            "spec": {**deployed.spec.to_dict(), "attachRequired": flipped},
        },
    )

    pool.release(driver, test_failed=False)
    again, reused = pool.acquire(fields)

    assert reused and again is first, pool.stats
    live = kube.get(CSIDriver, again.spec.name)
    assert live.spec is not None and live.spec.attachRequired is not flipped
    assert live.metadata is not None and live.metadata.labels == deployed.metadata.labels
    assert observe(kube, again) == baseline
    node = pick_nodes(again.nodes, 1, runs_pods=True)[0].name
    namespace = "t-pool-csidriver"
    kube.create(Namespace.from_dict({"metadata": {"name": namespace}}))
    try:
        run_pod(kube, again, namespace, node)
        with again.admin() as admin:
            published = admin.journal(method="ControllerPublishVolume")
        assert bool(published) is bool(live.spec.attachRequired)
    finally:
        empty_namespace(kube, namespace)
        kube.delete(Namespace, namespace)
    pool.release(again, test_failed=False)
    assert pool.stats.not_reused == {} and pool.stats.deployed == 1
