"""The fixtures: ``cluster``, ``kube``, ``cluster_access``, ``driver``, ``admin`` and
``namespace`` (see the package's docstring). They know a cluster by the ``Cluster``
protocol and the capabilities it has (``providers.base``), never by its provider."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import pytest
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import (
    Namespace,
)

from csi_harness._internal.core.cluster_lock import ClusterLock
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube.feature_gates import Component
from csi_harness._internal.kube.namespaces import empty_namespace
from csi_harness._internal.kube.nodes import ClusterNode
from csi_harness._internal.kube.waits.events import scheduled_placements
from csi_harness._internal.providers.base import (
    Cluster,
    ConfiguredFeatureGates,
    Driver,
    DriverHandover,
    FeatureGates,
    Unsupported,
)
from csi_harness._internal.pytest_plugin.driver_families import count_pooled_tests
from csi_harness._internal.pytest_plugin.family_progress import FamilyProgress
from csi_harness._internal.pytest_plugin.idle_drivers import (
    IdleDrivers,
    IdleStore,
    SharedIdleDrivers,
)
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool, log_pool_stats
from csi_harness._internal.pytest_plugin.session import (
    _SESSION_CLUSTER,
    CLUSTER_WIDE,
    DISRUPTS_NODES,
    FEATURE_GATE,
    FRESH_DRIVER,
    POOL_INPUT,
    REAL_NODES_ONLY,
    TEST_DRIVER_DOMAIN,
)
from csi_mock.admin.client import AdminClient


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    with pytestconfig.stash[_SESSION_CLUSTER] as running:
        yield running


@pytest.fixture(autouse=True)
def required_feature_gates(request: pytest.FixtureRequest) -> None:
    """Skip a test marked ``feature_gate(name, component=...)`` unless the cluster's
    component runs with that gate on; before its driver is deployed. Tests without the
    marker do not touch the cluster here (unit tests bring none up)."""
    for marker in request.node.iter_markers(FEATURE_GATE):
        cluster = request.getfixturevalue("cluster")
        reason = feature_gate_skip_reason(cluster, *marker.args, **marker.kwargs)
        if reason is not None:
            pytest.skip(reason)


def feature_gate_skip_reason(cluster: Cluster, gate: str, component: str = "kubelet") -> str | None:
    """Why a test that needs ``gate`` on in ``component`` cannot run on ``cluster``;
    None when it can. Only an explicit ``gate=true`` counts (the harness does not know
    each gate's default). The kubelets' gates are read from the cluster (their running
    configuration), kube-scheduler's from its pod or configuration; the other
    components' only on the local provider, where ``--csi-feature-gates`` (or the
    cluster's configuration) set them at bring-up."""
    needs = f"needs the feature gate {gate}=true on the {component}"
    value: bool | None
    if component == Component.KUBELET and isinstance(cluster, FeatureGates):
        value = cluster.kubelet_feature_gate(gate)
    elif component == Component.SCHEDULER and isinstance(cluster, FeatureGates):
        value = cluster.scheduler_feature_gate(gate)
    elif isinstance(cluster, ConfiguredFeatureGates):
        value = cluster.component_feature_gate(Component(component), gate)
    else:
        return (
            f"{needs}; the harness knows the {component}'s feature gates only of the local "
            f"clusters it brings up, not of cluster {cluster.name!r}"
        )
    if value is True:
        return None
    how = (
        f"bring it up with --csi-feature-gates {gate}=true"
        if isinstance(cluster, ConfiguredFeatureGates)
        else "give it the gate (kind: featureGates in its --csi-kind-config)"
    )
    return f"{needs}; cluster {cluster.name!r} does not run with it: {how}"


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Client:
    return Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="csi-harness-tests")


