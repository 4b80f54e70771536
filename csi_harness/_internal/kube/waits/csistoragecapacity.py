"""The CSIStorageCapacity a driver published, and waiting for it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from lightkube import Client
from lightkube.resources.storage_v1 import CSIStorageCapacity

from csi_harness._internal.kube.watching import Kube, watch_until
from csi_mock.model.quantity import parse_quantity

DRIVER_NAME_LABEL = "csi.storage.k8s.io/drivername"
"""external-provisioner's label on the CSIStorageCapacity objects it owns."""


class CapacityPublisher(Protocol):
    """What the capacity waits need of a driver (a ``DriverDeployment`` is one): its
    name, where its CSIStorageCapacity objects live and its node topology key."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def node_topology_key(self) -> str: ...


def _capacities(
    objects: Iterable[CSIStorageCapacity], spec: CapacityPublisher
) -> dict[tuple[str, str], tuple[int, int | None]]:
    seen: dict[tuple[str, str], tuple[int, int | None]] = {}
    for obj in objects:
        labels = (obj.nodeTopology.matchLabels or {}) if obj.nodeTopology else {}
        node = labels.get(spec.node_topology_key)
        if node is None:
            continue
        capacity = parse_quantity(str(obj.capacity)) if obj.capacity is not None else 0
        maximum = (
            parse_quantity(str(obj.maximumVolumeSize))
            if obj.maximumVolumeSize is not None
            else None
        )
        seen[(node, obj.storageClassName)] = (capacity, maximum)
    return seen


def capacities(
    kube: Client, spec: CapacityPublisher
) -> dict[tuple[str, str], tuple[int, int | None]]:
    """(node, storage class) -> (capacity, maximumVolumeSize) of every
    CSIStorageCapacity published for the driver whose topology is a node segment."""
    found = kube.list(
        CSIStorageCapacity, namespace=spec.namespace, labels={DRIVER_NAME_LABEL: spec.name}
    )
    return _capacities(found, spec)


def wait_capacity(
    kube: Kube,
    spec: CapacityPublisher,
    expected: dict[tuple[str, str], int],
    *,
    maximum: dict[tuple[str, str], int] | None = None,
    timeout: float = 30,
) -> None:
    """Wait until the published capacity (and maximumVolumeSize) of each given
    (node, storage class) of the driver equals the expected bytes."""

    def check(
        found: dict[str, CSIStorageCapacity],
    ) -> tuple[bool, dict[tuple[str, str], tuple[int, int | None]]]:
        seen = _capacities(found.values(), spec)
        ok = all(seen.get(key, (None,))[0] == value for key, value in expected.items())
        if maximum is not None:
            ok = ok and all(seen.get(key, (0, None))[1] == v for key, v in maximum.items())
        return ok, {key: seen.get(key, (-1, None)) for key in expected}

    watch_until(
        kube,
        CSIStorageCapacity,
        namespace=spec.namespace,
        labels={DRIVER_NAME_LABEL: spec.name},
        what=f"published capacity {expected} (maximum {maximum})",
        check=check,
        timeout=timeout,
    )
