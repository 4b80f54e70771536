"""Storage capacity tracking (KEP-1472) end to end: csi-mock answers GetCapacity,
external-provisioner publishes CSIStorageCapacity, kube-scheduler filters nodes by it.

Every node has its own 10Gi pool (``<node>-local``) unless a test resizes it. Pods
that only need scheduling go to ``scheduling_nodes``: on the local provider its
simulated nodes, which are alike (identical allocatable, no images), so that only
capacity tells them apart. The tests need at least two such nodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import ALL_NS, Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity
from lightkube.types import PatchType

from csi_harness._internal.deploy.spec import DriverDeployment, node_pool_name
from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    SELECTED_NODE,
    AnnotationHistory,
    capacities,
    events,
    pv_topology,
    wait_bound_volume,
    wait_capacity,
    wait_event,
    wait_for,
    wait_pod_running,
    wait_pod_scheduled,
    wait_pod_unschedulable,
)
from csi_harness._internal.providers.base import Driver, Unsupported, pick_nodes, scheduling_nodes
from csi_mock.admin.client import AdminClient
from csi_mock.model.quantity import parse_quantity
from csi_mock.observe.calls import CallRecord
from tests.e2e.conftest import wait_pod_placed

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

GI = 1 << 30
FEATURE = "storage capacity tracking"
NOT_ENOUGH_STORAGE = "did not have enough free storage"
STRIPED, MIRRORED, IMMEDIATE = "csi-mock", "csi-mock-mirrored", "csi-mock-immediate"
"""The StorageClasses of deploy/kubernetes/storageclasses.yaml (each test's driver
has them with its suffix: ``DriverDeployment.storage_class``)."""
KINDS = {STRIPED: "striped", MIRRORED: "mirrored"}


def waiting_classes(spec: DriverDeployment) -> tuple[str, str]:
    """The driver's WaitForFirstConsumer classes: striped and mirrored."""
    return spec.storage_class(STRIPED), spec.storage_class(MIRRORED)


def assert_a_waiting_claim_gets_a_selected_node(
    kube: Client, driver: Driver, namespace: str, node: str
) -> None:
    """The witness for "no selected node was ever set": the same kind of history,
    on a WaitForFirstConsumer claim whose pod is placed on ``node``, records it."""
    objects.create(
        kube, objects.claim("witness", namespace, "1Gi", driver.spec.storage_class(STRIPED))
    )
    history = AnnotationHistory(kube, "witness", namespace).start()
    try:
        objects.create(kube, objects.pod("witness", namespace, claims=["witness"], nodes=[node]))
        history.wait_for_values(lambda values: node in values, f"{node}", timeout=60)
    finally:
        values = history.stop()
    assert node in values, values


def pv_node(driver: Driver, kube: Client, claim: str, namespace: str, timeout: float = 60) -> str:
    """The node the claim's volume was provisioned for (its PV's node affinity)."""
    pv = wait_bound_volume(kube, claim, namespace, timeout=timeout)
    (node,) = pv_topology(pv)[driver.spec.node_topology_key]
    return node


def two_scheduling_nodes(driver: Driver) -> tuple[str, str]:
    """Two nodes for pods that only need scheduling, or the test is skipped."""
    try:
        first, second = pick_nodes(scheduling_nodes(driver.nodes), 2)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    return first.name, second.name


def names(driver: Driver) -> list[str]:
    return [n.name for n in scheduling_nodes(driver.nodes)]


