"""Upstream's snapshot cases (``csi_snapshot.go``): the finalizers that keep a claim and
a VolumeSnapshotContent while a snapshot of the claim is being cut, the
VolumeSnapshotClass's secrets in CreateSnapshot and DeleteSnapshot, and the
snapshot-controller's operation metrics for dynamic and pre-provisioned snapshots.

CreateSnapshot fails (DEADLINE_EXCEEDED from a fault rule on the controller) where
upstream's mock fails its first 8 calls; the whole-request journal shows the secrets
csi-snapshotter passed, hashed with the driver's salt. The metrics are the cluster's
snapshot-controller's (local provider: served on loopback; elsewhere the metric tests
skip, as upstream's do when it finds no metrics), labelled with the test's own driver
name, so other tests' snapshots do not count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Secret
from lightkube.types import PatchType
from prometheus_client.parser import text_string_to_metric_families

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube import objects, snapshots
from csi_harness._internal.kube.waits import wait_bound_volume
from csi_harness._internal.providers.base import (
    Cluster,
    Driver,
    Unsupported,
    component_metrics,
)
from csi_mock.admin.client import AdminClient

pytestmark = [pytest.mark.e2e]

UPSTREAM = "csi_snapshot.go"
IMMEDIATE = "csi-mock-immediate"
PVC_SOURCE_FINALIZER = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
CONTENT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
SNAPSHOT_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
SECRET_NAME = "snapshot-secret"
SECRET_KEY = "secret-data"
SECRET_VALUE = "secret-value-1"
OPERATION_COUNT = "snapshot_controller_operation_total_seconds_count"


def finalizers(obj: Any) -> list[str]:
    metadata = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    found = metadata["finalizers"] if isinstance(metadata, dict) else metadata.finalizers
    return list(found or [])


def deletion_timestamp(obj: Any) -> object:
    metadata = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    return (
        metadata.get("deletionTimestamp")
        if isinstance(metadata, dict)
        else metadata.deletionTimestamp
    )


def wait_finalizer(what: str, get: Any, finalizer: str) -> Any:
    def probe() -> tuple[bool, Any]:
        obj = get()
        return finalizer in finalizers(obj), finalizers(obj)

    wait_for(f"{what} to have the finalizer {finalizer}", probe, timeout=60, interval=0.2)
    return get()


def content_of(kube: Client, name: str, namespace: str) -> Any:
    """The VolumeSnapshotContent the VolumeSnapshot is bound to, once it is."""

    def probe() -> tuple[bool, Any]:
        snapshot = kube.get(snapshots.VolumeSnapshot, name, namespace=namespace)
        content = (snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
        return content is not None, content or snapshots.describe_snapshot(snapshot)

    content = wait_for(f"VolumeSnapshot {name} to be bound", probe, timeout=60, interval=0.2)
    return kube.get(snapshots.VolumeSnapshotContent, content)


def wait_gone(kube: Client, resource: Any, name: str, namespace: str | None = None) -> None:
    wait_for(
        f"{resource.__name__} {name} to be deleted",
        lambda: objects.gone(kube, resource, name, namespace=namespace),
        timeout=90,
        interval=0.2,
    )


def delete_quietly(kube: Client, resource: Any, name: str) -> None:
    try:
        kube.delete(resource, name)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


def wait_journal(admin: AdminClient, what: str, **query: Any) -> list[Any]:
    def probe() -> tuple[bool, list[Any]]:
        records = admin.journal(**query)
        return bool(records), records

    return wait_for(what, probe, timeout=60, interval=0.2)


@pytest.mark.driver(snapshots="full", journal_requests="whole")
@pytest.mark.upstream(
    UPSTREAM,
    "volumesnapshotcontent and pvc in Bound state with deletion timestamp set should "
    "not get deleted while snapshot finalizer exists",
)
def test_a_claim_and_content_being_deleted_stay_while_the_snapshot_is_cut(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    # CreateSnapshot fails until the rule goes: the snapshot is being cut all along.
    rule = admin.add_fault("CreateSnapshot", code="DEADLINE_EXCEEDED")
    # The snapshot first, then its claim, as upstream does.
    snapshots.create_snapshot(
        kube, snapshots.volume_snapshot("snap", namespace, "data", driver.spec.snapshot_class())
    )
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    )

    def claim() -> PersistentVolumeClaim:
        return kube.get(PersistentVolumeClaim, "data", namespace=namespace)

    wait_finalizer("claim data", claim, PVC_SOURCE_FINALIZER)
    pv = wait_bound_volume(kube, "data", namespace, timeout=60)
    assert pv.metadata is not None and pv.metadata.name is not None
    pv_name = pv.metadata.name
    wait_journal(
        admin, "a failed CreateSnapshot", method="CreateSnapshot", code="DEADLINE_EXCEEDED"
    )

    kube.delete(PersistentVolumeClaim, "data", namespace=namespace)
    deleted_claim = claim()
    assert deletion_timestamp(deleted_claim) is not None
    assert PVC_SOURCE_FINALIZER in finalizers(deleted_claim)

    content = content_of(kube, "snap", namespace)
    content_name = content["metadata"]["name"]
    wait_finalizer(
        f"VolumeSnapshotContent {content_name}",
        lambda: kube.get(snapshots.VolumeSnapshotContent, content_name),
        CONTENT_FINALIZER,
    )
    kube.delete(snapshots.VolumeSnapshotContent, content_name)
    deleted_content = kube.get(snapshots.VolumeSnapshotContent, content_name)
    assert deletion_timestamp(deleted_content) is not None
    # Still there: neither object went while the snapshot of the claim was being cut.
    assert deletion_timestamp(claim()) is not None

    admin.remove_fault(rule.id)
    ready = snapshots.wait_snapshot_ready(kube, "snap", namespace, timeout=60)
    handle = kube.get(snapshots.VolumeSnapshotContent, content_name)["status"]["snapshotHandle"]
    assert ready["status"]["boundVolumeSnapshotContentName"] == content_name
    # Cut, the claim lets go: it goes, and its volume with it (reclaim policy Delete).
    wait_gone(kube, PersistentVolume, pv_name)
    wait_finalizer(
        "VolumeSnapshot snap",
        lambda: kube.get(snapshots.VolumeSnapshot, "snap", namespace=namespace),
        SNAPSHOT_FINALIZER,
    )
    kube.delete(snapshots.VolumeSnapshot, "snap", namespace=namespace)
    snapshots.wait_snapshot_deleted(kube, "snap", namespace, timeout=90)
    wait_gone(kube, snapshots.VolumeSnapshotContent, content_name)
    deleted = admin.journal(method="DeleteSnapshot", code="OK", where={"snapshot_id": handle})
    assert len(deleted) == 1, deleted


@pytest.fixture
def secret_snapshot_class(kube: Client, driver: Driver, namespace: str) -> Iterator[str]:
    """A VolumeSnapshotClass of the test's driver whose snapshotter secret is the
    namespace's ``snapshot-secret``, as upstream's; deleted after the test."""
    name = driver.spec.snapshot_class() + "-secrets"
    snapshots.replace_snapshot_class(
        kube,
        {
            "apiVersion": f"{snapshots.GROUP}/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": name},
            "driver": driver.spec.name,
            "deletionPolicy": "Delete",
            "parameters": {
                "csi.storage.k8s.io/snapshotter-secret-name": SECRET_NAME,
                "csi.storage.k8s.io/snapshotter-secret-namespace": namespace,
            },
        },
    )
    yield name
    delete_quietly(kube, snapshots.VolumeSnapshotClass, name)


@pytest.mark.driver(snapshots="full", journal_requests="whole")
@pytest.mark.upstream(UPSTREAM, "volume snapshot create/delete with secrets")
def test_the_snapshot_class_secrets_reach_create_and_delete_snapshot(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, secret_snapshot_class: str
) -> None:
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    )
    wait_bound_volume(kube, "data", namespace, timeout=60)
    objects.create(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET_NAME, "namespace": namespace},
            "stringData": {SECRET_KEY: SECRET_VALUE},
        },
    )
    # Upstream's mock fails the first 8 CreateSnapshot calls; 2 show the same: the
    # retries carry the secrets too.
    admin.add_fault("CreateSnapshot", code="DEADLINE_EXCEEDED", times=2)
    snapshots.create_snapshot(
        kube, snapshots.volume_snapshot("snap", namespace, "data", secret_snapshot_class)
    )
    ready = snapshots.wait_snapshot_ready(kube, "snap", namespace, timeout=60)
    content = kube.get(
        snapshots.VolumeSnapshotContent, ready["status"]["boundVolumeSnapshotContentName"]
    )
    annotations = content["metadata"].get("annotations") or {}
    assert annotations.get("snapshot.storage.kubernetes.io/deletion-secret-name") == SECRET_NAME
    assert annotations.get("snapshot.storage.kubernetes.io/deletion-secret-namespace") == namespace
    kube.get(Secret, SECRET_NAME, namespace=namespace)  # what the annotations name exists

    digest = admin.secret_hash(SECRET_VALUE)
    created = admin.journal(method="CreateSnapshot")
    assert [r.code for r in created] == ["DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED", "OK"]
    for record in created:
        assert record.whole_request is not None
        assert record.whole_request.get("secrets") == {SECRET_KEY: digest}, record.whole_request

    kube.delete(snapshots.VolumeSnapshot, "snap", namespace=namespace)
    snapshots.wait_snapshot_deleted(kube, "snap", namespace, timeout=90)
    wait_gone(kube, snapshots.VolumeSnapshotContent, content["metadata"]["name"])
    (deleted,) = admin.journal(method="DeleteSnapshot")
    assert deleted.code == "OK"
    assert deleted.whole_request is not None
    assert deleted.whole_request.get("secrets") == {SECRET_KEY: digest}, deleted.whole_request
    assert deleted.whole_request.get("snapshot_id") == content["status"]["snapshotHandle"]


def operation_counts(cluster: Cluster, driver: str) -> dict[tuple[str, str, str], float]:
    """The snapshot-controller's operation counts of ``driver``: (operation, status,
    snapshot type) -> count."""
    counts = {}
    for family in text_string_to_metric_families(
        component_metrics(cluster).snapshot_controller_metrics()
    ):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == OPERATION_COUNT and labels.get("driver_name") == driver:
                key = (
                    labels.get("operation_name", ""),
                    labels.get("operation_status", ""),
                    labels.get("snapshot_type", ""),
                )
                counts[key] = sample.value
    return counts


def wait_operation_count(
    cluster: Cluster, driver: str, operation: str, snapshot_type: str, at_least: float
) -> None:
    key = (operation, "success", snapshot_type)

    def probe() -> tuple[bool, object]:
        counts = operation_counts(cluster, driver)
        return counts.get(key, 0) >= at_least, counts

    wait_for(
        f"snapshot-controller's {OPERATION_COUNT} of {key} for {driver} to reach {at_least}",
        probe,
        timeout=60,
        interval=0.5,
    )


def pre_provisioned_snapshot(
    kube: Client, driver: Driver, namespace: str, handle: str, name: str
) -> str:
    """A VolumeSnapshotContent with the snapshot ``handle`` and the VolumeSnapshot
    ``name`` bound to it (deletionPolicy Delete); returns the content's name."""
    content = f"{name}-{namespace}"
    kube.create(
        snapshots.VolumeSnapshotContent.from_dict(
            {
                "apiVersion": f"{snapshots.GROUP}/v1",
                "kind": "VolumeSnapshotContent",
                "metadata": {"name": content},
                "spec": {
                    "driver": driver.spec.name,
                    "deletionPolicy": "Delete",
                    "source": {"snapshotHandle": handle},
                    "volumeSnapshotClassName": driver.spec.snapshot_class(),
                    "volumeSnapshotRef": {"name": name, "namespace": namespace},
                },
            }
        )
    )
    kube.create(
        snapshots.VolumeSnapshot.from_dict(
            {
                "apiVersion": f"{snapshots.GROUP}/v1",
                "kind": "VolumeSnapshot",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "volumeSnapshotClassName": driver.spec.snapshot_class(),
                    "source": {"volumeSnapshotContentName": content},
                },
            }
        )
    )
    return content


