"""Honouring the PV reclaim policy end to end (HonorPVReclaimPolicy, GA and always on
in the pinned csi-provisioner): a PV of the driver with reclaim policy Delete gets the
provisioner's deletion protection finalizer, and DeleteVolume is called when it goes,
whether its claim or the PV itself is deleted first; with Retain it gets no finalizer
and DeleteVolume is never called. The same for a PV the provisioner did not create
(static), and for a PV whose policy is changed after it was bound.

The controller instance's journal shows whether DeleteVolume was called. The claims
use Immediate binding: no pod is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.resources.storage_v1 import StorageClass
from lightkube.types import PatchType

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_for
from csi_harness._internal.providers.base import Driver

pytestmark = [pytest.mark.e2e]

FEATURE = "PV reclaim policy"
FILE = "csi_honor_pv_reclaim_policy.go"

DELETE = "Delete"
RETAIN = "Retain"
FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"
"""The provisioner's deletion protection of a PV with reclaim policy Delete."""
IMMEDIATE = "csi-mock-immediate"


@pytest.fixture
def storage_class(kube: Client, driver: Driver, namespace: str) -> Iterator[dict[str, str]]:
    """The name of a StorageClass of the driver (Immediate binding) per reclaim policy:
    the driver's own for Delete, a copy of it with Retain made for the test."""
    own = driver.spec.storage_class(IMMEDIATE)
    manifest: dict[str, Any] = kube.get(StorageClass, own).to_dict()
    retain = f"{namespace}-retain"
    manifest["metadata"] = {"name": retain}
    manifest["reclaimPolicy"] = RETAIN
    objects.create(kube, manifest)
    yield {DELETE: own, RETAIN: retain}
    kube.delete(StorageClass, retain)


def dynamic_volume(kube: Client, namespace: str, storage_class: str) -> PersistentVolume:
    """A claim ``app`` of the class, bound to the PV the provisioner made for it."""
    objects.create(kube, objects.claim("app", namespace, "1Gi", storage_class))
    return wait_bound_volume(kube, "app", namespace)


def static_volume(
    kube: Client, driver: Driver, namespace: str, storage_class: str, policy: str
) -> PersistentVolume:
    """A PV made by hand for a volume handle csi-mock does not know (as upstream's),
    and a claim ``app`` bound to it."""
    name = f"{namespace}-static"
    pv = objects.static_volume(
        name,
        driver.spec.name,
        storage_class=storage_class,
        reclaim_policy=policy,
        claim_ref=(namespace, "app"),
    )
    claim = objects.claim("app", namespace, "1Gi", storage_class, volume_name=name)
    objects.create(kube, pv, claim)
    return wait_bound_volume(kube, "app", namespace)


def name_of(pv: PersistentVolume) -> str:
    assert pv.metadata is not None
    return str(pv.metadata.name)


def handle_of(pv: PersistentVolume) -> str:
    assert pv.spec is not None and pv.spec.csi is not None
    return str(pv.spec.csi.volumeHandle)


def finalizers(kube: Client, pv: str) -> list[str]:
    metadata = kube.get(PersistentVolume, pv).metadata
    return list(metadata.finalizers or []) if metadata else []


def wait_protected(kube: Client, pv: str, protected: bool) -> None:
    """Wait until the PV has (or has not) the provisioner's finalizer."""
    wait_for(
        f"PV {pv} {'with' if protected else 'without'} {FINALIZER}",
        lambda: ((FINALIZER in (seen := finalizers(kube, pv))) == protected, seen),
        timeout=30,
    )


def wait_released(kube: Client, pv: str) -> None:
    def released() -> tuple[bool, str]:
        status = kube.get(PersistentVolume, pv).status
        phase = str(status.phase) if status else "?"
        return phase == "Released", phase

    wait_for(f"PV {pv} Released", released, timeout=30)


def delete_in_order(kube: Client, namespace: str, pv: str, order: str) -> None:
    """Delete the claim and the PV, in ``order`` ("pvc" or "pv" first), and wait until
    the PV is gone. With the claim first, a Retain PV is deleted once Released (its
    claim gone), as upstream does."""
    if order == "pv":
        kube.delete(PersistentVolume, pv)
        kube.delete(PersistentVolumeClaim, "app", namespace=namespace)
    else:
        # Read before the claim goes: a Delete PV may be gone by the next call.
        policy = kube.get(PersistentVolume, pv).spec.persistentVolumeReclaimPolicy  # type: ignore[union-attr]
        kube.delete(PersistentVolumeClaim, "app", namespace=namespace)
        if policy == RETAIN:
            wait_released(kube, pv)
            kube.delete(PersistentVolume, pv)
    wait_for(f"PV {pv} gone", lambda: objects.gone(kube, PersistentVolume, pv), timeout=60)


