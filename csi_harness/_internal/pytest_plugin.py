"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options (all prefixed ``--csi-``: pytest-kind, for one, has ``--cluster-name`` and
``--keep-cluster``, and two plugins defining an option stop pytest):
  --csi-cluster local      bring up a local cluster for the session (default)
  --csi-cluster kind       create a kind cluster for the session (offline node image
                           unless --csi-node-image), deploy csi-mock in it, delete it after
  --csi-cluster existing   use a running cluster: a csi-harness local cluster (found by
                           --csi-kubeconfig, else by --csi-cluster-name), or any cluster
                           whose --csi-kubeconfig is given, with csi-mock deployed
                           in-cluster; it is left running
  --csi-kubeconfig PATH    the existing cluster's kubeconfig
  --csi-keep-cluster       leave the local or kind cluster running after the session
                           (kind: and reuse a running one of that name)
  --csi-cluster-name NAME  name of the local or kind cluster (default csi-harness-e2e)
  --csi-kind-config FILE   kind configuration (default kind-config/two-nodes.yaml)
  --csi-node-image IMAGE   kind node image of your own (e.g. from your Kubernetes branch)
  --csi-feature-gates G=B,...  Kubernetes feature gates for every component (local only)

Running tests at the same time (pytest-xdist, ``-n N``): the first worker whose
tests need the cluster brings it up, the others attach to it, and the controller
tears it down after they all end. Each test's driver gets a name, StorageClasses, namespace
and topology keys of its own (``Cluster.concurrent_drivers``: the local provider), so
tests do not see each other's. A test marked ``cluster_wide`` (it restarts the
scheduler, say) runs while no other test runs (``csi_harness._internal.core.cluster_lock``).

Fixtures:
  ``cluster`` (session)        the running cluster, a
  ``csi_harness._internal.providers.base.Cluster`` whichever
                               provider ``--csi-cluster`` chose
  ``local_cluster`` (session)  the same as a ``LocalCluster``, for tests of the local
                               provider itself (skipped on other providers)
  ``kube`` (session)           a lightkube Client for it
  ``driver`` (function)        the driver, deployed fresh for the test from the
                               ``@pytest.mark.driver(**DriverDeployment fields)`` marker,
                               with a name and suffix of its own where the cluster allows
                               drivers side by side; removed after the test
  ``namespace`` (function)     the test's own namespace; its pods and claims are deleted,
                               and their volumes with them, before the driver goes
  ``admin`` (function)         the csi-mock controller's admin client
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
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

from csi_harness._internal import reporting
from csi_harness._internal.core.cluster_lock import ClusterLock
from csi_harness._internal.core.run_state import STATE_FILE
from csi_harness._internal.core.tools import ToolsMissing
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import Cluster, Driver, Unsupported
from csi_harness._internal.providers.existing import ExistingProvider
from csi_harness._internal.providers.local.cluster import ClusterNotRunning, LocalCluster
from csi_harness._internal.providers.local.config import LocalClusterConfig, parse_feature_gates
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.providers.provider import ClusterProvider
from csi_harness._internal.shared_session import end_session, worker_cluster
from csi_mock.admin.client import AdminClient

