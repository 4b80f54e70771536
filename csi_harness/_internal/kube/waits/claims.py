"""Waiting for a claim and its volume: bound, a condition, a size."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim

from csi_harness._internal.kube.describe import describe_claim
from csi_harness._internal.kube.watching import Kube, watch_until
from csi_mock.model.quantity import parse_quantity

SELECTED_NODE = "volume.kubernetes.io/selected-node"


def wait_bound_volume(
    kube: Client, claim: str, namespace: str, timeout: float = 60
) -> PersistentVolume:
    """Wait until the claim is bound; return its PersistentVolume.

    Bound means the claim's phase, not only its volumeName: the binder writes
    volumeName first and the phase in a second update, and until then the API
    server treats the claim as unbound (it refuses a change of
    volumeAttributesClassName, for one).
    """

    def check(claims: dict[str, PersistentVolumeClaim]) -> tuple[bool, str]:
        pvc = claims.get(claim)
        if pvc is None:
            return False, f"no claim {claim}"
        volume = pvc.spec.volumeName if pvc.spec else None
        phase = pvc.status.phase if pvc.status else None
        if not volume or phase != "Bound":
            return False, f"claim {claim} is {phase} with volume {volume or 'none'}"
        return True, volume

    volume = watch_until(
        kube,
        PersistentVolumeClaim,
        namespace=namespace,
        name=claim,
        what=f"claim {namespace}/{claim} to be bound",
        check=check,
        timeout=timeout,
    )
    # The binder writes the PV's claimRef before the claim's volumeName: it exists.
    return kube.get(PersistentVolume, volume)


def pv_topology(pv: PersistentVolume) -> dict[str, set[str]]:
    """Topology key -> values of the PV's required node affinity (every term)."""
    affinity = pv.spec.nodeAffinity if pv.spec else None
    terms = affinity.required.nodeSelectorTerms if affinity and affinity.required else []
    topology: dict[str, set[str]] = {}
    for term in terms:
        for expression in term.matchExpressions or []:
            topology.setdefault(expression.key, set()).update(expression.values or [])
    return topology


def storage_of(resources: Mapping[str, Any] | None) -> int | None:
    """The bytes of the "storage" entry of a capacity or requests map, if any."""
    value = (resources or {}).get("storage")
    return None if value is None else parse_quantity(str(value))


def claim_conditions(pvc: PersistentVolumeClaim) -> dict[str, str]:
    """The claim's condition types (FileSystemResizePending, ...) -> their messages."""
    conditions = pvc.status.conditions if pvc.status else None
    return {c.type: c.message or "" for c in conditions or []}


def wait_claim(
    kube: Kube,
    claim: str,
    namespace: str,
    check: Callable[[PersistentVolumeClaim], bool],
    *,
    what: str,
    timeout: float = 60,
) -> PersistentVolumeClaim:
    """Wait until ``check`` holds for the claim; return it. ``what`` says what
    ``check`` expects; a timeout shows the claim as ``describe_claim`` does."""

    def check_claims(claims: dict[str, PersistentVolumeClaim]) -> tuple[bool, Any]:
        pvc = claims.get(claim)
        if pvc is None:
            return False, f"no claim {claim}"
        done = check(pvc)
        return done, pvc if done else describe_claim(pvc)

    found: PersistentVolumeClaim = watch_until(
        kube,
        PersistentVolumeClaim,
        namespace=namespace,
        name=claim,
        what=f"claim {namespace}/{claim}: {what}",
        check=check_claims,
        timeout=timeout,
    )
    return found


def wait_claim_capacity(
    kube: Kube, claim: str, namespace: str, size: int, timeout: float = 90
) -> PersistentVolumeClaim:
    """Wait until the claim's status.capacity is ``size`` bytes (after an expansion:
    once the controller and, where the driver asks for it, the node have grown it)."""
    return wait_claim(
        kube,
        claim,
        namespace,
        lambda pvc: storage_of(pvc.status.capacity if pvc.status else None) == size,
        what=f"a capacity of {size} bytes",
        timeout=timeout,
    )


def wait_volume_capacity(
    kube: Kube, pv_name: str, size: int, timeout: float = 60
) -> PersistentVolume:
    """Wait until the PersistentVolume's spec.capacity is ``size`` bytes."""

    def check(volumes: dict[str, PersistentVolume]) -> tuple[bool, Any]:
        pv = volumes.get(pv_name)
        if pv is None:
            return False, f"no PersistentVolume {pv_name}"
        seen = storage_of(pv.spec.capacity if pv.spec else None)
        return seen == size, pv if seen == size else f"capacity={seen}"

    found: PersistentVolume = watch_until(
        kube,
        PersistentVolume,
        name=pv_name,
        what=f"PersistentVolume {pv_name} to have a capacity of {size} bytes",
        check=check,
        timeout=timeout,
    )
    return found
