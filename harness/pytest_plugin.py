"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options:
  --cluster local        bring up a local cluster for the session (default)
  --cluster kind         create a kind cluster for the session (offline node image unless
                         --node-image), deploy csi-mock in it, delete it afterwards
  --cluster existing     use a running cluster: a csi-harness local cluster (found by
                         --kubeconfig, else by --cluster-name), or any cluster whose
                         --kubeconfig is given, with csi-mock deployed in-cluster; it is
                         left running
  --kubeconfig PATH      the existing cluster's kubeconfig
  --keep-cluster         leave the local or kind cluster running after the session (kind:
                         and reuse a running one of that name)
  --cluster-name NAME    name of the local or kind cluster (default csi-harness-e2e)
  --kind-config FILE     kind configuration (default kind-config/two-nodes.yaml)
  --node-image IMAGE     kind node image of your own (e.g. from your Kubernetes branch)
  --feature-gates G=B,.. Kubernetes feature gates for every component (local only)

Fixtures:
  ``cluster`` (session)        the running cluster, a ``harness.cluster.Cluster`` whichever
                               provider ``--cluster`` chose
  ``local_cluster`` (session)  the same as a ``LocalCluster``, for tests of the local
                               provider itself (skipped on other providers)
  ``kube`` (session)           a lightkube Client for it
  ``driver`` (function)        the driver, deployed fresh for the test from the
                               ``@pytest.mark.driver(**DriverDeployment fields)`` marker
  ``namespace`` (function)     the test's own namespace; its pods and claims are deleted,
                               and their volumes with them, before the driver goes
  ``admin`` (function)         the csi-mock controller's admin client
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import (
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
)

from csi_mock.admin.client import AdminClient
from harness import reporting
from harness.cli import UsageError, parse_feature_gates
from harness.cluster import Cluster, Driver, Unsupported

if TYPE_CHECKING:
    from harness.existing import ExistingCluster
    from harness.kind.cluster import KindCluster