def delete_volume_calls(driver: Driver, volume: str) -> int:
    with driver.admin() as admin:
        return len(admin.journal(method="DeleteVolume", volume=volume))


def assert_reclaimed(driver: Driver, pv: PersistentVolume, *, deleted: bool) -> None:
    calls = delete_volume_calls(driver, handle_of(pv))
    assert (calls > 0) == deleted, f"{calls} DeleteVolume calls for {handle_of(pv)}"


def case(title: str, *values: object) -> Any:
    return pytest.param(
        *values, marks=pytest.mark.upstream(FILE, title), id="-".join(map(str, values))
    )


@pytest.mark.parametrize(
    ("policy", "order"),
    [
        case(
            "Dynamic provisioning should honor pv delete reclaim policy when deleting pvc",
            DELETE,
            "pvc",
        ),
        case(
            "Dynamic provisioning should honor pv delete reclaim policy when deleting pv then pvc",
            DELETE,
            "pv",
        ),
        case(
            "Dynamic provisioning should honor pv retain reclaim policy when deleting pvc then pv",
            RETAIN,
            "pvc",
        ),
        case(
            "Dynamic provisioning should honor pv retain reclaim policy when deleting pv then pvc",
            RETAIN,
            "pv",
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(FEATURE, "a provisioned PV: DeleteVolume for Delete, in either order")
def test_provisioned_volume_is_deleted_only_with_reclaim_policy_delete(
    kube: Client,
    namespace: str,
    driver: Driver,
    storage_class: dict[str, str],
    policy: str,
    order: str,
) -> None:
    pv = dynamic_volume(kube, namespace, storage_class[policy])
    assert pv.spec is not None and pv.spec.persistentVolumeReclaimPolicy == policy
    wait_protected(kube, name_of(pv), policy == DELETE)
    with driver.admin() as admin:
        assert handle_of(pv) in {v.id for v in admin.volumes().volumes}

    delete_in_order(kube, namespace, name_of(pv), order)
    assert_reclaimed(driver, pv, deleted=policy == DELETE)
    with driver.admin() as admin:
        kept = handle_of(pv) in {v.id for v in admin.volumes().volumes}
    assert kept == (policy == RETAIN)


@pytest.mark.parametrize(
    ("policy", "order"),
    [
        case(
            "Static provisioning should honor pv delete reclaim policy when deleting pvc",
            DELETE,
            "pvc",
        ),
        case(
            "Static provisioning should honor pv delete reclaim policy when deleting pv then pvc",
            DELETE,
            "pv",
        ),
        case(
            "Static provisioning should honor pv retain reclaim policy when deleting pvc then pv",
            RETAIN,
            "pvc",
        ),
        case(
            "Static provisioning should honor pv retain reclaim policy when deleting pv then pvc",
            RETAIN,
            "pv",
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(FEATURE, "a PV made by hand: DeleteVolume for Delete, in either order")
def test_static_volume_is_deleted_only_with_reclaim_policy_delete(
    kube: Client,
    namespace: str,
    driver: Driver,
    storage_class: dict[str, str],
    policy: str,
    order: str,
) -> None:
    pv = static_volume(kube, driver, namespace, storage_class[policy], policy)
    assert pv.metadata is not None
    assert "pv.kubernetes.io/provisioned-by" not in (pv.metadata.annotations or {})
    wait_protected(kube, name_of(pv), policy == DELETE)

    delete_in_order(kube, namespace, name_of(pv), order)
    assert_reclaimed(driver, pv, deleted=policy == DELETE)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        case(
            "should honor pv reclaim policy after it is changed from retain to deleted",
            RETAIN,
            DELETE,
        ),
        case(
            "should honor pv reclaim policy after it is changed from deleted to retain",
            DELETE,
            RETAIN,
        ),
    ],
)
@pytest.mark.driver()
@pytest.mark.scenario(FEATURE, "the policy changed on a bound PV: the new one decides")
def test_changed_reclaim_policy_decides_whether_the_volume_is_deleted(
    kube: Client,
    namespace: str,
    driver: Driver,
    storage_class: dict[str, str],
    before: str,
    after: str,
) -> None:
    pv = dynamic_volume(kube, namespace, storage_class[before])
    name = name_of(pv)
    wait_protected(kube, name, before == DELETE)

    kube.patch(
        PersistentVolume,
        name,
        {"spec": {"persistentVolumeReclaimPolicy": after}},
        patch_type=PatchType.MERGE,
    )
    wait_protected(kube, name, after == DELETE)

    delete_in_order(kube, namespace, name, "pv")
    assert_reclaimed(driver, pv, deleted=after == DELETE)
