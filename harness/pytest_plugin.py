"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options:
  --cluster local        bring up a local cluster for the session (default)
  --cluster existing     use a local cluster that is already running (``csi-harness
                         cluster up``, or a session run with --keep-cluster): found by
                         --kubeconfig, else by --cluster-name; it is left running, with the
                         driver it had
  --kubeconfig PATH      the existing cluster's kubeconfig (in its run directory)
  --keep-cluster         leave the local cluster running after the session
  --cluster-name NAME    name of the local cluster (run dir /var/lib/csi-harness/NAME)
  --feature-gates G=B,.. Kubernetes feature gates for every component (local only)

Fixtures:
  ``local_cluster`` (session)  the running LocalCluster
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
from pathlib import Path
from typing import Any, cast

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
from harness.deploy.local import LocalDriver
from harness.deploy.spec import DriverDeployment
from harness.local.cluster import ClusterNotRunning, LocalCluster, format_teardown
from harness.local.config import LocalClusterConfig
from harness.local.tools import ToolsMissing
from harness.local.waiting import wait_for


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption(
        "--cluster",
        choices=["local", "existing"],
        default="local",
        help="local: bring a cluster up for the session; existing: attach to a running one",
    )
    group.addoption(
        "--kubeconfig",
        default=None,
        help="with --cluster existing: the kubeconfig of a running csi-harness local cluster",
    )
    group.addoption("--keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption("--cluster-name", default="csi-harness-e2e", help="local cluster name")
    group.addoption("--feature-gates", default="", help="NAME=true|false,... for every component")


_ATTACHED = pytest.StashKey[LocalCluster]()


def pytest_configure(config: pytest.Config) -> None:
    # Failure diagnostics and the feature x scenario summary (harness/reporting.py).
    config.pluginmanager.register(reporting)
    if config.getoption("--cluster", "local") == "existing":
        # Here rather than in the fixture, so that a wrong option is a usage error.
        config.stash[_ATTACHED] = _attach(config)
    elif config.getoption("--kubeconfig", None):
        raise pytest.UsageError("--kubeconfig names the cluster of --cluster existing")
    config.addinivalue_line("markers", "e2e: runs against a real Kubernetes cluster")
    config.addinivalue_line(
        "markers", "driver(**fields): the DriverDeployment (harness/deploy/spec.py) of the test"
    )


@pytest.fixture(scope="session")
def local_cluster_config(pytestconfig: pytest.Config) -> LocalClusterConfig:
    try:
        gates = parse_feature_gates(pytestconfig.getoption("--feature-gates"))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from exc
    return LocalClusterConfig(name=pytestconfig.getoption("--cluster-name"), feature_gates=gates)


@pytest.fixture(scope="session")
def local_cluster(
    pytestconfig: pytest.Config, local_cluster_config: LocalClusterConfig
) -> Iterator[LocalCluster]:
    progress = _progress_writer(pytestconfig)
    if _ATTACHED in pytestconfig.stash:
        yield from _existing_cluster(pytestconfig.stash[_ATTACHED])
        return
    cluster = LocalCluster(local_cluster_config, progress=progress)
    try:
        cluster.up()
    except BaseException:
        cluster.down()
        raise
    yield cluster
    if pytestconfig.getoption("--keep-cluster"):
        progress(f"cluster kept: export KUBECONFIG={cluster.kubeconfig}")
        return
    report = cluster.down()
    progress(f"cluster removed: {format_teardown(report)}")


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


def _attach(pytestconfig: pytest.Config) -> LocalCluster:
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
        return LocalCluster.attach(run_dir, progress=_progress_writer(pytestconfig))
    except (ClusterNotRunning, ToolsMissing) as exc:
        raise pytest.UsageError(
            f"--cluster existing: {exc}\n(only clusters made by csi-harness can be used so "
            "far: the suites redeploy the driver as local processes)"
        ) from exc


def _existing_cluster(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The attached cluster; afterwards put back the driver and the scheduler
    configuration it had, and leave it running."""
    cluster.progress(
        f"attached to cluster {cluster.config.name!r}: KUBECONFIG={cluster.kubeconfig}"
    )
    driver, scheduler = cluster.config.driver, dict(cluster.config.scheduler)
    yield cluster
    if cluster.config.scheduler != scheduler:
        cluster.restart_scheduler(scheduler)
    if cluster.config.driver != driver:
        cluster.redeploy_driver(driver)
    cluster.progress(f"cluster {cluster.config.name!r} left running with its own driver")


@pytest.fixture(scope="session")
def kube(local_cluster: LocalCluster) -> Client:
    return Client(KubeConfig.from_file(local_cluster.kubeconfig), field_manager="csi-harness-tests")


@pytest.fixture
def driver(request: pytest.FixtureRequest, local_cluster: LocalCluster) -> LocalDriver:
    """A fresh driver for every test: nothing a previous test changed (knobs, faults,
    pools, volumes) carries over."""
    marker = request.node.get_closest_marker("driver")
    fields: dict[str, Any] = local_cluster.default_driver.model_dump()
    fields.update(marker.kwargs if marker else {})
    return local_cluster.redeploy_driver(DriverDeployment.model_validate(fields))


@pytest.fixture
def admin(driver: LocalDriver) -> Iterator[AdminClient]:
    with AdminClient(driver.admin_socket("controller")) as client:
        yield client


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube: Client, driver: LocalDriver) -> Iterator[str]:
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