from harness.deploy.spec import DriverDeployment
from harness.local.cluster import ClusterNotRunning, LocalCluster, format_teardown
from harness.local.config import LocalClusterConfig
from harness.local.state import STATE_FILE
from harness.local.tools import ToolsMissing
from harness.local.waiting import wait_for


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption(
        "--cluster",
        choices=["local", "kind", "existing"],
        default="local",
        help="local or kind: bring a cluster up for the session; existing: use a running one",
    )
    group.addoption(
        "--kubeconfig",
        default=None,
        help="with --cluster existing: the kubeconfig of a running cluster",
    )
    group.addoption("--kind-config", default=None, help="kind configuration file")
    group.addoption("--node-image", default=None, help="kind node image of your own")
    group.addoption("--keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption("--cluster-name", default="csi-harness-e2e", help="local cluster name")
    group.addoption("--feature-gates", default="", help="NAME=true|false,... for every component")


_SESSION_CLUSTER = pytest.StashKey[AbstractContextManager[Cluster]]()


def pytest_configure(config: pytest.Config) -> None:
    # Failure diagnostics and the feature x scenario summary (harness/reporting.py).
    config.pluginmanager.register(reporting)
    # Here rather than in the fixture, so that a wrong option is a usage error.
    config.stash[_SESSION_CLUSTER] = open_cluster(config)
    config.addinivalue_line("markers", "e2e: runs against a real Kubernetes cluster")
    config.addinivalue_line(
        "markers", "driver(**fields): the DriverDeployment (harness/deploy/spec.py) of the test"
    )


def open_cluster(config: pytest.Config) -> AbstractContextManager[Cluster]:
    """The cluster ``--cluster`` asks for, as a context manager: entered, it yields the
    cluster ready for the suites; left, it tears it down or leaves it running, as the
    options say. Options that do not fit the provider are a ``pytest.UsageError``,
    raised here, before anything is brought up or attached."""
    provider = config.getoption("--cluster", "local")
    if provider != "existing" and config.getoption("--kubeconfig", None):
        raise pytest.UsageError("--kubeconfig names the cluster of --cluster existing")
    if provider != "kind" and (
        config.getoption("--kind-config") or config.getoption("--node-image")
    ):
        raise pytest.UsageError("--kind-config and --node-image are options of --cluster kind")
    progress = _progress_writer(config)
    if provider == "local":
        return _brought_up_local_cluster(
            _local_cluster_config(config), progress, keep=bool(config.getoption("--keep-cluster"))
        )
    if provider == "kind":
        return _kind_cluster(_kind_cluster_for(config, progress), progress)
    if provider == "existing":
        kubeconfig = config.getoption("--kubeconfig")
        if kubeconfig and not (Path(kubeconfig).resolve().parent / STATE_FILE).exists():
            return _existing_cluster(_existing_cluster_for(Path(kubeconfig), progress), progress)
        return _left_as_found(_attach(config, progress), progress)
    raise pytest.UsageError(f"--cluster {provider}: no such provider")


def _kind_cluster_for(config: pytest.Config, progress: Callable[[str], None]) -> KindCluster:
    """The kind cluster the options describe (not created yet), or a usage error."""
    # Imported here: only kind sessions need the Docker-related modules.
    from harness.kind.cluster import DEFAULT_CONFIG, KindCluster
    from harness.kind.node_image import NodeImageError, require_docker

    if config.getoption("--feature-gates"):
        raise pytest.UsageError(
            "--feature-gates: a kind cluster takes its gates from --kind-config "
            "(kind-config/capacity-scoring.yaml shows how)"
        )
    kind_config = Path(config.getoption("--kind-config") or DEFAULT_CONFIG).resolve()
    if not kind_config.is_file():
        raise pytest.UsageError(f"--kind-config {kind_config}: no such file")
    try:
        require_docker()
        return KindCluster(
            config.getoption("--cluster-name", "csi-harness-e2e"),
            kind_config,
            node_image=config.getoption("--node-image"),
            reuse=bool(config.getoption("--keep-cluster")),
            progress=progress,
        )
    except (NodeImageError, ToolsMissing) as exc:
        raise pytest.UsageError(f"--cluster kind: {exc}") from exc


@contextlib.contextmanager
def _kind_cluster(cluster: KindCluster, progress: Callable[[str], None]) -> Iterator[Cluster]:
    cluster.up()
    progress("kind cluster ready: " + ", ".join(f"{k} {v}s" for k, v in cluster.timings.items()))
    try:
        yield cluster
    finally:
        if cluster.reuse:
            cluster.release()
            progress(f"kind cluster kept: export KUBECONFIG={cluster.kubeconfig}")
        else:
            cluster.down()
            progress(f"kind cluster {cluster.name!r} deleted")


def _existing_cluster_for(kubeconfig: Path, progress: Callable[[str], None]) -> ExistingCluster:
    """Any cluster by its kubeconfig, checked to answer, or a usage error."""
    from harness.existing import ExistingCluster

    if not kubeconfig.is_file():
        raise pytest.UsageError(
            f"--kubeconfig {kubeconfig}: no such file (and no local cluster here: no "
            f"{STATE_FILE} beside it)"
        )
    cluster = ExistingCluster(kubeconfig, progress=progress)
    try:
        cluster.check_reachable()
    except Unsupported as exc:
        raise pytest.UsageError(f"--cluster existing: {exc}") from exc
    return cluster


@contextlib.contextmanager
def _existing_cluster(
    cluster: ExistingCluster, progress: Callable[[str], None]
) -> Iterator[Cluster]:
    """csi-mock is deployed in the cluster for each test and removed afterwards."""
    progress(f"using the cluster of {cluster.kubeconfig}; csi-mock goes to namespace csi-mock")
    try:
        yield cluster
    finally:
        cluster.remove_driver()
        progress("csi-mock removed; the cluster is left running")


def _local_cluster_config(config: pytest.Config) -> LocalClusterConfig:
    try:
        gates = parse_feature_gates(config.getoption("--feature-gates", ""))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from exc
    name = config.getoption("--cluster-name", "csi-harness-e2e")
    return LocalClusterConfig(name=name, feature_gates=gates)


@contextlib.contextmanager
def _brought_up_local_cluster(
    config: LocalClusterConfig, progress: Callable[[str], None], *, keep: bool
) -> Iterator[LocalCluster]:
    cluster = LocalCluster(config, progress=progress)
    try:
        cluster.up()
    except BaseException:
        cluster.down()
        raise
    try:
        yield cluster
    finally:
        if keep:
            progress(f"cluster kept: export KUBECONFIG={cluster.kubeconfig}")
        else:
            progress(f"cluster removed: {format_teardown(cluster.down())}")


def _progress_writer(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Progress lines on pytest's terminal (looked up when written: the terminal
    reporter does not exist yet while plugins are configured)."""

    def progress(message: str) -> None:
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        # Live on the terminal, not in the test's captured output.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(f"[csi-harness] {message}")

    return progress


def _attach(pytestconfig: pytest.Config, progress: Callable[[str], None]) -> LocalCluster:
    if pytestconfig.getoption("--feature-gates"):
        raise pytest.UsageError(
            "--feature-gates: an existing cluster keeps the gates it was brought up with "
            "(csi-harness cluster up --feature-gates ...)"
        )
    kubeconfig = pytestconfig.getoption("--kubeconfig")
    if kubeconfig:
        run_dir = Path(kubeconfig).resolve().parent
    else:
        run_dir = LocalClusterConfig(
            name=pytestconfig.getoption("--cluster-name")
        ).effective_run_dir
    try:
        return LocalCluster.attach(run_dir, progress=progress)
    except (ClusterNotRunning, ToolsMissing) as exc:
        raise pytest.UsageError(
            f"--cluster existing: {exc}\n(only clusters made by csi-harness can be used so "
            "far: the suites redeploy the driver as local processes)"
        ) from exc


@contextlib.contextmanager
def _left_as_found(cluster: Cluster, progress: Callable[[str], None]) -> Iterator[Cluster]:
    """The running cluster; afterwards the driver and the scheduler configuration it
    had are put back, and it is left running."""
    progress(f"attached to cluster {cluster.name!r}: KUBECONFIG={cluster.kubeconfig}")
    driver = cluster.driver.spec if cluster.driver is not None else None
    scheduler = cluster.scheduler_config
    try:
        yield cluster
    finally:
        if cluster.scheduler_config != scheduler:
            cluster.restart_scheduler(scheduler)
        if driver is not None and (cluster.driver is None or cluster.driver.spec != driver):
            cluster.redeploy_driver(driver)
        progress(f"cluster {cluster.name!r} left running with its own driver")


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    with pytestconfig.stash[_SESSION_CLUSTER] as running:
        yield running


@pytest.fixture(scope="session")
def local_cluster(cluster: Cluster) -> LocalCluster:
    """The cluster, for tests of the local provider itself."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip(f"tests the local provider; cluster {cluster.name!r} is not a local one")
    return cluster


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Client:
    return Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="csi-harness-tests")


