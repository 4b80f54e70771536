"""The Kubernetes objects of a driver on the local provider (``LocalDriver``): its
namespace, CSIDriver, StorageClasses and VolumeSnapshotClass, made by
``apply_objects`` and removed by ``remove_objects``, and the CSIStorageCapacity objects
its provisioner published, which no pod owns here."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity, StorageClass
from lightkube.types import CascadeType

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import (
    DriverDeployment,
    csidriver_object,
    snapshot_class_object,
    storage_class_objects,
)
from csi_harness._internal.kube.objects import gone
from csi_harness._internal.kube.snapshots import VolumeSnapshotClass, replace_snapshot_class
from csi_harness._internal.kube.waits import DRIVER_NAME_LABEL


def apply_objects(kube: Client, spec: DriverDeployment) -> None:
    """Create the deployment's namespace (unless it exists), its CSIDriver (when the
    spec has one) and StorageClasses, each replacing one of its name, and its
    VolumeSnapshotClass when it takes snapshots."""
    with contextlib.suppress(ApiError):
        kube.create(cast(Namespace, Namespace.from_dict({"metadata": {"name": spec.namespace}})))
    if spec.csidriver:
        # attachRequired is immutable: replace the object when it differs.
        with contextlib.suppress(ApiError):
            kube.delete(CSIDriver, spec.name)
        wait_for(
            "the old CSIDriver to be deleted",
            partial(gone, kube, CSIDriver, spec.name),
            timeout=10,
        )
        kube.create(cast(Any, from_dict(csidriver_object(spec))))
    else:
        with contextlib.suppress(ApiError):
            kube.delete(CSIDriver, spec.name)
    for obj in storage_class_objects(spec):
        name: str = obj["metadata"]["name"]
        with contextlib.suppress(ApiError):
            kube.delete(StorageClass, name)
        wait_for(
            f"StorageClass {name} to be deleted",
            partial(gone, kube, StorageClass, name),
            timeout=10,
        )
        kube.create(cast(Any, from_dict(obj)))
    if spec.snapshots is not None:
        replace_snapshot_class(kube, snapshot_class_object(spec))


def remove_objects(kube: Client, spec: DriverDeployment) -> None:
    """Delete what ``apply_objects`` made and no other deployment shares: the
    CSIDriver and the StorageClasses, and the namespace if it is the deployment's
    own (a suffixed one). Nothing waits for them to go: the names are not reused."""
    with contextlib.suppress(ApiError):
        kube.delete(CSIDriver, spec.name)
    for obj in storage_class_objects(spec):
        with contextlib.suppress(ApiError):
            kube.delete(StorageClass, obj["metadata"]["name"])
    if spec.snapshots is not None:
        with contextlib.suppress(ApiError):
            kube.delete(VolumeSnapshotClass, spec.snapshot_class())
    if spec.suffix:
        with contextlib.suppress(ApiError):
            kube.delete(Namespace, spec.namespace, cascade=CascadeType.BACKGROUND)


def delete_capacity_objects(kube: Client, spec: DriverDeployment) -> None:
    """Delete the driver's CSIStorageCapacity objects: they have no owner on this
    provider, so nothing else would."""
    namespace = spec.namespace
    with contextlib.suppress(ApiError):
        for capacity in kube.list(
            CSIStorageCapacity, namespace=namespace, labels={DRIVER_NAME_LABEL: spec.name}
        ):
            if capacity.metadata and capacity.metadata.name:
                kube.delete(CSIStorageCapacity, capacity.metadata.name, namespace=namespace)