@pytest.fixture
def cluster_access(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[None]:
    """The test's share of the cluster (only matters with pytest-xdist workers; see
    ``access_mode``). A second lock guards the nodes with a real kubelet: a
    ``real_nodes_only`` test holds it shared, a ``disrupts_nodes`` one (which restarts
    a kubelet) exclusively, on top of the cluster."""
    key = f"{request.config.getoption('--csi-cluster')}-{cluster.name}"
    lock = ClusterLock.for_cluster(key)
    real_nodes = ClusterLock.for_cluster(key + "-real-nodes")
    disrupts = request.node.get_closest_marker(DISRUPTS_NODES) is not None
    real_nodes_only = request.node.get_closest_marker(REAL_NODES_ONLY) is not None
    mode = access_mode(
        cluster_wide=disrupts or request.node.get_closest_marker(CLUSTER_WIDE) is not None,
        real_nodes_only=real_nodes_only,
        nodes=cluster.nodes() if real_nodes_only else (),
    )
    with contextlib.ExitStack() as held:
        if mode == "exclusive":
            held.enter_context(lock.exclusive())
            if disrupts:
                held.enter_context(real_nodes.exclusive())
        elif mode == "shared":
            held.enter_context(lock.shared())
        else:
            held.enter_context(real_nodes.shared())
        yield


def access_mode(
    *, cluster_wide: bool, real_nodes_only: bool, nodes: Sequence[ClusterNode]
) -> Literal["exclusive", "shared", "beside"]:
    """How a test shares the cluster: a ``cluster_wide`` test alone ("exclusive"),
    others together ("shared"). A ``real_nodes_only`` test takes no part in the lock
    ("beside": it runs beside ``cluster_wide`` ones) where the cluster has simulated
    nodes: the cluster-wide tests that compare nodes compare those
    (``scheduling_nodes``), and a restart of kube-scheduler only delays its pods.
    Without simulated nodes every node may be compared, so it shares as others do."""
    if cluster_wide:
        return "exclusive"
    if real_nodes_only and any(not node.runs_pods for node in nodes):
        return "beside"
    return "shared"


@pytest.fixture(scope="session")
def driver_pool(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config, cluster: Cluster, kube: Client
) -> Iterator[DriverPool | None]:
    """This process's driver pool (``driver_pool``), where drivers run side by side and
    ``--csi-no-driver-pool`` is not given: at most ``--csi-driver-pool-idle`` idle
    drivers per process, kept where every pytest-xdist worker of the session can take
    them when the cluster hands drivers over (``idle_drivers``), where a driver whose
    family has no test left to take it is removed at once (``family_progress``); the
    last process removes what is idle at the end of the session."""
    if not cluster.concurrent_drivers or pytestconfig.getoption("--csi-no-driver-pool"):
        yield None
        return
    max_idle = pytestconfig.getoption("--csi-driver-pool-idle")
    workerinput: dict[str, Any] = getattr(pytestconfig, "workerinput", {})
    idle: IdleStore = IdleDrivers(max_idle)
    progress = None
    if POOL_INPUT in workerinput and isinstance(cluster, DriverHandover):
        shared = Path(workerinput[POOL_INPUT])
        idle = SharedIdleDrivers(shared, max_idle, cluster)
        totals = count_pooled_tests(request.session.items, cluster.default_driver.model_dump())
        progress = FamilyProgress(totals, shared)
    pool = DriverPool.for_cluster(
        cluster, kube, domain=TEST_DRIVER_DOMAIN, idle=idle, progress=progress
    )
    try:
        yield pool
    finally:
        pool.close()
        log_pool_stats(pool.stats)


@pytest.fixture
def driver(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    cluster_access: None,
    driver_pool: DriverPool | None,
) -> Iterator[Driver]:
    """A driver for every test as if deployed for it: nothing a previous test changed
    (knobs, faults, pools, volumes) carries over. Where the cluster runs drivers side
    by side, it has a name, StorageClasses, namespace and topology keys of its own:
    a reset one from the pool when an earlier test (of this process, or of any worker
    where the workers share idle drivers) used the same fields and left nothing
    behind (``driver_pool``), else a new one; a ``fresh_driver`` test always gets a
    new one. Elsewhere it replaces the previous test's driver."""
    marker = request.node.get_closest_marker("driver")
    fields: dict[str, Any] = cluster.default_driver.model_dump()
    fields.update(marker.kwargs if marker else {})
    pool = driver_pool if request.node.get_closest_marker(FRESH_DRIVER) is None else None
    try:
        if not cluster.concurrent_drivers:
            yield cluster.redeploy_driver(DriverDeployment.model_validate(fields))
            return
        if pool is not None:
            deployed, reused = pool.acquire(fields)
        else:
            tag = "d" + secrets.token_hex(3)
            fields.update(name=f"{tag}.{TEST_DRIVER_DOMAIN}", suffix=f"-{tag}")
            deployed, reused = cluster.deploy_driver(DriverDeployment.model_validate(fields)), False
    except Unsupported as unsupported:
        # This cluster cannot run the test's driver (e.g. no snapshot API).
        pytest.skip(str(unsupported))
    request.node.user_properties.append(("driver", deployed.spec.name))
    request.node.user_properties.append(("driver_reused", reused))
    failed_before = request.session.testsfailed
    try:
        yield deployed
    finally:
        if pool is not None:
            pool.release(deployed, test_failed=request.session.testsfailed > failed_before)
        else:
            cluster.remove_driver(deployed)


@pytest.fixture
def admin(driver: Driver) -> Iterator[AdminClient]:
    with driver.admin("controller") as client:
        yield client


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube: Client, driver: Driver) -> Iterator[str]:
    """The test's namespace, emptied and deleted after it; records where its pods were
    placed (``SIMULATED_PLACEMENTS``)."""
    name = "t-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    kube.create(cast(Any, Namespace.from_dict({"metadata": {"name": name}})))
    yield name
    _record_simulated_placements(request, kube, name, driver)
    _empty_namespace(kube, name)


SIMULATED_PLACEMENTS = "pods_on_simulated_nodes"
"""The test's JUnit property: how many times kube-scheduler placed one of its pods on a
simulated node, where it never runs (scripts/upstream_coverage.py reads it: such a
test stops at scheduling where upstream's runs the pod). Absent when not known."""


def _record_simulated_placements(
    request: pytest.FixtureRequest, kube: Client, name: str, driver: Driver
) -> None:
    simulated = {node.name for node in driver.nodes if not node.runs_pods}
    try:
        placements = scheduled_placements(kube, name)
    except ApiError:
        return  # not known: the property is left out rather than guessed
    count = sum(1 for _, node in placements if node in simulated)
    # Teardown runs before the teardown report, whose properties the JUnit XML writes.
    request.node.user_properties.append((SIMULATED_PLACEMENTS, count))


def _empty_namespace(kube: Client, name: str) -> None:
    """Empty the namespace (``empty_namespace``), then delete it."""
    empty_namespace(kube, name)
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, name)
