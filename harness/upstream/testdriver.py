"""The testdriver definition Kubernetes' "External Storage" suites read
(``e2e.test -storage.testdriver=FILE``), derived from a ``DriverDeployment``.

Field names are those of k8s.io/kubernetes/test/e2e/storage/external (driverDefinition)
and storage/framework (DriverInfo, Capability). What the driver can do decides each
capability; what it cannot do yet (snapshots, clones, modify) stays false, so those
specs are skipped with the suites' own reason.
"""

from __future__ import annotations

from typing import Any

import yaml

from harness.deploy.spec import DriverDeployment, storage_class_objects

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
        "snapshotDataSource": False,  # Not implemented yet (UNIMPLEMENTED).
        "pvcDataSource": False,  # Clones: not implemented yet.
        "volumeLimits": False,  # The suites' limit test takes very long; our own suite covers it.
    }


def driver_definition(
    spec: DriverDeployment, *, max_size: str, storage_class_file: str | None = None
) -> dict[str, Any]:
    """The definition for ``spec``. The specs copy the StorageClass from
    ``storage_class_file`` (its path as e2e.test sees it, written from
    ``storage_class_manifest``), else use the deployment's ``csi-mock`` class as it is."""
    source = (
        {"FromFile": storage_class_file}
        if storage_class_file is not None
        else {"FromExistingClassName": spec.storage_class(STORAGE_CLASS)}
    )
    return {
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


def storage_class_manifest(spec: DriverDeployment) -> dict[str, Any]:
    """The deployment's own ``csi-mock`` StorageClass, which the specs copy under names
    of their own."""
    for manifest in storage_class_objects(spec):
        if manifest["metadata"]["name"] == spec.storage_class(STORAGE_CLASS):
            return manifest
    raise LookupError(f"deploy/kubernetes/storageclasses.yaml has no {STORAGE_CLASS!r}")


def dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)
