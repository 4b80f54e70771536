"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options:
  --cluster local        bring up a local cluster for the session (default)
  --keep-cluster         leave it running after the session (its kubeconfig is printed)
  --cluster-name NAME    name of the local cluster (run dir /var/lib/csi-harness/NAME)
  --feature-gates G=B,.. Kubernetes feature gates for every component

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
from collections.abc import Iterator
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
from harness.local.cluster import LocalCluster, format_teardown
from harness.local.config import LocalClusterConfig
from harness.local.waiting import wait_for


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption("--cluster", choices=["local"], default="local", help="cluster provider")
    group.addoption("--keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption("--cluster-name", default="csi-harness-e2e", help="local cluster name")
    group.addoption("--feature-gates", default="", help="NAME=true|false,... for every component")


def pytest_configure(config: pytest.Config) -> None:
    # Failure diagnostics and the feature x scenario summary (harness/reporting.py).
    config.pluginmanager.register(reporting)
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
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")

    def progress(message: str) -> None:
        if reporter is not None:
            reporter.write_line(f"[csi-harness] {message}")

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
