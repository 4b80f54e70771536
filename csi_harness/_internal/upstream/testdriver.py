"""The testdriver definition Kubernetes' "External Storage" suites read
(``e2e.test -storage.testdriver=FILE``), derived from a ``DriverDeployment``.

Field names are those of k8s.io/kubernetes/test/e2e/storage/external (driverDefinition)
and storage/framework (DriverInfo, Capability). What the deployment can do decides each
capability: snapshots, clones and VolumeAttributesClasses only where it has them
configured, so without them those specs are skipped with the suites' own reason.
"""

from __future__ import annotations

from typing import Any

import yaml

from csi_harness._internal.deploy.spec import DriverDeployment, storage_class_objects

STORAGE_CLASS = "csi-mock"
"""The StorageClass (WaitForFirstConsumer, expansion allowed) the specs copy."""


def capabilities(spec: DriverDeployment) -> dict[str, bool]:
    """What csi-mock supports, in the suites' capability names."""
    return {
        "persistence": True,  # Data stays in the backing file or directory.
        "block": True,  # Loop devices over the backing file.
        "fsGroup": True,  # CSIDriver fsGroupPolicy File: the kubelet chowns the volume.
        "exec": True,
        "multipods": True,  # Several pods on one node share a volume.
        "RWX": False,  # Volumes live on one node's pool.
        "controllerExpansion": True,
        "nodeExpansion": True,
        "onlineExpansion": True,
        "offlineExpansion": True,
        "topology": True,
        "capacity": bool(spec.storage_capacity),
        "singleNodeVolume": True,
        "readWriteOncePod": True,
        "snapshotDataSource": spec.snapshots is not None,
        "pvcDataSource": spec.clones,
        "volumeLimits": False,  # The suites' limit test takes very long; our own suite covers it.
    }


def driver_definition(
    spec: DriverDeployment,
    *,
    max_size: str,
    storage_class_file: str | None = None,
    attributes_class_file: str | None = None,
) -> dict[str, Any]:
    """The definition for ``spec``. The specs copy the StorageClass from
    ``storage_class_file`` (its path as e2e.test sees it, written from
    ``storage_class_manifest``), else use the deployment's ``csi-mock`` class as it is;
    the VolumeAttributesClass from ``attributes_class_file`` (written from
    ``attributes_class_manifest``), else they skip the modify specs. With snapshots,
    they make a VolumeSnapshotClass of the driver's name (SnapshotClass.FromName)."""
    source = (
        {"FromFile": storage_class_file}
        if storage_class_file is not None
        else {"FromExistingClassName": spec.storage_class(STORAGE_CLASS)}
    )
    definition: dict[str, Any] = {
        "StorageClass": source,
        "DriverInfo": {
            "Name": spec.name,
            "SupportedSizeRange": {"Min": "1Mi", "Max": max_size},
            "SupportedFsType": {"": {}},
            "Capabilities": capabilities(spec),
            # Both keys: csi-mock reports node and zone in every segment, and the
            # capacity spec expects CSIStorageCapacity segments of exactly these keys.
            "TopologyKeys": [spec.node_topology_key, spec.zone_topology_key],
        },
        "InlineVolumes": [{"Attributes": {"size": "16Mi"}}],
    }
    if spec.snapshots is not None:
        definition["SnapshotClass"] = {"FromName": True}
    if attributes_class_file is not None:
        definition["VolumeAttributesClass"] = {"FromFile": attributes_class_file}
    return definition


def attributes_class_manifest(spec: DriverDeployment) -> dict[str, Any]:
    """A VolumeAttributesClass of the driver with, for each of its mutable parameters,
    the first allowed value (or "1" where any value goes), which the specs copy."""
    if not spec.mutable_parameters:
        raise ValueError("a VolumeAttributesClass needs a deployment with mutable_parameters")
    parameters = {
        name: values[0] if values else "1" for name, values in spec.mutable_parameters.items()
    }
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttributesClass",
        "metadata": {"name": spec.storage_class("csi-mock-e2e")},
        "driverName": spec.name,
        "parameters": parameters,
    }


def storage_class_manifest(spec: DriverDeployment) -> dict[str, Any]:
    """The deployment's own ``csi-mock`` StorageClass, which the specs copy under names
    of their own."""
    for manifest in storage_class_objects(spec):
        if manifest["metadata"]["name"] == spec.storage_class(STORAGE_CLASS):
            return manifest
    raise LookupError(f"deploy/kubernetes/storageclasses.yaml has no {STORAGE_CLASS!r}")


def dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)
