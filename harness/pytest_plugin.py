"""pytest plugin of the csi-mock conformance harness (registered as ``csi_harness``).

Options:
  --cluster local        bring up a local cluster for the session (default)
  --keep-cluster         leave it running after the session (its kubeconfig is printed)
  --cluster-name NAME    name of the local cluster (run dir /var/lib/csi-harness/NAME)
  --feature-gates G=B,.. Kubernetes feature gates for every component

Fixtures: ``local_cluster`` (session): the running LocalCluster with its driver.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cli import UsageError, parse_feature_gates
from harness.local.cluster import LocalCluster, format_teardown
from harness.local.config import LocalClusterConfig


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption("--cluster", choices=["local"], default="local", help="cluster provider")
    group.addoption("--keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption("--cluster-name", default="csi-harness-e2e", help="local cluster name")
    group.addoption("--feature-gates", default="", help="NAME=true|false,... for every component")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs against a real Kubernetes cluster")


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