if TYPE_CHECKING:
    from csi_harness._internal.providers.kind.provider import KindProvider


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption(
        "--csi-cluster",
        choices=["local", "kind", "existing"],
        default="local",
        help="local or kind: bring a cluster up for the session; existing: use a running one",
    )
    group.addoption(
        "--csi-kubeconfig",
        default=None,
        help="with --csi-cluster existing: the kubeconfig of a running cluster",
    )
    group.addoption("--csi-kind-config", default=None, help="kind configuration file")
    group.addoption("--csi-node-image", default=None, help="kind node image of your own")
    group.addoption("--csi-keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption("--csi-cluster-name", default="csi-harness-e2e", help="local cluster name")
    group.addoption(
        "--csi-feature-gates", default="", help="NAME=true|false,... for every component"
    )


_SESSION_CLUSTER = pytest.StashKey[AbstractContextManager[Cluster]]()
_SESSION_TOKEN = pytest.StashKey[str]()
SESSION_INPUT = "csi_harness_session"
CLUSTER_WIDE = "cluster_wide"
TEST_DRIVER_DOMAIN = "csi-mock"
"""Each test's driver is named "<7 characters>.csi-mock": no longer than the default
"csi-mock.example", whose registration socket path the run directory was sized for."""


def pytest_configure(config: pytest.Config) -> None:
    # Failure diagnostics and the feature x scenario summary (csi_harness/_internal/reporting.py).
    config.pluginmanager.register(reporting)
    config.addinivalue_line("markers", "e2e: runs against a real Kubernetes cluster")
    config.addinivalue_line(
        "markers",
        "driver(**fields): the DriverDeployment (csi_harness/_internal/deploy/spec.py) of the test",
    )
    config.addinivalue_line(
        "markers",
        f"{CLUSTER_WIDE}: changes what every test sees (e.g. the scheduler's "
        "configuration); runs while no other test runs",
    )
    # Here rather than in the fixture, so that a wrong option is a usage error.
    if _is_xdist_worker(config):
        # The controller brought the cluster up before it started this worker.
        config.stash[_SESSION_CLUSTER] = _worker_cluster(config)
        return
    workers = _xdist_workers(config)
    session_cluster: AbstractContextManager[Cluster] = open_cluster(config)
    config.stash[_SESSION_CLUSTER] = session_cluster
    if workers:
        # The controller runs no test: its workers share the cluster (pytest_unconfigure).
        config.stash[_SESSION_TOKEN] = secrets.token_hex(8)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers the options ask for (0: none, or no xdist)."""
    if not config.pluginmanager.has_plugin("xdist"):
        return 0
    if config.getoption("dist", "no") == "no":
        return 0
    value = config.getoption("numprocesses", None)
    return int(value) if isinstance(value, int) else 1


def _worker_cluster(config: pytest.Config) -> AbstractContextManager[Cluster]:
    """A worker's view of the session's cluster (``csi_harness._internal.shared_session``):
    the first worker that needs it brings it up, the others attach to it, the
    controller tears it down after them all. A cluster of the user's own
    (``--csi-cluster existing``) every worker just uses."""
    provider = open_cluster(config)
    if not _shared(provider):
        return provider
    return worker_cluster(provider, str(config.workerinput[SESSION_INPUT]))  # type: ignore[attr-defined]


def _shared(provider: ClusterProvider) -> bool:
    """Whether workers share one cluster that one of them brings up."""
    return provider.brings_up and not provider.attaching


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's hook, in the controller: tell each worker the session's token."""
    node.workerinput[SESSION_INPUT] = node.config.stash[_SESSION_TOKEN]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With workers, ``slow`` tests go first (the longest start first), then the
    others, then the ``cluster_wide`` ones: such a test waits for every running test
    to end (while the turnstile holds back new ones), so it should come when the
    others are done, not while a slow one runs. Each group keeps collection order;
    every worker sorts alike, as pytest-xdist requires."""
    if not (_is_xdist_worker(config) or _xdist_workers(config)):
        return

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker(CLUSTER_WIDE) is not None:
            return 2
        return 0 if item.get_closest_marker("slow") is not None else 1

    items.sort(key=rank)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller of workers tears down the cluster one of them brought up for
    this session (unless --csi-keep-cluster)."""
    token = config.stash.get(_SESSION_TOKEN, None)
    if token is None:
        return
    provider = open_cluster(config)
    if not _shared(provider):
        return
    message = end_session(provider, token, keep=provider.keep)
    if message is not None:
        _progress_writer(config)(message)


def open_cluster(config: pytest.Config) -> ClusterProvider:
    """The provider ``--csi-cluster`` asks for, configured from the options: entered, it
    yields the cluster ready for the suites; left, it tears it down or leaves it
    running, as the options say. Options that do not fit the provider, or a cluster
    to use that is not there, are a ``pytest.UsageError``, raised here, before
    anything is brought up or attached."""
    provider = config.getoption("--csi-cluster", "local")
    if provider != "existing" and config.getoption("--csi-kubeconfig", None):
        raise pytest.UsageError("--csi-kubeconfig names the cluster of --csi-cluster existing")
    if provider != "kind" and (
        config.getoption("--csi-kind-config") or config.getoption("--csi-node-image")
    ):
        raise pytest.UsageError(
            "--csi-kind-config and --csi-node-image are options of --csi-cluster kind"
        )
    progress = _progress_writer(config)
    keep = bool(config.getoption("--csi-keep-cluster"))
    if provider == "local":
        return LocalProvider(_local_cluster_config(config), progress=progress, keep=keep)
    if provider == "kind":
        return _kind_provider(config, progress, keep=keep)
    if provider == "existing":
        kubeconfig = config.getoption("--csi-kubeconfig")
        if kubeconfig and not (Path(kubeconfig).resolve().parent / STATE_FILE).exists():
            return _existing_provider(Path(kubeconfig), progress)
        return _attached_local_provider(config, progress)
    raise pytest.UsageError(f"--csi-cluster {provider}: no such provider")


def _kind_provider(
    config: pytest.Config, progress: Callable[[str], None], *, keep: bool
) -> KindProvider:
    """The kind cluster the options describe (not created yet), or a usage error."""
    # Imported here: only kind sessions need the Docker-related modules.
    from csi_harness._internal.providers.kind.cluster import DEFAULT_CONFIG
    from csi_harness._internal.providers.kind.node_image import NodeImageError, require_docker
    from csi_harness._internal.providers.kind.provider import KindProvider

    if config.getoption("--csi-feature-gates"):
        raise pytest.UsageError(
            "--csi-feature-gates: a kind cluster takes its gates from --csi-kind-config "
            "(the kind configuration capacity-scoring.yaml shows how)"
        )
    kind_config = Path(config.getoption("--csi-kind-config") or DEFAULT_CONFIG).resolve()
    if not kind_config.is_file():
        raise pytest.UsageError(f"--csi-kind-config {kind_config}: no such file")
    provider = KindProvider(
        config.getoption("--csi-cluster-name", "csi-harness-e2e"),
        kind_config,
        node_image=config.getoption("--csi-node-image"),
        progress=progress,
        keep=keep,
    )
    try:
        require_docker()
        provider.cluster()  # finds the tools
    except (NodeImageError, ToolsMissing) as exc:
        raise pytest.UsageError(f"--csi-cluster kind: {exc}") from exc
    return provider


def _existing_provider(kubeconfig: Path, progress: Callable[[str], None]) -> ExistingProvider:
    """Any cluster by its kubeconfig, checked to answer, or a usage error."""
    if not kubeconfig.is_file():
        raise pytest.UsageError(
            f"--csi-kubeconfig {kubeconfig}: no such file (and no local cluster here: no "
            f"{STATE_FILE} beside it)"
        )
    provider = ExistingProvider(kubeconfig, progress=progress)
    try:
        provider.check()
    except Unsupported as exc:
        raise pytest.UsageError(f"--csi-cluster existing: {exc}") from exc
    return provider


def _local_cluster_config(config: pytest.Config) -> LocalClusterConfig:
    try:
        gates = parse_feature_gates(config.getoption("--csi-feature-gates", ""))
    except ValueError as exc:
        raise pytest.UsageError(f"--csi-feature-gates: {exc}") from exc
    name = config.getoption("--csi-cluster-name", "csi-harness-e2e")
    return LocalClusterConfig(name=name, feature_gates=gates)


def _attached_local_provider(
    pytestconfig: pytest.Config, progress: Callable[[str], None]
) -> LocalProvider:
    """A running local cluster made by csi-harness, attached to and left as found."""
    if pytestconfig.getoption("--csi-feature-gates"):
        raise pytest.UsageError(
            "--csi-feature-gates: an existing cluster keeps the gates it was brought up with "
            "(csi-harness cluster up --feature-gates ...)"
        )
    config = LocalClusterConfig(name=pytestconfig.getoption("--csi-cluster-name"))
    kubeconfig = pytestconfig.getoption("--csi-kubeconfig")
    run_dir = Path(kubeconfig).resolve().parent if kubeconfig else config.effective_run_dir
    provider = LocalProvider(config, run_dir=run_dir, progress=progress, attach=True)
    try:
        provider.check()
    except (ClusterNotRunning, ToolsMissing) as exc:
        raise pytest.UsageError(
            f"--csi-cluster existing: {exc}\n(only clusters made by csi-harness can be used so "
            "far: the suites redeploy the driver as local processes)"
        ) from exc
    return provider


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
def cluster_access(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[None]:
    """The test's share of the cluster: exclusive for a ``cluster_wide`` test, shared
    with the other tests otherwise (only matters with pytest-xdist workers)."""
    lock = ClusterLock.for_cluster(f"{request.config.getoption('--csi-cluster')}-{cluster.name}")
    wide = request.node.get_closest_marker(CLUSTER_WIDE) is not None
    with lock.exclusive() if wide else lock.shared():
        yield


@pytest.fixture
def driver(
    request: pytest.FixtureRequest, cluster: Cluster, cluster_access: None
) -> Iterator[Driver]:
    """A fresh driver for every test: nothing a previous test changed (knobs, faults,
    pools, volumes) carries over. Where the cluster runs drivers side by side, it has
    a name, StorageClasses, namespace and topology keys of its own and is removed
    after the test; elsewhere it replaces the previous test's driver."""
    marker = request.node.get_closest_marker("driver")
    fields: dict[str, Any] = cluster.default_driver.model_dump()
    fields.update(marker.kwargs if marker else {})
    try:
        if not cluster.concurrent_drivers:
            yield cluster.redeploy_driver(DriverDeployment.model_validate(fields))
            return
        tag = "d" + secrets.token_hex(3)
        fields.update(name=f"{tag}.{TEST_DRIVER_DOMAIN}", suffix=f"-{tag}")
        deployed = cluster.deploy_driver(DriverDeployment.model_validate(fields))
    except Unsupported as unsupported:
        # This cluster cannot run the test's driver (e.g. no snapshot API).
        pytest.skip(str(unsupported))
    request.node.user_properties.append(("driver", deployed.spec.name))
    try:
        yield deployed
    finally:
        cluster.remove_driver(deployed)


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
