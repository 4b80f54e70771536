"""The snapshot.storage.k8s.io API as the suites use it: its CRDs (from the
external-snapshotter build, installed where the cluster has none), VolumeSnapshot
and VolumeSnapshotClass objects, and the wait for a snapshot to be ready.

lightkube's models do not cover CRDs' kinds; these are generic resources, read and
written as plain mappings.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, cast

import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.objects import exists, get_or_none, gone
from csi_harness._internal.kube.watching import ListerWatcher, watch_until

GROUP = "snapshot.storage.k8s.io"
VolumeSnapshot = create_namespaced_resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots")
VolumeSnapshotClass = create_global_resource(
    GROUP, "v1", "VolumeSnapshotClass", "volumesnapshotclasses"
)
VolumeSnapshotContent = create_global_resource(
    GROUP, "v1", "VolumeSnapshotContent", "volumesnapshotcontents"
)
KINDS = ("volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots")
"""The CRDs (plural names in GROUP) the snapshot-controller and csi-snapshotter need;
the group snapshot ones (groupsnapshot.storage.k8s.io) come with them, as the
controller watches those too."""


def crd_manifests(directory: Path) -> list[dict[str, Any]]:
    """The CRDs in ``directory`` (the ``crd`` directory of the csi-snapshotter unit's
    build: external-snapshotter's client/config/crd), the snapshot ones required."""
    found = {p.name: p for p in directory.glob("*.yaml") if p.name != "kustomization.yaml"}
    missing = sorted({f"{GROUP}_{kind}.yaml" for kind in KINDS} - set(found))
    if missing:
        raise RuntimeError(f"snapshot CRDs missing in {directory}: {', '.join(missing)}")
    return [yaml.safe_load(found[name].read_text()) for name in sorted(found)]


def install_crds(kube: Client, directory: Path, *, timeout: float = 60) -> list[str]:
    """Create the snapshot CRDs the cluster does not have yet (an existing CRD, perhaps
    of another version, is left alone) and wait until all are established; return
    the names created."""
    created = []
    for manifest in crd_manifests(directory):
        name = manifest["metadata"]["name"]
        try:
            kube.create(cast(Any, from_dict(manifest)))
            created.append(name)
        except ApiError as exc:
            if exc.status.code != 409:
                raise
    for manifest in crd_manifests(directory):
        name = manifest["metadata"]["name"]
        wait_for(
            f"CRD {name} to be established",
            partial(_established, kube, name),
            timeout=timeout,
            interval=0.2,
        )
    return created


def has_snapshot_api(kube: Client) -> bool:
    """Whether the cluster serves VolumeSnapshots (has the snapshot CRDs)."""
    return exists(kube, CustomResourceDefinition, f"volumesnapshots.{GROUP}")


def _established(kube: Client, name: str) -> tuple[bool, str]:
    crd = kube.get(CustomResourceDefinition, name)
    conditions = {c.type: c.status for c in (crd.status.conditions or [])} if crd.status else {}
    return conditions.get("Established") == "True", f"conditions {conditions}"


def replace_snapshot_class(kube: Client, manifest: dict[str, Any]) -> None:
    """Create the VolumeSnapshotClass, replacing one of that name (its driver and
    deletionPolicy cannot change in place)."""
    name = manifest["metadata"]["name"]
    try:
        kube.delete(VolumeSnapshotClass, name)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
    wait_for(
        f"VolumeSnapshotClass {name} to be deleted",
        partial(gone, kube, VolumeSnapshotClass, name),
        timeout=10,
    )
    kube.create(VolumeSnapshotClass.from_dict(manifest))


def volume_snapshot(name: str, namespace: str, claim: str, snapshot_class: str) -> dict[str, Any]:
    """A VolumeSnapshot of the claim ``claim``."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "volumeSnapshotClassName": snapshot_class,
            "source": {"persistentVolumeClaimName": claim},
        },
    }


def create_snapshot(kube: Client, manifest: dict[str, Any]) -> None:
    kube.create(VolumeSnapshot.from_dict(manifest))


def snapshot_source(name: str) -> dict[str, str]:
    """A claim's ``dataSource`` naming the VolumeSnapshot ``name``."""
    return {"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": name}


def describe_snapshot(snapshot: Any) -> str:
    status = dict(snapshot.get("status") or {})
    parts = [f"readyToUse={status.get('readyToUse')}"]
    for key in ("boundVolumeSnapshotContentName", "restoreSize", "error"):
        if key in status:
            parts.append(f"{key}={status[key]}")
    return ", ".join(parts)


def wait_snapshot_ready(
    kube: Client | ListerWatcher, name: str, namespace: str, timeout: float = 60
) -> Any:
    """Wait until the VolumeSnapshot is readyToUse; return it (a generic resource:
    ``snapshot["status"]["restoreSize"]``)."""

    def check(snapshots: dict[str, Any]) -> tuple[bool, Any]:
        snapshot = snapshots.get(name)
        if snapshot is None:
            return False, f"no VolumeSnapshot {name}"
        ready = bool((snapshot.get("status") or {}).get("readyToUse"))
        return ready, snapshot if ready else describe_snapshot(snapshot)

    return watch_until(
        kube,
        VolumeSnapshot,
        namespace=namespace,
        name=name,
        what=f"VolumeSnapshot {namespace}/{name} ready to use",
        check=check,
        timeout=timeout,
    )


BEING_CREATED = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
"""The annotations on a VolumeSnapshotContent by which the snapshot-controller and
csi-snapshotter hand a deletion over: csi-snapshotter deletes a content marked
being-deleted, but not while it is still marked being-created."""


def snapshot_deleted(kube: Client, name: str, namespace: str) -> tuple[bool, str]:
    """A ``wait_for`` probe: the VolumeSnapshot is gone. Until it is, the observation
    says what holds it: its finalizers, and whether its content is still there, marked
    being-created or being-deleted, and with which finalizers; a stalled deletion then
    shows which controller has not acted."""
    snapshot = get_or_none(kube, VolumeSnapshot, name, namespace=namespace)
    if snapshot is None:
        return True, f"{name} gone"
    metadata = snapshot.get("metadata") or {}
    parts = [
        f"{name} still exists (deletionTimestamp={metadata.get('deletionTimestamp')}, "
        f"finalizers={metadata.get('finalizers') or []})"
    ]
    content_name = (snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
    if content_name is not None:
        parts.append(_describe_content(kube, content_name))
    return False, "; ".join(parts)


def _describe_content(kube: Client, name: str) -> str:
    content = get_or_none(kube, VolumeSnapshotContent, name)
    if content is None:
        return f"its content {name} is gone"
    metadata = content.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    marks = [
        mark.rsplit("/", 1)[1] for mark in (BEING_CREATED, BEING_DELETED) if mark in annotations
    ]
    status = content.get("status") or {}
    return (
        f"its content {name}: deletionTimestamp={metadata.get('deletionTimestamp')}, "
        f"finalizers={metadata.get('finalizers') or []}, "
        f"marked {', '.join(marks) or 'neither being-created nor being-deleted'}, "
        f"readyToUse={status.get('readyToUse')}, snapshotHandle={status.get('snapshotHandle')}"
    )


def wait_snapshot_deleted(kube: Client, name: str, namespace: str, *, timeout: float) -> None:
    """Wait until the VolumeSnapshot is gone (``snapshot_deleted``)."""
    wait_for(
        f"VolumeSnapshot {namespace}/{name} to be deleted",
        lambda: snapshot_deleted(kube, name, namespace),
        timeout=timeout,
        interval=0.2,
    )
