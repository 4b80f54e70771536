"""The public API of csi-mock's conformance harness, for suites of your own.

Install csi-mock with its ``harness`` extra (from a checkout or a built wheel: see
the README); the pytest plugin then loads by itself and gives the fixtures
``cluster``, ``kube``, ``driver``, ``namespace`` and ``admin``, the options
``--csi-cluster local|kind|existing`` (and the others of ``pytest --help``'s
"csi-harness" group) and the markers
``@pytest.mark.driver(**DriverDeployment fields)`` and ``@pytest.mark.cluster_wide``.

Everything importable from here is public and kept stable; ``csi_harness._internal``
behind it is private (its modules move as the harness grows). Example, a whole test::

    import pytest

    from csi_harness import NOT_ENOUGH_STORAGE, objects, wait_pod_unschedulable

    @pytest.mark.driver(node_pool_size="2Gi")
    def test_a_claim_larger_than_every_pool_is_not_scheduled(kube, namespace, driver):
        objects.create(
            kube,
            objects.claim("big", namespace, "3Gi", driver.spec.storage_class()),
            objects.pod("app", namespace, claims=["big"]),
        )
        wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)

See docs/testing.md ("Suites of your own on a cluster") in csi-mock's repository.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from csi_harness._internal.deploy.spec import DriverDeployment, ProvisionerMode, node_pool_name
    from csi_harness._internal.kube import objects
    from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
    from csi_harness._internal.kube.namespaces import empty_namespace
    from csi_harness._internal.kube.waits import (
        AnnotationHistory,
        capacities,
        events,
        volume_attachments,
        wait_bound_volume,
        wait_capacity,
        wait_claim,
        wait_event,
        wait_for,
        wait_pod_running,
        wait_pod_scheduled,
        wait_pod_unschedulable,
        wait_volume_attachment,
        wait_volume_attachments_gone,
    )
    from csi_harness._internal.providers.base import (
        Cluster,
        ClusterNode,
        ComponentMetrics,
        ConfiguredFeatureGates,
        Driver,
        FeatureGates,
        KubeletRestarts,
        OwnSchedulers,
        SchedulerRestarts,
        Unsupported,
        component_metrics,
        configured_feature_gates,
        feature_gates,
        kubelet_restarts,
        own_schedulers,
        pick_nodes,
        scheduler_restarts,
        scheduling_nodes,
    )
    from csi_harness._internal.providers.volume_conditions import (
        clear_volume_condition,
        set_volume_condition,
    )
    from csi_mock.admin.client import AdminClient, AdminError

# Loaded on first use, not at import: the package also holds the pytest plugin's entry
# point, which pytest imports in a driver-only install (no lightkube) too.
_PUBLIC = {
    "AdminClient": "csi_mock.admin.client",
    "AdminError": "csi_mock.admin.client",
    "DriverDeployment": "csi_harness._internal.deploy.spec",
    "ProvisionerMode": "csi_harness._internal.deploy.spec",
    "node_pool_name": "csi_harness._internal.deploy.spec",
    "CSINodeResource": "csi_harness._internal.kube.csinode",
    "csinode_drivers": "csi_harness._internal.kube.csinode",
    "empty_namespace": "csi_harness._internal.kube.namespaces",
    **dict.fromkeys(
        (
            "AnnotationHistory",
            "capacities",
            "events",
            "volume_attachments",
            "wait_bound_volume",
            "wait_capacity",
            "wait_claim",
            "wait_event",
            "wait_for",
            "wait_pod_running",
            "wait_pod_scheduled",
            "wait_pod_unschedulable",
            "wait_volume_attachment",
            "wait_volume_attachments_gone",
        ),
        "csi_harness._internal.kube.waits",
    ),
    **dict.fromkeys(
        (
            "Cluster",
            "ClusterNode",
            "ComponentMetrics",
            "ConfiguredFeatureGates",
            "Driver",
            "FeatureGates",
            "KubeletRestarts",
            "OwnSchedulers",
            "SchedulerRestarts",
            "Unsupported",
            "component_metrics",
            "configured_feature_gates",
            "feature_gates",
            "kubelet_restarts",
            "own_schedulers",
            "pick_nodes",
            "scheduler_restarts",
            "scheduling_nodes",
        ),
        "csi_harness._internal.providers.base",
    ),
    **dict.fromkeys(
        ("clear_volume_condition", "set_volume_condition"),
        "csi_harness._internal.providers.volume_conditions",
    ),
}


def __getattr__(name: str) -> Any:
    if name == "objects":
        return import_module("csi_harness._internal.kube.objects")
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'csi_harness' has no attribute {name!r}")
    return getattr(import_module(module), name)


NOT_ENOUGH_STORAGE = "did not have enough free storage"
"""kube-scheduler's VolumeBinding reason when CSIStorageCapacity rules a node out."""
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
"""kube-scheduler's NodeVolumeLimits reason (the CSINode allocatable count is reached)."""

__all__ = [
    "MAX_VOLUME_COUNT",
    "NOT_ENOUGH_STORAGE",
    "AdminClient",
    "AdminError",
    "AnnotationHistory",
    "CSINodeResource",
    "Cluster",
    "ClusterNode",
    "ComponentMetrics",
    "ConfiguredFeatureGates",
    "Driver",
    "DriverDeployment",
    "FeatureGates",
    "KubeletRestarts",
    "OwnSchedulers",
    "ProvisionerMode",
    "SchedulerRestarts",
    "Unsupported",
    "capacities",
    "clear_volume_condition",
    "component_metrics",
    "configured_feature_gates",
    "csinode_drivers",
    "empty_namespace",
    "events",
    "feature_gates",
    "kubelet_restarts",
    "node_pool_name",
    "objects",
    "own_schedulers",
    "pick_nodes",
    "scheduler_restarts",
    "scheduling_nodes",
    "set_volume_condition",
    "volume_attachments",
    "wait_bound_volume",
    "wait_capacity",
    "wait_claim",
    "wait_event",
    "wait_for",
    "wait_pod_running",
    "wait_pod_scheduled",
    "wait_pod_unschedulable",
    "wait_volume_attachment",
    "wait_volume_attachments_gone",
]
