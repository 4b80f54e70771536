"""When a deployed driver counts as ready, whatever runs it: registered with the
kubelet of every node (its CSINode entry) and, when capacity is tracked, with the
complete CSIStorageCapacity set published (every node x WaitForFirstConsumer class),
so that a test never sees half of it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from lightkube import Client

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import DriverDeployment, storage_class_objects
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.kube.objects import drop_node_labels
from csi_harness._internal.kube.waits import capacities


def registered_nodes(kube: Client, driver: str) -> set[str]:
    """Names of the nodes whose CSINode lists ``driver``."""
    return {
        str(csinode.metadata.name)
        for csinode in kube.list(CSINodeResource)
        if csinode.metadata and any(d["name"] == driver for d in csinode_drivers(csinode))
    }


def expected_capacity(spec: DriverDeployment, nodes: Collection[str]) -> set[tuple[str, str]]:
    """The (node, storage class) pairs external-provisioner publishes a
    CSIStorageCapacity for; empty when the CSIDriver does not ask for capacity or the
    provisioner does not publish it."""
    if not (spec.csidriver and spec.storage_capacity and spec.publish_capacity):
        return set()
    waiting = [
        str(sc["metadata"]["name"])
        for sc in storage_class_objects(spec)
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer"
    ]
    return {(node, sc) for node in nodes for sc in waiting}


def wait_registered(
    kube: Client,
    driver: str,
    nodes: Sequence[str],
    *,
    timeout: float,
    check: Callable[[], None] | None = None,
) -> None:
    def probe() -> tuple[bool, str]:
        missing = sorted(set(nodes) - registered_nodes(kube, driver))
        return not missing, f"not registered on: {', '.join(missing)}"

    wait_for(
        f"CSINode entries of {driver} on {len(nodes)} nodes",
        probe,
        timeout=timeout,
        interval=0.5,
        check=check,
    )


def wait_deregistered(
    kube: Client, drivers: Collection[str], nodes: Sequence[str], *, timeout: float
) -> None:
    """Wait until none of ``drivers`` is in the CSINode of any of ``nodes`` (the kubelet
    removes an entry when the driver's registration socket goes)."""

    def probe() -> tuple[bool, str]:
        still = sorted(
            f"{driver} on {node}"
            for driver in drivers
            for node in registered_nodes(kube, driver) & set(nodes)
        )
        return not still, f"still registered: {', '.join(still)}"

    wait_for(
        f"the CSINode entries of {', '.join(sorted(drivers))} to go",
        probe,
        timeout=timeout,
        interval=0.5,
    )


def wait_capacity_published(
    kube: Client,
    spec: DriverDeployment,
    expected: set[tuple[str, str]],
    *,
    timeout: float,
    check: Callable[[], None] | None = None,
) -> None:
    def probe() -> tuple[bool, str]:
        missing = sorted(expected - set(capacities(kube, spec)))
        return not missing, f"missing (node, class): {missing}"

    wait_for(
        f"CSIStorageCapacity for {len(expected)} node segments x classes",
        probe,
        timeout=timeout,
        interval=0.5,
        check=check,
    )


def wait_driver_ready(
    kube: Client,
    spec: DriverDeployment,
    nodes: Sequence[str],
    *,
    timeout: float,
    check: Callable[[], None] | None = None,
) -> None:
    """Registered on every node of ``nodes``, then the complete capacity set (when the
    CSIDriver asks for capacity). ``check`` may raise to end the wait early."""
    wait_registered(kube, spec.name, nodes, timeout=timeout, check=check)
    expected = expected_capacity(spec, nodes)
    if expected:
        wait_capacity_published(kube, spec, expected, timeout=timeout, check=check)


def drop_topology_labels(kube: Client, spec: DriverDeployment, nodes: Sequence[str]) -> None:
    """After a suffixed driver is removed: take its topology labels off the nodes.
    Kubelets add a driver's segments as node labels when it registers and never
    remove them; on a cluster that outlives the session (``--csi-keep-cluster``, an
    existing one) every test's driver would otherwise leave two labels on every node.
    The default driver's labels are left alone: they are the cluster's own."""
    if spec.suffix:
        drop_node_labels(kube, nodes, [spec.node_topology_key, spec.zone_topology_key])
