"""How kube-scheduler's NodeVolumeLimits counts a node's volumes against the driver's
CSINode allocatable count, each rule on a real cluster with a limit of one volume:
the second volume on the node is refused exactly when the rule says it counts.
"""

from __future__ import annotations

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.storage_v1 import VolumeAttachmentSource, VolumeAttachmentSpec
from lightkube.resources.core_v1 import PersistentVolume
from lightkube.resources.storage_v1 import VolumeAttachment

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.kube.waits import wait_pod_scheduled, wait_pod_unschedulable
from csi_harness._internal.providers.base import Driver, Unsupported, pick_nodes, scheduling_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

FEATURE = "volume limits: counting"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"


def one_scheduling_node(driver: Driver) -> str:
    try:
        (node,) = pick_nodes(scheduling_nodes(driver.nodes), 1)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    return node.name


def claim_and_pod(
    kube: Client, driver: Driver, namespace: str, pod: str, claim: str, node: str
) -> None:
    objects.create(
        kube,
        objects.claim(claim, namespace, "1Gi", driver.spec.storage_class()),
        objects.pod(pod, namespace, claims=[claim], nodes=[node]),
    )


def assert_one_more_volume_is_refused(
    kube: Client, driver: Driver, namespace: str, node: str
) -> None:
    """The witness for a "does not count" verdict: the limit is in force on ``node``,
    as a pod with one more of the driver's claims is refused there. Without it, a
    scheduler that enforced no limit at all would pass the test too."""
    claim_and_pod(kube, driver, namespace, "beyond", "beyond", node)
    wait_pod_unschedulable(kube, "beyond", namespace, message=MAX_VOLUME_COUNT)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "a claim used by two pods on one node counts once")
def test_a_claim_shared_by_two_pods_on_one_node_counts_once(
    kube: Client, namespace: str, driver: Driver
) -> None:
    node = one_scheduling_node(driver)
    claim_and_pod(kube, driver, namespace, "first", "shared", node)
    assert wait_pod_scheduled(kube, "first", namespace) == node

    objects.create(kube, objects.pod("second", namespace, claims=["shared"], nodes=[node]))

    assert wait_pod_scheduled(kube, "second", namespace) == node
    assert_one_more_volume_is_refused(kube, driver, namespace, node)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "an unbound claim of a pod already on the node counts")
def test_an_unbound_claim_of_a_pod_already_on_the_node_counts(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # A pod bound to the node by name, not by the scheduler: its WaitForFirstConsumer
    # claim is never provisioned, yet the scheduler counts it (through its class).
    node = one_scheduling_node(driver)
    placed = objects.pod("placed", namespace, claims=["unbound"])
    placed["spec"]["nodeName"] = node
    objects.create(
        kube, objects.claim("unbound", namespace, "1Gi", driver.spec.storage_class()), placed
    )
    claim_and_pod(kube, driver, namespace, "next", "second", node)

    wait_pod_unschedulable(kube, "next", namespace, message=MAX_VOLUME_COUNT)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "a CSI inline ephemeral volume does not count")
def test_a_csi_inline_ephemeral_volume_does_not_count(
    kube: Client, namespace: str, driver: Driver
) -> None:
    node = one_scheduling_node(driver)
    objects.create(
        kube,
        objects.pod(
            "inline", namespace, inline=[{"size": "1Gi"}], csi_driver=driver.spec.name, nodes=[node]
        ),
    )
    assert wait_pod_scheduled(kube, "inline", namespace) == node

    claim_and_pod(kube, driver, namespace, "claimed", "data", node)

    assert wait_pod_scheduled(kube, "claimed", namespace) == node
    assert_one_more_volume_is_refused(kube, driver, namespace, node)


@pytest.mark.driver(max_volumes_per_node=0)
@pytest.mark.scenario(FEATURE, "max_volumes_per_node 0 means no limit")
def test_max_volumes_per_node_zero_is_no_limit(
    kube: Client, namespace: str, driver: Driver
) -> None:
    node = one_scheduling_node(driver)
    claims = [f"data-{i}" for i in range(4)]
    storage_class = driver.spec.storage_class()
    objects.create(kube, *(objects.claim(c, namespace, "1Gi", storage_class) for c in claims))
    objects.create(kube, objects.pod("many", namespace, claims=claims, nodes=[node]))

    assert wait_pod_scheduled(kube, "many", namespace) == node
    # The witness that the driver is there to be counted: its CSINode entry on the node,
    # with no count (0 in NodeGetInfo is "no limit", so the kubelet leaves it out).
    entries = {e["name"]: e for e in csinode_drivers(kube.get(CSINodeResource, node))}
    assert driver.spec.name in entries, sorted(entries)
    assert (entries[driver.spec.name].get("allocatable") or {}).get("count") is None


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "another driver's volumes do not count against this driver's limit")
def test_another_drivers_volume_on_the_node_does_not_count(
    kube: Client, namespace: str, driver: Driver
) -> None:
    node = one_scheduling_node(driver)
    pv = f"{namespace}-foreign"
    objects.create(
        kube,
        objects.static_volume(pv, f"other.{driver.spec.name}"),
        objects.claim("foreign", namespace, "1Gi", "", volume_name=pv),
        objects.pod("foreign", namespace, claims=["foreign"], nodes=[node]),
    )
    try:
        assert wait_pod_scheduled(kube, "foreign", namespace) == node

        claim_and_pod(kube, driver, namespace, "ours", "data", node)

        assert wait_pod_scheduled(kube, "ours", namespace) == node
        assert_one_more_volume_is_refused(kube, driver, namespace, node)
    finally:
        kube.delete(PersistentVolume, pv)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "a VolumeAttachment counts even when no pod uses its volume")
def test_a_volume_attachment_without_a_pod_counts(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # A volume attached to the node by someone (a detach still pending, another
    # controller): NodeVolumeLimits counts the node's VolumeAttachments of the driver.
    node = one_scheduling_node(driver)
    pv = f"{namespace}-attached"
    objects.create(kube, objects.static_volume(pv, driver.spec.name))
    kube.create(
        VolumeAttachment(
            metadata=ObjectMeta(name=pv),
            spec=VolumeAttachmentSpec(
                attacher=driver.spec.name,
                nodeName=node,
                source=VolumeAttachmentSource(persistentVolumeName=pv),
            ),
        )
    )
    try:
        claim_and_pod(kube, driver, namespace, "next", "data", node)
        wait_pod_unschedulable(kube, "next", namespace, message=MAX_VOLUME_COUNT)
    finally:
        kube.delete(VolumeAttachment, pv)
        kube.delete(PersistentVolume, pv)
