"""What the cluster shows of one driver (``observe``): its CSIDriver, StorageClasses,
CSINode entries, the nodes' topology labels and the CSIStorageCapacity objects of its
classes. The driver pool compares it before and after a test, and after an in-place
change with what the change should show."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import ALL_NS, Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity, StorageClass

from csi_harness._internal.deploy.spec import storage_class_objects
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.providers.base import Driver

PARTS = ("csidriver", "storage_classes", "csinode_entries", "topology_labels", "capacity")
LASTING = ("csidriver", "storage_classes")
"""The parts nothing in the cluster puts back: a difference there stays (the others
follow the driver: the kubelets register it, external-provisioner publishes its
capacity)."""


@dataclass(frozen=True)
class ClusterView:
    """What the cluster shows of one driver: compared before and after a test."""

    csidriver: Mapping[str, Any] | None
    storage_classes: Mapping[str, Mapping[str, Any]]
    csinode_entries: Mapping[str, Mapping[str, Any]]
    topology_labels: Mapping[str, Mapping[str, str]]
    capacity: Mapping[tuple[str, str], tuple[str | None, str | None]]

    def differences(self, other: ClusterView, parts: tuple[str, ...] = PARTS) -> list[str]:
        """What differs from ``other`` in ``parts``, one line per part (empty: nothing)."""
        return [
            f"{part}: {getattr(self, part)!r}, was {getattr(other, part)!r}"
            for part in parts
            if getattr(self, part) != getattr(other, part)
        ]

    def to_json(self) -> dict[str, Any]:
        """The view as JSON values (``from_json`` gives it back equal)."""
        return {
            "csidriver": self.csidriver,
            "storage_classes": self.storage_classes,
            "csinode_entries": self.csinode_entries,
            "topology_labels": self.topology_labels,
            "capacity": [[*key, *value] for key, value in self.capacity.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterView:
        return cls(
            data["csidriver"],
            data["storage_classes"],
            data["csinode_entries"],
            data["topology_labels"],
            {(c, t): (size, largest) for c, t, size, largest in data["capacity"]},
        )


def observe(kube: Client, driver: Driver) -> ClusterView:
    """What the cluster shows of ``driver`` now."""
    spec = driver.spec
    nodes = {node.name for node in driver.nodes}
    try:
        csidriver_obj = kube.get(CSIDriver, spec.name)
        csidriver: Mapping[str, Any] | None = (
            csidriver_obj.spec.to_dict() if csidriver_obj.spec else {}
        )
    except ApiError:
        csidriver = None
    classes: dict[str, Mapping[str, Any]] = {}
    for wanted in storage_class_objects(spec):
        name = str(wanted["metadata"]["name"])
        try:
            live = kube.get(StorageClass, name).to_dict()
        except ApiError:
            continue
        live.pop("metadata", None)
        classes[name] = live
    entries = csinode_entries(kube, driver)
    keys = (spec.node_topology_key, spec.zone_topology_key)
    labels = {
        str(node.metadata.name): {
            key: value for key, value in (node.metadata.labels or {}).items() if key in keys
        }
        for node in kube.list(Node)
        if node.metadata and str(node.metadata.name) in nodes
    }
    # Every namespace's objects of the driver's classes, as the scheduler reads them:
    # one a test made (a stand-in for a provisioner) would mislead the next test.
    capacity = {
        (
            f"{obj.metadata.namespace if obj.metadata else '?'}/{obj.storageClassName}",
            repr(sorted(((obj.nodeTopology and obj.nodeTopology.matchLabels) or {}).items())),
        ): (
            str(obj.capacity) if obj.capacity is not None else None,
            str(obj.maximumVolumeSize) if obj.maximumVolumeSize is not None else None,
        )
        for obj in kube.list(CSIStorageCapacity, namespace=ALL_NS)
        if obj.storageClassName in classes
    }
    return ClusterView(csidriver, classes, entries, labels, capacity)


def csinode_entries(kube: Client, driver: Driver) -> dict[str, Mapping[str, Any]]:
    """The driver's entry in the CSINode of each of its nodes that has one, by node."""
    nodes = {node.name for node in driver.nodes}
    return {
        str(csinode.metadata.name): entry
        for csinode in kube.list(CSINodeResource)
        if csinode.metadata and str(csinode.metadata.name) in nodes
        for entry in csinode_drivers(csinode)
        if entry.get("name") == driver.spec.name
    }
