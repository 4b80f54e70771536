"""One cluster per session: the controller's provider, its xdist workers' view of it
(``csi_harness._internal.shared_session``), and the tear-down after the last worker.
Which worker runs which test is ``scheduling``.

A session that brings up a cluster without ``--csi-cluster-name`` leases a name no
other running session holds (``core.name_lease``): csi-harness-e2e while it is the
only one, csi-harness-e2e-2 beside it, and so on. Its xdist workers get the name from
the controller, so they share the one cluster."""

from __future__ import annotations

import os
import secrets
from contextlib import AbstractContextManager
from typing import Any

import pytest

from csi_harness._internal import reporting
from csi_harness._internal.core.name_lease import NameLease, NoNameFree, lease_name
from csi_harness._internal.core.waiting import TIME_SCALE_VARIABLE, time_scale
from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.providers.factory import DEFAULT_NAME
from csi_harness._internal.providers.provider import ClusterProvider
from csi_harness._internal.pytest_plugin import scheduling
from csi_harness._internal.pytest_plugin.pool_dir import PoolDir, make_pool_dir
from csi_harness._internal.pytest_plugin.providers import (
    SESSION_NAME,
    open_cluster,
    progress_writer,
    use_session_images,
)
from csi_harness._internal.shared_session import end_session, worker_cluster

_SESSION_CLUSTER = pytest.StashKey[AbstractContextManager[Cluster]]()
_SESSION_TOKEN = pytest.StashKey[str]()
_NAME_LEASE = pytest.StashKey[NameLease]()
_POOL_DIR = pytest.StashKey[PoolDir]()
SESSION_INPUT = "csi_harness_session"
NAME_INPUT = "csi_harness_cluster_name"
POOL_INPUT = "csi_harness_pool_dir"
"""Where the session's workers keep their idle drivers, for each other
(``idle_drivers.SharedIdleDrivers``); made by the controller, removed after them."""
BRINGS_UP = ("local", "kind")
"""The providers whose session brings up a cluster of its own (and leases its name)."""
CLUSTER_WIDE = scheduling.CLUSTER_WIDE
REAL_NODES_ONLY = "real_nodes_only"
FRESH_DRIVER = "fresh_driver"
DISRUPTS_NODES = "disrupts_nodes"
FEATURE_GATE = "feature_gate"
TEST_DRIVER_DOMAIN = "csi-mock"
"""Each test's driver is named "<7 characters>.csi-mock": no longer than the default
"csi-mock.example", whose registration socket path the run directory was sized for."""


def pytest_configure(config: pytest.Config) -> None:
    _set_time_scale(config)
    # Failure diagnostics and the feature x scenario summary (csi_harness/_internal/reporting.py).
    config.pluginmanager.register(reporting)
    config.pluginmanager.register(scheduling)
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
    config.addinivalue_line(
        "markers",
        f"{REAL_NODES_ONLY}: places pods only on nodes with a real kubelet and changes "
        f"nothing other tests see; where the cluster has simulated nodes (which "
        f"{CLUSTER_WIDE} tests compare), it runs beside {CLUSTER_WIDE} tests",
    )
    config.addinivalue_line(
        "markers",
        f"{DISRUPTS_NODES}: restarts or stops a node's kubelet; runs while no other test "
        f"runs, {REAL_NODES_ONLY} ones included (implies {CLUSTER_WIDE})",
    )
    config.addinivalue_line(
        "markers",
        f"{FRESH_DRIVER}: the test's driver is deployed for it, never one reset from the "
        "pool (e.g. a test of the deployment itself)",
    )
    config.addinivalue_line(
        "markers",
        f"{FEATURE_GATE}(name, component='kubelet'): needs the Kubernetes feature gate on in "
        "that component (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet); "
        "skipped, with the reason, where the cluster does not run it on",
    )
    # Here rather than in the fixture, so that a wrong option is a usage error.
    use_session_images(config)
    if _is_xdist_worker(config):
        name = config.workerinput.get(NAME_INPUT)  # type: ignore[attr-defined]
        if name is not None:
            config.stash[SESSION_NAME] = str(name)
        # The controller brought the cluster up before it started this worker.
        config.stash[_SESSION_CLUSTER] = _worker_cluster(config)
        return
    _lease_cluster_name(config)
    workers = _xdist_workers(config)
    session_cluster: AbstractContextManager[Cluster] = open_cluster(config)
    config.stash[_SESSION_CLUSTER] = session_cluster
    if workers:
        # The controller runs no test: its workers share the cluster (pytest_unconfigure).
        config.stash[_SESSION_TOKEN] = secrets.token_hex(8)
        config.stash[_POOL_DIR] = make_pool_dir()


def _lease_cluster_name(config: pytest.Config) -> None:
    """Lease the session's cluster name when it brings one up and none is given."""
    if config.getoption("--csi-cluster-name", None):
        return
    if config.getoption("--csi-cluster", "local") not in BRINGS_UP:
        return  # an existing cluster is found by its name (default: DEFAULT_NAME)
    try:
        lease = lease_name(DEFAULT_NAME, scope=config.getoption("--csi-cluster", "local"))
    except NoNameFree as exc:
        raise pytest.UsageError(f"--csi-cluster-name: {exc}") from exc
    config.stash[_NAME_LEASE] = lease
    config.stash[SESSION_NAME] = lease.name


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


def _set_time_scale(config: pytest.Config) -> None:
    """--csi-time-scale into the environment, where every wait reads it (xdist's
    workers run this too); without it, a CSI_HARNESS_TIME_SCALE that is not a time scale
    stops the session here rather than at the first wait."""
    scale = config.getoption("--csi-time-scale", None)
    if scale is not None:
        os.environ[TIME_SCALE_VARIABLE] = f"{scale:g}"
        return
    try:
        time_scale()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's hook, in the controller: tell each worker the session's token
    and the cluster name it leased."""
    node.workerinput[SESSION_INPUT] = node.config.stash[_SESSION_TOKEN]
    node.workerinput[POOL_INPUT] = str(node.config.stash[_POOL_DIR].path)
    name = node.config.stash.get(SESSION_NAME, None)
    if name is not None:
        node.workerinput[NAME_INPUT] = name


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller of workers tears down the cluster one of them brought up for
    this session (unless --csi-keep-cluster); then the session lets go of its name."""
    try:
        pool_dir = config.stash.get(_POOL_DIR, None)
        if pool_dir is not None:  # the last worker removed the drivers it held
            pool_dir.remove()
        token = config.stash.get(_SESSION_TOKEN, None)
        if token is None:
            return
        provider = open_cluster(config)
        if not _shared(provider):
            return
        message = end_session(provider, token, keep=provider.keep)
        if message is not None:
            progress_writer(config)(message)
    finally:
        lease = config.stash.get(_NAME_LEASE, None)
        if lease is not None:
            lease.release()
