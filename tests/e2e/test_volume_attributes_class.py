"""VolumeAttributesClass end to end: a claim's class reaches csi-mock as CreateVolume's
mutable_parameters (external-provisioner), a change of class as
ControllerModifyVolume (external-resizer), and a class the driver refuses leaves the
claim Infeasible with its volume as it was.

The driver takes the mutable parameter "tier" with the values gold and silver
(``controller.modify.mutable_parameters``); "platinum" is not one of them
(INVALID_ARGUMENT, which the resizer takes as final).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim
from lightkube.resources.storage_v1 import VolumeAttributesClass

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import wait_bound_volume, wait_claim
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.driver(mutable_parameters={"tier": ["gold", "silver"]}),
]

FEATURE = "VolumeAttributesClass"
IMMEDIATE = "csi-mock-immediate"


@pytest.fixture
def attributes_class(kube: Client, driver: Driver) -> Iterator[Callable[[str], str]]:
    """Makes the VolumeAttributesClass of one tier (named after the deployment, as
    the classes are cluster-wide) and deletes them all at the end."""
    made: list[str] = []

    def make(tier: str) -> str:
        name = f"{driver.spec.storage_class()}-{tier}"
        objects.create(
            kube,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttributesClass",
                "metadata": {"name": name},
                "driverName": driver.spec.name,
                "parameters": {"tier": tier},
            },
        )
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            kube.delete(VolumeAttributesClass, name)
        except ApiError as exc:
            if exc.status.code != 404:
                raise


def volume_id_of(pv: PersistentVolume) -> str:
    assert pv.spec is not None and pv.spec.csi is not None
    return pv.spec.csi.volumeHandle


def mutable_parameters(admin: AdminClient, volume_id: str) -> dict[str, str]:
    (volume,) = [v for v in admin.volumes().volumes if v.id == volume_id]
    return volume.mutable_parameters


def set_class(kube: Client, claim: str, namespace: str, name: str) -> None:
    body = {"spec": {"volumeAttributesClassName": name}}
    kube.patch(PersistentVolumeClaim, claim, body, namespace=namespace)


def modify_status(claim: PersistentVolumeClaim) -> dict[str, Any]:
    status = claim.status
    current = status.currentVolumeAttributesClassName if status else None
    modify = status.modifyVolumeStatus if status else None
    return {
        "current": current,
        "target": modify.targetVolumeAttributesClassName if modify else None,
        "status": modify.status if modify else None,
    }


def bound_claim_of_class(
    kube: Client, driver: Driver, namespace: str, class_name: str
) -> PersistentVolume:
    manifest = objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    manifest["spec"]["volumeAttributesClassName"] = class_name
    objects.create(kube, manifest)
    return wait_bound_volume(kube, "data", namespace, timeout=90)


@pytest.mark.scenario(
    FEATURE, "a claim's class is the volume's mutable parameters from its creation"
)
def test_a_claims_class_is_the_volumes_mutable_parameters_from_its_creation(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    attributes_class: Callable[[str], str],
) -> None:
    silver = attributes_class("silver")

    volume_id = volume_id_of(bound_claim_of_class(kube, driver, namespace, silver))

    (created,) = [r for r in admin.journal(method="CreateVolume") if r.code == "OK"]
    assert created.request.get("mutable_parameters") == {"tier": "silver"}
    assert mutable_parameters(admin, volume_id) == {"tier": "silver"}
    claim = wait_claim(
        kube,
        "data",
        namespace,
        lambda c: modify_status(c)["current"] == silver,
        what=f"currentVolumeAttributesClassName {silver}",
        timeout=60,
    )
    assert modify_status(claim)["status"] is None


@pytest.mark.scenario(FEATURE, "changing a claim's class modifies its volume")
def test_changing_a_claims_class_modifies_its_volume(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    attributes_class: Callable[[str], str],
) -> None:
    silver, gold = attributes_class("silver"), attributes_class("gold")
    volume_id = volume_id_of(bound_claim_of_class(kube, driver, namespace, silver))

    set_class(kube, "data", namespace, gold)

    wait_claim(
        kube,
        "data",
        namespace,
        lambda c: modify_status(c)["current"] == gold,
        what=f"currentVolumeAttributesClassName {gold}",
        timeout=90,
    )
    assert mutable_parameters(admin, volume_id) == {"tier": "gold"}
    modified = admin.journal(method="ControllerModifyVolume", volume=volume_id)
    assert [(r.code, r.request.get("mutable_parameters")) for r in modified] == [
        ("OK", {"tier": "gold"})
    ]


@pytest.mark.scenario(FEATURE, "a class the driver refuses leaves the claim Infeasible")
def test_a_class_the_driver_refuses_leaves_the_claim_infeasible_and_the_volume_as_it_was(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    attributes_class: Callable[[str], str],
) -> None:
    silver, platinum = attributes_class("silver"), attributes_class("platinum")
    volume_id = volume_id_of(bound_claim_of_class(kube, driver, namespace, silver))

    set_class(kube, "data", namespace, platinum)

    claim = wait_claim(
        kube,
        "data",
        namespace,
        lambda c: modify_status(c)["status"] == "Infeasible",
        what="modifyVolumeStatus Infeasible",
        timeout=90,
    )
    assert modify_status(claim) == {"current": silver, "target": platinum, "status": "Infeasible"}
    assert mutable_parameters(admin, volume_id) == {"tier": "silver"}
    refused = admin.journal(method="ControllerModifyVolume", volume=volume_id)
    assert refused and {r.code for r in refused} == {"INVALID_ARGUMENT"}
    assert all(r.request.get("mutable_parameters") == {"tier": "platinum"} for r in refused)