@pytest.fixture
def driver(request: pytest.FixtureRequest, cluster: Cluster) -> Driver:
    """A fresh driver for every test: nothing a previous test changed (knobs, faults,
    pools, volumes) carries over."""
    marker = request.node.get_closest_marker("driver")
    fields: dict[str, Any] = cluster.default_driver.model_dump()
    fields.update(marker.kwargs if marker else {})
    return cluster.redeploy_driver(DriverDeployment.model_validate(fields))


@pytest.fixture
def admin(driver: Driver) -> Iterator[AdminClient]:
    with driver.admin("controller") as client:
        yield client


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube: Client, driver: Driver) -> Iterator[str]:
    name = "t-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    kube.create(cast(Any, Namespace.from_dict({"metadata": {"name": name}})))
    yield name
    _empty_namespace(kube, name)


def _empty_namespace(kube: Client, name: str) -> None:
    """Delete the namespace's pods (at once) and claims, wait for their volumes to be
    deleted by the driver, then delete the namespace."""
    for pod in kube.list(Pod, namespace=name):
        if pod.metadata and pod.metadata.name:
            with contextlib.suppress(ApiError):
                kube.delete(Pod, pod.metadata.name, namespace=name, grace_period=0)
    for claim in kube.list(PersistentVolumeClaim, namespace=name):
        if claim.metadata and claim.metadata.name:
            with contextlib.suppress(ApiError):
                kube.delete(PersistentVolumeClaim, claim.metadata.name, namespace=name)

    def volumes_gone() -> tuple[bool, list[str]]:
        left = [
            str(pv.metadata.name if pv.metadata else "?")
            for pv in kube.list(PersistentVolume)
            if pv.spec and pv.spec.claimRef and pv.spec.claimRef.namespace == name
        ]
        left += [
            f"pvc/{c.metadata.name if c.metadata else '?'}"
            for c in kube.list(PersistentVolumeClaim, namespace=name)
        ]
        return not left, left

    wait_for(
        f"the volumes of namespace {name} to be deleted", volumes_gone, timeout=90, interval=0.5
    )
    with contextlib.suppress(ApiError):
        kube.delete(Namespace, name)