def retained_snapshot_handle(kube: Client, driver: Driver, namespace: str) -> str:
    """A snapshot cut by the driver whose VolumeSnapshot and content are gone (the
    content's deletionPolicy turned to Retain first), as upstream makes the handle of
    a pre-provisioned snapshot."""
    snapshots.create_snapshot(
        kube, snapshots.volume_snapshot("seed", namespace, "data", driver.spec.snapshot_class())
    )
    ready = snapshots.wait_snapshot_ready(kube, "seed", namespace, timeout=60)
    content = ready["status"]["boundVolumeSnapshotContentName"]
    handle = str(kube.get(snapshots.VolumeSnapshotContent, content)["status"]["snapshotHandle"])
    kube.patch(
        snapshots.VolumeSnapshotContent,
        content,
        {"spec": {"deletionPolicy": "Retain"}},
        patch_type=PatchType.MERGE,
    )
    kube.delete(snapshots.VolumeSnapshot, "seed", namespace=namespace)
    snapshots.wait_snapshot_deleted(kube, "seed", namespace, timeout=90)
    kube.delete(snapshots.VolumeSnapshotContent, content)
    wait_gone(kube, snapshots.VolumeSnapshotContent, content)
    return handle


@pytest.mark.driver(snapshots="full")
@pytest.mark.parametrize(
    "snapshot_type",
    [
        pytest.param(
            "dynamic",
            marks=pytest.mark.upstream(
                UPSTREAM,
                "snapshot controller should emit dynamic CreateSnapshot, "
                "CreateSnapshotAndReady, and DeleteSnapshot metrics",
            ),
        ),
        pytest.param(
            "pre-provisioned",
            marks=pytest.mark.upstream(
                UPSTREAM,
                "snapshot controller should emit pre-provisioned CreateSnapshot, "
                "CreateSnapshotAndReady, and DeleteSnapshot metrics",
            ),
        ),
    ],
)
def test_the_snapshot_controller_counts_create_ready_and_delete(
    kube: Client,
    cluster: Cluster,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    snapshot_type: str,
) -> None:
    try:
        before = operation_counts(cluster, driver.spec.name)
    except Unsupported as exc:
        pytest.skip(str(exc))
    # The driver is the test's own: nothing counted for it yet.
    assert before == {}, before
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    )
    wait_bound_volume(kube, "data", namespace, timeout=60)
    if snapshot_type == "dynamic":
        snapshots.create_snapshot(
            kube, snapshots.volume_snapshot("snap", namespace, "data", driver.spec.snapshot_class())
        )
    else:
        handle = retained_snapshot_handle(kube, driver, namespace)
        # The seed counted as dynamic only.
        seeded = operation_counts(cluster, driver.spec.name)
        assert {key[2] for key in seeded} == {"dynamic"}, seeded
        pre_provisioned_snapshot(kube, driver, namespace, handle, "snap")
    name = driver.spec.name

    wait_operation_count(cluster, name, "CreateSnapshot", snapshot_type, 1)
    snapshots.wait_snapshot_ready(kube, "snap", namespace, timeout=60)
    wait_operation_count(cluster, name, "CreateSnapshotAndReady", snapshot_type, 1)
    content = kube.get(snapshots.VolumeSnapshot, "snap", namespace=namespace)["status"][
        "boundVolumeSnapshotContentName"
    ]
    kube.delete(snapshots.VolumeSnapshot, "snap", namespace=namespace)
    snapshots.wait_snapshot_deleted(kube, "snap", namespace, timeout=90)
    wait_operation_count(cluster, name, "DeleteSnapshot", snapshot_type, 1)
    wait_gone(kube, snapshots.VolumeSnapshotContent, content)
    assert [r.code for r in admin.journal(method="DeleteSnapshot")] == ["OK"]