@pytest.mark.scenario(FEATURE, "CSIStorageCapacity equals GetCapacity per segment and class")
def test_published_capacity_equals_get_capacity_for_every_segment_and_class(
    kube: Client, driver: Driver
) -> None:
    spec = driver.spec
    kinds = {spec.storage_class(base): kind for base, kind in KINDS.items()}
    objects_seen = list(kube.list(CSIStorageCapacity, namespace=spec.namespace))
    segments = {
        (tuple(sorted(o.nodeTopology.matchLabels.items())), o.storageClassName)  # type: ignore[union-attr]
        for o in objects_seen
    }
    expected_segments = {
        (tuple(sorted(s.items())), sc)
        for s in (spec.segment(n.name, n.zone) for n in driver.nodes)
        for sc in waiting_classes(spec)
    }
    assert segments == expected_segments
    for obj in objects_seen:
        segment = dict(obj.nodeTopology.matchLabels)  # type: ignore[union-attr]
        parameters = {"kind": kinds[str(obj.storageClassName)]}
        available, maximum = driver.get_capacity(segment, parameters)
        assert parse_quantity(str(obj.capacity)) == available, segment
        assert parse_quantity(str(obj.maximumVolumeSize)) == maximum, segment


@pytest.mark.scenario(FEATURE, "capacity follows volume creation, deletion and knob changes")
def test_published_capacity_follows_volumes_and_knobs(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    spec = driver.spec
    striped, mirrored = waiting_classes(spec)
    used, knobbed = two_scheduling_nodes(driver)
    objects.create(
        kube,
        objects.claim("data", namespace, "2Gi", striped),
        objects.pod("app", namespace, claims=["data"], nodes=[used]),
    )
    assert pv_node(driver, kube, "data", namespace) == used
    wait_capacity(kube, spec, {(used, striped): 8 * GI, (used, mirrored): 4 * GI})

    admin.consume(node_pool_name(knobbed), "3Gi")
    wait_capacity(kube, spec, {(knobbed, striped): 7 * GI})
    admin.resize_pool(node_pool_name(knobbed), "20Gi")
    wait_capacity(kube, spec, {(knobbed, striped): 17 * GI})
    admin.release(node_pool_name(knobbed), "3Gi")
    wait_capacity(kube, spec, {(knobbed, striped): 20 * GI})

    kube.delete(Pod, "app", namespace=namespace, grace_period=0)
    kube.delete(PersistentVolumeClaim, "data", namespace=namespace)
    wait_capacity(kube, spec, {(used, striped): 10 * GI}, timeout=60)


@pytest.mark.upstream("csi_storage_capacity.go", "CSIStorageCapacity used, insufficient capacity")
@pytest.mark.upstream(
    "csi_storage_capacity_scoring.go",
    "should fail to place pod if no node meets the requested size",
)
@pytest.mark.scenario(FEATURE, "claim larger than every maximumVolumeSize stays Pending")
def test_claim_larger_than_every_node_stays_pending_with_not_enough_storage(
    kube: Client, namespace: str, driver: Driver
) -> None:
    objects.create(
        kube,
        objects.claim("huge", namespace, "11Gi", driver.spec.storage_class(STRIPED)),
        objects.pod("app", namespace, claims=["huge"]),
    )
    message = wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    assert f"{len(driver.nodes)} node(s) did not have enough free storage" in message
    wait_event(kube, namespace, reason="FailedScheduling", contains=NOT_ENOUGH_STORAGE)
    claim = kube.get(PersistentVolumeClaim, "huge", namespace=namespace)
    assert SELECTED_NODE not in (claim.metadata.annotations or {})  # type: ignore[union-attr]
    # The witness: a claim that fits, in the same class, gets its node where this read looks.
    objects.create(
        kube,
        objects.claim("fits", namespace, "1Gi", driver.spec.storage_class(STRIPED)),
        objects.pod("fits", namespace, claims=["fits"]),
    )
    node = wait_pod_scheduled(kube, "fits", namespace)
    fits = kube.get(PersistentVolumeClaim, "fits", namespace=namespace)
    assert (fits.metadata.annotations or {}).get(SELECTED_NODE) == node  # type: ignore[union-attr]


@pytest.mark.driver(publish_capacity=False)
@pytest.mark.upstream("csi_storage_capacity.go", "CSIStorageCapacity used, no capacity")
@pytest.mark.scenario(FEATURE, "capacity asked for but none published: unschedulable")
def test_without_any_published_capacity_a_waiting_claim_is_unschedulable(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # The CSIDriver asks for capacity (storageCapacity true) and the provisioner
    # publishes none: every pool has room, yet no node is known to have any. The
    # scheduler reads every namespace's objects, whoever made them: so does this.
    striped = driver.spec.storage_class(STRIPED)
    assert not [
        c for c in kube.list(CSIStorageCapacity, namespace=ALL_NS) if c.storageClassName == striped
    ]
    nodes = names(driver)
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", striped),
        objects.pod("app", namespace, claims=["data"], nodes=nodes),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    claim = kube.get(PersistentVolumeClaim, "data", namespace=namespace)
    assert SELECTED_NODE not in (claim.metadata.annotations or {})  # type: ignore[union-attr]
    # The witness: one object that says a node has room, as upstream's test makes
    # them, and the same pod is placed there and its claim gets that node.
    topology = {driver.spec.node_topology_key: nodes[-1]}
    objects.create(kube, objects.storage_capacity(namespace, striped, topology, "10Gi"))
    assert wait_pod_scheduled(kube, "app", namespace, timeout=90) == nodes[-1]
    claim = kube.get(PersistentVolumeClaim, "data", namespace=namespace)
    assert (claim.metadata.annotations or {}).get(SELECTED_NODE) == nodes[-1]  # type: ignore[union-attr]


@pytest.mark.upstream("csi_storage_capacity.go", "CSIStorageCapacity used, have capacity")
@pytest.mark.scenario(FEATURE, "claim that fits only one node's pool is placed there")
def test_claim_that_fits_only_one_node_is_scheduled_and_provisioned_there(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    big = names(driver)[0]
    striped = driver.spec.storage_class(STRIPED)
    admin.resize_pool(node_pool_name(big), "20Gi")
    wait_capacity(kube, driver.spec, {(big, striped): 20 * GI}, maximum={(big, striped): 20 * GI})
    objects.create(
        kube,
        objects.claim("big", namespace, "15Gi", striped),
        objects.pod("app", namespace, claims=["big"]),
    )
    assert pv_node(driver, kube, "big", namespace) == big
    assert wait_pod_placed(kube, driver, "app", namespace) == big


@pytest.mark.driver(provisioner_mode="distributed")
@pytest.mark.scenario(FEATURE, "distributed provisioners: each publishes and provisions its node")
def test_distributed_provisioners_publish_capacity_and_provision_on_their_own_node(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # One external-provisioner per node (--node-deployment): together they published
    # every node x class (the driver fixture waited for it); each one's own node only.
    spec = driver.spec
    classes = waiting_classes(spec)
    striped = classes[0]
    assert set(capacities(kube, spec)) == {(n.name, sc) for n in driver.nodes for sc in classes}
    published = list(kube.list(CSIStorageCapacity, namespace=spec.namespace))
    assert len(published) == len(driver.nodes) * len(classes), "one object each"
    big = names(driver)[-1]
    # Each node's pool lives in that node's own instance: no controller here.
    with driver.admin(big) as node_admin:
        node_admin.resize_pool(node_pool_name(big), "20Gi")
    wait_capacity(kube, spec, {(big, striped): 20 * GI}, maximum={(big, striped): 20 * GI})
    objects.create(
        kube,
        objects.claim("big", namespace, "15Gi", striped),
        objects.pod("app", namespace, claims=["big"]),
    )
    assert pv_node(driver, kube, "big", namespace) == big
    wait_capacity(kube, spec, {(big, striped): 5 * GI})
    succeeded = f'"Succeeded" PVC="{namespace}/big"'
    provisioned_by = {
        node.name
        for node in driver.nodes
        if succeeded in driver.component_log(f"csi-provisioner-{node.name}")
    }
    assert provisioned_by == {big}


@pytest.mark.parametrize(
    "storage_capacity",
    [
        pytest.param(
            False,
            marks=[
                pytest.mark.driver(storage_capacity=False),
                pytest.mark.upstream("csi_storage_capacity.go", "CSIStorageCapacity disabled"),
            ],
            id="false",
        ),
        pytest.param(
            None,
            marks=[
                pytest.mark.driver(storage_capacity=None),
                pytest.mark.upstream("csi_storage_capacity.go", "CSIStorageCapacity unused"),
            ],
            id="unset",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "CSIDriver.storageCapacity false or unset: capacity ignored")
def test_capacity_is_ignored_when_the_csidriver_does_not_ask_for_it(
    kube: Client, namespace: str, driver: Driver, storage_capacity: bool | None
) -> None:
    # Published (the provisioner runs with --enable-capacity) yet not used: the
    # scheduler picks a node for an 11Gi claim no pool can hold.
    spec = driver.spec
    expected = len(driver.nodes) * len(waiting_classes(spec))
    wait_for(
        "CSIStorageCapacity objects to be published",
        lambda: (len(capacities(kube, spec)) == expected, capacities(kube, spec)),
        timeout=30,
    )
    objects.create(
        kube,
        objects.claim("huge", namespace, "11Gi", spec.storage_class(STRIPED)),
        objects.pod("app", namespace, claims=["huge"], nodes=names(driver)),
    )
    history = AnnotationHistory(kube, "huge", namespace).start()
    try:
        history.wait_for_values(lambda v: any(v), "a selected node")
        wait_event(kube, namespace, reason="ProvisioningFailed", contains="ResourceExhausted")
    finally:
        history.stop()
    assert not events(kube, namespace, contains=NOT_ENOUGH_STORAGE)
    # The witness: once the CSIDriver asks for capacity, the same claim in the same
    # namespace gets the event the assertion above looked for.
    kube.patch(
        CSIDriver, spec.name, {"spec": {"storageCapacity": True}}, patch_type=PatchType.MERGE
    )
    objects.create(
        kube,
        objects.claim("witness", namespace, "11Gi", spec.storage_class(STRIPED)),
        objects.pod("witness", namespace, claims=["witness"], nodes=names(driver)),
    )
    wait_event(
        kube,
        namespace,
        reason="FailedScheduling",
        contains=NOT_ENOUGH_STORAGE,
        involved="witness",
    )


@pytest.mark.upstream("csi_storage_capacity.go", "exhausted, late binding, with topology")
@pytest.mark.scenario(
    FEATURE, "stale capacity: RESOURCE_EXHAUSTED, selected-node dropped, rescheduled"
)
def test_stale_capacity_makes_provisioning_fail_and_the_pod_move_to_a_node_with_room(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    full, roomy = two_scheduling_nodes(driver)
    # GetCapacity keeps answering 10Gi for the full node while its pool fills up.
    admin.freeze_capacity()
    admin.consume(node_pool_name(full), "8Gi")
    objects.create(
        kube, objects.claim("data", namespace, "5Gi", driver.spec.storage_class(STRIPED))
    )
    history = AnnotationHistory(kube, "data", namespace).start()
    objects.create(
        kube,
        objects.pod("app", namespace, claims=["data"], nodes=[full, roomy], preferred_node=full),
    )
    try:
        failure = wait_event(
            kube, namespace, reason="ProvisioningFailed", contains="ResourceExhausted"
        )
        assert full in failure.message or failure.name == "data"
        history.wait_for_values(
            lambda v: v[:3] == [None, full, None] or v[:2] == [full, None],
            f"{full} selected, then dropped",
        )
        # Fresh capacity reaches the scheduler; the pod goes where there is room.
        admin.unfreeze_capacity()
        assert pv_node(driver, kube, "data", namespace) == roomy
        values = history.wait_for_values(lambda v: v[-1] == roomy, f"{roomy} selected last")
    finally:
        history.stop()
    # The full node (maybe more than once while capacity was stale), dropped, then
    # the roomy one.
    chosen = [v for v in values if v is not None]
    assert chosen[0] == full and chosen[-1] == roomy, values
    assert set(chosen[:-1]) == {full}, values
    assert wait_pod_placed(kube, driver, "app", namespace) == roomy
    exhausted = admin.journal(method="CreateVolume", code="RESOURCE_EXHAUSTED")
    assert exhausted, "the driver must have refused the first CreateVolume"


@pytest.mark.driver(storage_capacity=None, overrides={"topology": False})
@pytest.mark.upstream("csi_storage_capacity.go", "exhausted, late binding, no topology")
@pytest.mark.scenario(
    FEATURE, "no topology, late binding, exhausted: retried for the same selected node"
)
def test_without_topology_an_exhausted_late_binding_claim_keeps_its_selected_node(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    """A driver without VOLUME_ACCESSIBILITY_CONSTRAINTS: external-provisioner cannot
    send the pod elsewhere (no other node would make a difference), so it retries
    CreateVolume and leaves the scheduler's choice in place. The CSIDriver does not
    ask for capacity, as upstream's mock driver does not."""
    assert driver.node_get_info(pod_node)[1] == {}, "NodeGetInfo reports no topology"
    admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", message="fake error", times=1)
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(STRIPED))
    )
    history = AnnotationHistory(kube, "data", namespace).start()
    try:
        objects.create(kube, objects.pod("app", namespace, claims=["data"], nodes=[pod_node]))
        wait_pod_running(kube, "app", namespace, timeout=120)
    finally:
        values = history.stop()
    # Set once and never dropped (a drop would show as None after the node).
    assert values in ([None, pod_node], [pod_node]), values
    calls = admin.journal(method="CreateVolume")
    # As upstream's call check, a call repeated with the same result counts once:
    # external-provisioner may repeat a CreateVolume that succeeded before its PV
    # reached its informer (idempotent; seen on kind under load). All of one volume.
    codes = [r.code for i, r in enumerate(calls) if i == 0 or calls[i - 1].code != r.code]
    assert codes == ["RESOURCE_EXHAUSTED", "OK"], calls
    assert len({r.request.get("name") for r in calls}) == 1, calls
    assert pv_topology(wait_bound_volume(kube, "data", namespace)) == {}


def delete_and_read_volume_calls(
    kube: Client, admin: AdminClient, namespace: str, pod: str, claim: str, pv: Any
) -> list[CallRecord]:
    """Delete the pod and its claim (the volume goes with it: reclaim policy Delete),
    wait for DeleteVolume of the claim's volume, and return the driver's CreateVolume
    calls of it (named after the PV) and DeleteVolume calls of its handle in order
    (repeated successful deletions as one), after checking that one CreateVolume made
    it and that it was deleted after that."""
    handle = pv.spec.csi.volumeHandle
    # As upstream: the pod is gone first. Not forced: the kubelet removes the pod only
    # once its volumes are unpublished, and csi-mock refuses to delete a volume that
    # is still published (FAILED_PRECONDITION, retried by external-provisioner).
    kube.delete(Pod, pod, namespace=namespace, grace_period=1)
    wait_for(
        f"pod {namespace}/{pod} to be deleted",
        lambda: objects.gone(kube, Pod, pod, namespace=namespace),
        timeout=90,
    )
    kube.delete(PersistentVolumeClaim, claim, namespace=namespace)
    wait_for(
        f"DeleteVolume of {handle}",
        lambda: (
            bool(admin.journal(method="DeleteVolume", code="OK", volume=handle)),
            [(r.method, r.code) for r in admin.journal(method="DeleteVolume")],
        ),
        timeout=90,
    )
    # This volume's calls: a pooled driver's journal starts empty, but
    # external-provisioner may repeat a DeleteVolume of the previous test's volume
    # after its PV is gone (seen on kind under load).
    journal = [r for r in admin.journal() if r.method in ("CreateVolume", "DeleteVolume")]
    calls = [
        r
        for r in journal
        if r.request.get("name") == pv.metadata.name or r.request.get("volume_id") == handle
    ]
    created = [r for r in calls if r.method == "CreateVolume" and r.code == "OK"]
    assert len(created) == 1, journal
    # external-provisioner may delete the same volume twice when the PV's update
    # races its own (seen under load): idempotent, both OK. The deletions come after
    # every CreateVolume.
    first = next(i for i, r in enumerate(calls) if r.method == "DeleteVolume")
    deletes = calls[first:]
    assert all(r.method == "DeleteVolume" for r in deletes), journal
    if all(r.code == "OK" for r in deletes):
        deletes = deletes[-1:]
    return calls[:first] + deletes


@pytest.mark.driver(storage_capacity=None, overrides={"topology": False})
@pytest.mark.upstream("csi_storage_capacity.go", "unlimited")
@pytest.mark.scenario(
    FEATURE, "unlimited, Immediate binding: the pod runs, CreateVolume then DeleteVolume, no error"
)
def test_unlimited_capacity_creates_the_volume_once_and_deletes_it(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    """As upstream's mock driver: no topology, no capacity limit in the way; the
    claim binds at once, the pod runs on a node with a real kubelet, and the driver
    sees exactly one CreateVolume and one DeleteVolume of the same volume."""
    objects.create(
        kube, objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    )
    history = AnnotationHistory(kube, "data", namespace).start()
    try:
        pv = wait_bound_volume(kube, "data", namespace, timeout=60)
        objects.create(kube, objects.pod("app", namespace, claims=["data"], nodes=[pod_node]))
        wait_pod_running(kube, "app", namespace, timeout=120)
    finally:
        values = history.stop()
    assert values and all(v is None for v in values), values
    calls = delete_and_read_volume_calls(kube, admin, namespace, "app", "data", pv)
    assert [(r.method, r.code) for r in calls] == [("CreateVolume", "OK"), ("DeleteVolume", "OK")]
    # Last: its own volume would join the journal read above.
    assert_a_waiting_claim_gets_a_selected_node(kube, driver, namespace, pod_node)


@pytest.mark.upstream("csi_storage_capacity.go", "exhausted, immediate binding")
@pytest.mark.scenario(
    FEATURE, "Immediate binding, exhausted: CreateVolume retried until room frees, pod runs"
)
def test_immediate_binding_with_exhausted_capacity_retries_until_room_frees_and_the_pod_runs(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    """As upstream: provisioning is refused while no pool has room, succeeds on a retry
    once room frees, and the pod runs; the claim never gets a selected node. Room
    frees only in the pool of the node that runs pods, so the volume lands there."""
    for node in driver.nodes:
        admin.consume(node_pool_name(node.name), "9Gi")
    objects.create(
        kube, objects.claim("now", namespace, "2Gi", driver.spec.storage_class(IMMEDIATE))
    )
    history = AnnotationHistory(kube, "now", namespace).start()
    try:
        wait_for(
            "CreateVolume to be refused at least twice",
            lambda: (
                len(admin.journal(method="CreateVolume", code="RESOURCE_EXHAUSTED")) >= 2,
                [r.code for r in admin.journal(method="CreateVolume")],
            ),
            timeout=60,
        )
        claim = kube.get(PersistentVolumeClaim, "now", namespace=namespace)
        assert claim.status.phase == "Pending"  # type: ignore[union-attr]
        admin.release(node_pool_name(pod_node), "9Gi")
        pv = wait_bound_volume(kube, "now", namespace, timeout=120)
        objects.create(kube, objects.pod("app", namespace, claims=["now"], nodes=[pod_node]))
        wait_pod_running(kube, "app", namespace, timeout=120)
    finally:
        values = history.stop()
    # The history saw the claim (it raises if it never did) and no node in it.
    assert values and all(v is None for v in values), values
    assert pv_topology(pv)[driver.spec.node_topology_key] == {pod_node}
    calls = delete_and_read_volume_calls(kube, admin, namespace, "app", "now", pv)
    codes = [(r.method, r.code) for r in calls]
    refused = len(codes) - 2
    assert refused >= 2, codes
    assert codes == [("CreateVolume", "RESOURCE_EXHAUSTED")] * refused + [
        ("CreateVolume", "OK"),
        ("DeleteVolume", "OK"),
    ], codes
    # Last: its own volume would join the journal read above.
    assert_a_waiting_claim_gets_a_selected_node(kube, driver, namespace, pod_node)


@pytest.mark.scenario(FEATURE, "mirrored class sees half of what the striped class sees")
def test_storage_class_parameters_change_the_capacity_seen(
    kube: Client, namespace: str, driver: Driver
) -> None:
    candidates = names(driver)
    striped, mirrored = waiting_classes(driver.spec)
    wait_capacity(
        kube,
        driver.spec,
        {(node, striped): 10 * GI for node in candidates}
        | {(node, mirrored): 5 * GI for node in candidates},
    )
    objects.create(
        kube,
        objects.claim("mirrored", namespace, "6Gi", mirrored),
        objects.pod("mirrored", namespace, claims=["mirrored"], nodes=candidates),
        objects.claim("striped", namespace, "6Gi", striped),
        objects.pod("striped", namespace, claims=["striped"], nodes=candidates),
    )
    wait_pod_unschedulable(kube, "mirrored", namespace, message=NOT_ENOUGH_STORAGE)
    assert pv_node(driver, kube, "striped", namespace) in candidates


@pytest.mark.scenario(FEATURE, "generic ephemeral volumes are checked against capacity")
def test_generic_ephemeral_volume_larger_than_every_pool_is_unschedulable(
    kube: Client, namespace: str, driver: Driver
) -> None:
    objects.create(
        kube,
        objects.pod(
            "app",
            namespace,
            ephemeral=[("scratch", "11Gi", driver.spec.storage_class(STRIPED))],
            nodes=names(driver),
        ),
    )
    wait_pod_unschedulable(kube, "app", namespace, message=NOT_ENOUGH_STORAGE)
    # The witness: the same pod with an ephemeral volume that fits is scheduled.
    objects.create(
        kube,
        objects.pod(
            "small",
            namespace,
            ephemeral=[("scratch", "1Gi", driver.spec.storage_class(STRIPED))],
            nodes=names(driver),
        ),
    )
    assert wait_pod_scheduled(kube, "small", namespace) in names(driver)


@pytest.mark.scenario(FEATURE, "CSI inline ephemeral volumes are not checked against capacity")
def test_csi_inline_ephemeral_volume_is_scheduled_whatever_its_size(
    kube: Client, namespace: str, driver: Driver
) -> None:
    candidates = names(driver)
    objects.create(
        kube,
        objects.pod(
            "app",
            namespace,
            inline=[{"size": "11Gi"}],
            csi_driver=driver.spec.name,
            nodes=candidates,
        ),
    )
    assert wait_pod_scheduled(kube, "app", namespace) in candidates


@pytest.mark.driver(max_volume_size="4Gi")
@pytest.mark.scenario(FEATURE, "a claim of exactly maximumVolumeSize fits (inclusive)")
def test_claim_of_exactly_maximum_volume_size_fits_and_one_byte_more_does_not(
    kube: Client, namespace: str, driver: Driver
) -> None:
    candidates = names(driver)
    striped = driver.spec.storage_class(STRIPED)
    wait_capacity(
        kube,
        driver.spec,
        {(node, striped): 10 * GI for node in candidates},
        maximum={(node, striped): 4 * GI for node in candidates},
    )
    objects.create(
        kube,
        objects.claim("exact", namespace, "4Gi", striped),
        objects.pod("exact", namespace, claims=["exact"], nodes=candidates),
        objects.claim("over", namespace, str(4 * GI + 1), striped),
        objects.pod("over", namespace, claims=["over"], nodes=candidates),
    )
    assert pv_node(driver, kube, "exact", namespace) in candidates
    wait_pod_unschedulable(kube, "over", namespace, message=NOT_ENOUGH_STORAGE)
