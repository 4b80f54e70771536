"""Fixtures the end-to-end suites share (the cluster, driver and namespace fixtures
come from the pytest plugin, csi_harness/_internal/pytest_plugin/)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from lightkube import Client

from csi_harness._internal.kube.capacity_barrier import CapacityBarrier
from csi_harness._internal.kube.scheduler_config import capacity_scoring_profile
from csi_harness._internal.kube.waits import wait_pod_running, wait_pod_scheduled
from csi_harness._internal.providers.base import (
    Cluster,
    Driver,
    FeatureGates,
    Unsupported,
    own_schedulers,
    pick_nodes,
)
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_mock.observe.calls import CallRecord


@pytest.fixture(scope="session")
def local_cluster(cluster: Cluster) -> LocalCluster:
    """The cluster, for the tests of the local provider itself (``test_local_*.py``,
    the manifest checks): skipped on other providers. The one place a test asks for a
    provider's class, because that class is what those tests test; every other test
    asks for a capability (``providers.base``)."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip(f"tests the local provider; cluster {cluster.name!r} is not a local one")
    return cluster


def scheduler_gate(cluster: Cluster, gate: str) -> bool | None:
    """What the cluster's kube-scheduler runs with for ``gate``; None when it is not
    set explicitly or the cluster cannot tell (``FeatureGates``)."""
    return cluster.scheduler_feature_gate(gate) if isinstance(cluster, FeatureGates) else None


SCORING_OFF = "CSI_HARNESS_SCORING_OFF"
"""Set (to anything) to run the scoring tests' own schedulers with VolumeBinding's score
off: each of those tests must then fail, which shows it cannot pass by a tie-break."""
Shape = tuple[tuple[int, int], ...] | None


@dataclass(frozen=True)
class ScoringScheduler:
    """One profile of a test's own kube-scheduler: its pods name it in
    ``spec.schedulerName``."""

    name: str
    barrier: CapacityBarrier

    def catch_up(self, namespace: str, node: str) -> None:
        """Wait until the scheduler has seen every CSIStorageCapacity change made so
        far (``CapacityBarrier``: a probe pod of ``namespace`` pinned to ``node``)."""
        self.barrier.wait_seen(self.name, namespace, node)


@pytest.fixture
def own_scheduler(
    cluster: Cluster, kube: Client
) -> Iterator[Callable[..., list[ScoringScheduler]]]:
    """Starts a kube-scheduler of the test's own (``OwnSchedulers``) with one profile
    per shape given (None: the default shape), VolumeBinding weighed against
    NodeAffinity alone when ``against_preference`` (``capacity_scoring_profile``), and
    StorageCapacityScoring on; returns its profiles, whose
    names the test's pods give as ``schedulerName``. Stopped after the test; the
    cluster's own scheduler is never touched."""
    with contextlib.ExitStack() as running:

        def start(*shapes: Shape, against_preference: bool) -> list[ScoringScheduler]:
            try:
                schedulers = own_schedulers(cluster)
            except Unsupported as unsupported:
                pytest.skip(str(unsupported))
            name = "csi-scoring-" + secrets.token_hex(3)
            names = [f"{name}-{i}" for i in range(len(shapes))]
            profiles = [
                capacity_scoring_profile(
                    n,
                    shape,
                    against_preference=against_preference,
                    scoring=SCORING_OFF not in os.environ,
                )
                for n, shape in zip(names, shapes, strict=True)
            ]
            # Made before the scheduler starts, so that its first list holds them.
            barrier = running.enter_context(CapacityBarrier.installed(kube))
            running.enter_context(
                schedulers.own_scheduler(name, profiles, {"StorageCapacityScoring": True})
            )
            return [ScoringScheduler(n, barrier) for n in names]

        yield start


def wait_pod_placed(kube: Client, driver: Driver, name: str, namespace: str) -> str:
    """Wait until the pod is scheduled and, where its node has a real kubelet, running
    (as upstream waits for Running; a simulated node never starts a pod, so there the
    test proves scheduling only, which the coverage table says); return its node."""
    node = wait_pod_scheduled(kube, name, namespace)
    if any(n.name == node and n.runs_pods for n in driver.nodes):
        wait_pod_running(kube, name, namespace, timeout=120)
    return node


def picked_node(driver: Driver, *, runs_pods: bool) -> str:
    """A node that runs pods, or one that does not; the test is skipped when the
    cluster has none."""
    try:
        (node,) = pick_nodes(driver.nodes, 1, runs_pods=runs_pods)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    return node.name


@pytest.fixture
def pod_node(driver: Driver) -> str:
    """The node the test's running pods are pinned to (on the local provider the one
    with a real kubelet)."""
    return picked_node(driver, runs_pods=True)


def node_calls(driver: Driver, node: str, method: str, volume_id: str) -> list[CallRecord]:
    """The journal of ``node``'s csi-mock instance: ``method`` calls for the volume."""
    with driver.admin(node) as node_admin:
        return node_admin.journal(method=method, volume=volume_id)
