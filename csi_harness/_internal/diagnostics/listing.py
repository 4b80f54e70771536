"""Listing the cluster's objects as plain data, and which kinds diagnostics show.

Plain dicts, not lightkube's typed models: those refuse some real objects (a CSINode
with ``spec.drivers: null``), and diagnostics must show exactly those."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
)

from csi_harness._internal.diagnostics.failsafe import Skipped, describe_error
from csi_harness._internal.diagnostics.sources import ClusterTarget
from csi_harness._internal.kube.describe import (
    describe_attachment,
    describe_capacity,
    describe_claim,
    describe_csidriver,
    describe_csinode,
    describe_pod,
    describe_snapshot,
    describe_snapshot_content,
    describe_volume,
)


class KubeLister(Protocol):
    """The part of ``lightkube.Client`` used here."""

    def list(self, res: Any, *, namespace: str | None = ...) -> Iterable[Any]: ...


def connect_kube(kubeconfig: Path) -> KubeLister:
    client: KubeLister = Client(KubeConfig.from_file(kubeconfig))
    return client


class KubeReader:
    """Lists objects as plain dicts, without managedFields. After the first failure
    that is not an API answer (connection refused, timeout, bad kubeconfig) it stops
    trying, so a dead apiserver costs one timeout, not one per object kind."""

    def __init__(self, connect: Callable[[], KubeLister]) -> None:
        self._connect = connect
        self._client: KubeLister | None = None
        self.down: str | None = None
        """Why the apiserver is not tried any more."""

    def list(self, resource: Any, namespace: str | None = None) -> list[dict[str, Any]]:
        if self.down is not None:
            raise Skipped("the apiserver failed before")
        try:
            if self._client is None:
                self._client = self._connect()
            found = (
                self._client.list(resource)
                if namespace is None
                else self._client.list(resource, namespace=namespace)
            )
            return [_plain(obj, resource) for obj in found]
        except ApiError:
            raise
        except Exception as error:
            self.down = describe_error(error)
            raise


def _plain(obj: Any, resource: Any) -> dict[str, Any]:
    """The object as a dict, with the apiVersion and kind a list's items lack, and
    without managedFields."""
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    info = getattr(resource, "_api_info", None)
    if info is not None:
        group, version = info.resource.group, info.resource.version
        data = {
            "apiVersion": f"{group}/{version}" if group else version,
            "kind": info.resource.kind,
            **data,
        }
    return data


def plain_resource(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> Any:
    """A lightkube resource class whose objects are listed as plain dicts.

    lightkube's typed models refuse some real objects (a CSINode has
    ``spec.drivers: null`` while no driver is registered), and diagnostics must show
    exactly those. Unlike ``create_global_resource``, the class is not registered, so
    ``lightkube.codecs`` keeps decoding these kinds to the typed models elsewhere."""
    base = GenericNamespacedResource if namespaced else GenericGlobalResource
    api_info = create_api_info(group, version, kind, plural, verbs=["list"])
    return type(kind, (base,), {"_api_info": api_info})


STORAGE = "storage.k8s.io"


EVENTS = plain_resource("", "v1", "Event", "events", namespaced=True)


@dataclass(frozen=True)
class ObjectKind:
    label: str
    """Plural, as in the section and the file name."""
    resource: Any
    """The lightkube resource class (a ``plain_resource``)."""
    describe: Callable[[Mapping[str, Any]], str]
    scope: Literal["cluster", "test", "driver"]
    """Cluster-scoped, or listed in the test's namespace or in the driver's."""
    optional: bool = False
    """A kind of a CRD that a cluster may not serve (then skipped, not a problem)."""

    def namespace(self, target: ClusterTarget) -> str | None:
        if self.scope == "test":
            return target.namespace
        return target.driver_namespace if self.scope == "driver" else None


def _kind(
    label: str,
    group: str,
    kind: str,
    describe: Callable[[Mapping[str, Any]], str],
    scope: Literal["cluster", "test", "driver"],
    *,
    optional: bool = False,
) -> ObjectKind:
    resource = plain_resource(group, "v1", kind, label, namespaced=scope != "cluster")
    return ObjectKind(label, resource, describe, scope, optional=optional)


SNAPSHOTS = "snapshot.storage.k8s.io"


OBJECT_KINDS = (
    _kind("pods", "", "Pod", describe_pod, "test"),
    _kind("persistentvolumeclaims", "", "PersistentVolumeClaim", describe_claim, "test"),
    _kind("persistentvolumes", "", "PersistentVolume", describe_volume, "cluster"),
    _kind("volumeattachments", STORAGE, "VolumeAttachment", describe_attachment, "cluster"),
    _kind("csistoragecapacities", STORAGE, "CSIStorageCapacity", describe_capacity, "driver"),
    _kind("csinodes", STORAGE, "CSINode", describe_csinode, "cluster"),
    _kind("csidrivers", STORAGE, "CSIDriver", describe_csidriver, "cluster"),
    _kind("volumesnapshots", SNAPSHOTS, "VolumeSnapshot", describe_snapshot, "test", optional=True),
    _kind(
        "volumesnapshotcontents",
        SNAPSHOTS,
        "VolumeSnapshotContent",
        describe_snapshot_content,
        "cluster",
        optional=True,
    ),
)
"""What the objects section shows, in this order; "test" kinds only when the test
has a namespace."""
