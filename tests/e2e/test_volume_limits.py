"""Volume limits end to end: NodeGetInfo max_volumes_per_node becomes the CSINode
allocatable count, kube-scheduler's NodeVolumeLimits filter keeps a node's pods
within it, and csi-mock's controller-side attach limit fails ControllerPublishVolume
with RESOURCE_EXHAUSTED.

Pods that only need scheduling are pinned to ``scheduling_nodes`` (on the local
provider its simulated nodes); the tests that need two of them are skipped on a
cluster with fewer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume, Pod
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.kube.waits import (
    volume_attachments,
    wait_bound_volume,
    wait_claim,
    wait_event,
    wait_for,
    wait_pod_running,
    wait_pod_scheduled,
    wait_pod_unschedulable,
    wait_volume_attachment,
)
from csi_harness._internal.providers.base import (
    Cluster,
    Driver,
    Unsupported,
    pick_nodes,
    scheduling_nodes,
)
from csi_mock.admin.client import AdminClient
from tests.e2e.conftest import scheduler_gate

pytestmark = [pytest.mark.e2e, pytest.mark.mission]

FEATURE = "volume limits"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
"""kube-scheduler's NodeVolumeLimits reason (ErrReasonMaxVolumeCountExceeded)."""
SCALING_GATE = "VolumeLimitScaling"
"""KEP-5030: CSIDriver.spec.preventPodSchedulingIfMissing (beta, on by default in 1.37)."""
DRIVER_NOT_INSTALLED = "CSI driver is not installed on the node"
"""The end of NodeVolumeLimits' reason when a node's CSINode lacks an opted-in driver."""


def create_pod_with_claims(
    kube: Client, driver: Driver, name: str, namespace: str, count: int, nodes: list[str]
) -> None:
    claims = [f"{name}-{i}" for i in range(count)]
    storage_class = driver.spec.storage_class()
    objects.create(kube, *(objects.claim(c, namespace, "1Gi", storage_class) for c in claims))
    objects.create(kube, objects.pod(name, namespace, claims=claims, nodes=nodes))


def scheduling_node_names(driver: Driver, count: int) -> list[str]:
    """``count`` nodes for pods that only need scheduling, or the test is skipped."""
    try:
        return [n.name for n in pick_nodes(scheduling_nodes(driver.nodes), count)]
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))


def allocatable_counts(kube: Client, driver: str) -> dict[str, int | None]:
    """Node -> the driver's CSINode allocatable.count (None when absent)."""
    counts: dict[str, int | None] = {}
    for csinode in kube.list(CSINodeResource):
        for entry in csinode_drivers(csinode):
            if entry["name"] == driver:
                name = str(csinode.metadata.name)  # type: ignore[union-attr]
                counts[name] = (entry.get("allocatable") or {}).get("count")
    return counts


def set_allocatable_update_period(kube: Client, driver: Driver, seconds: int) -> None:
    """Set the CSIDriver's nodeAllocatableUpdatePeriodSeconds (KEP-4876,
    MutableCSINodeAllocatableCount); skip the test when the apiserver refuses or drops
    it (gate off)."""
    try:
        updated = kube.patch(
            CSIDriver,
            driver.spec.name,
            {"spec": {"nodeAllocatableUpdatePeriodSeconds": seconds}},
            patch_type=PatchType.MERGE,
        )
    except ApiError as exc:
        pytest.skip(f"CSIDriver nodeAllocatableUpdatePeriodSeconds refused: {exc.status.message}")
    if updated.spec.nodeAllocatableUpdatePeriodSeconds != seconds:
        pytest.skip("the apiserver dropped nodeAllocatableUpdatePeriodSeconds (gate off)")


@pytest.mark.driver(max_volumes_per_node=2)
@pytest.mark.upstream(
    "csi_volume_limit.go", "should report attach limit when limit is bigger than 0"
)
@pytest.mark.scenario(
    FEATURE, "max_volumes_per_node is the CSINode count; N pods run, pod N+1 is unschedulable"
)
def test_the_csinode_count_is_the_limit_and_the_pod_beyond_it_is_unschedulable(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    """As upstream, on one deployment: the count on every node's CSINode, then on a
    node with a real kubelet two pods with a volume each run and a third is refused
    by NodeVolumeLimits."""
    assert allocatable_counts(kube, driver.spec.name) == {n.name: 2 for n in driver.nodes}
    for name in ("first", "second"):
        create_pod_with_claims(kube, driver, name, namespace, 1, nodes=[pod_node])
        wait_pod_running(kube, name, namespace, timeout=120)
    create_pod_with_claims(kube, driver, "third", namespace, 1, nodes=[pod_node])
    message = wait_pod_unschedulable(kube, "third", namespace, message=MAX_VOLUME_COUNT)
    assert f"1 {MAX_VOLUME_COUNT}" in message
    wait_event(kube, namespace, reason="FailedScheduling", contains=MAX_VOLUME_COUNT)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "several nodes: the extra pod goes to the node with room")
def test_pod_goes_to_the_node_that_still_has_room_for_a_volume(
    kube: Client, namespace: str, driver: Driver
) -> None:
    full, roomy = scheduling_node_names(driver, 2)
    create_pod_with_claims(kube, driver, "first", namespace, 1, nodes=[full])
    assert wait_pod_scheduled(kube, "first", namespace) == full
    create_pod_with_claims(kube, driver, "second", namespace, 1, nodes=[full, roomy])
    assert wait_pod_scheduled(kube, "second", namespace) == roomy
    # The witness that the limit, not resource scoring, kept it off the full node: a
    # pod that may go only there is refused for it.
    create_pod_with_claims(kube, driver, "third", namespace, 1, nodes=[full])
    wait_pod_unschedulable(kube, "third", namespace, message=MAX_VOLUME_COUNT)


@pytest.mark.driver(max_volumes_per_node=2)
@pytest.mark.scenario(FEATURE, "limit 2: a pod with two volumes fits, one with three does not")
def test_pod_with_more_volumes_than_the_limit_is_unschedulable(
    kube: Client, namespace: str, driver: Driver
) -> None:
    # Each pod on a node of its own: the second pod's refusal is its own three volumes.
    for_two, for_three = scheduling_node_names(driver, 2)
    create_pod_with_claims(kube, driver, "two", namespace, 2, nodes=[for_two])
    create_pod_with_claims(kube, driver, "three", namespace, 3, nodes=[for_three])
    assert wait_pod_scheduled(kube, "two", namespace) == for_two
    wait_pod_unschedulable(kube, "three", namespace, message=MAX_VOLUME_COUNT)


@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "generic ephemeral volumes count toward the limit")
def test_generic_ephemeral_volumes_count_toward_the_limit(
    kube: Client, namespace: str, driver: Driver
) -> None:
    (node,) = scheduling_node_names(driver, 1)
    scratch = [("scratch", "1Gi", driver.spec.storage_class())]
    objects.create(kube, objects.pod("first", namespace, ephemeral=scratch, nodes=[node]))
    assert wait_pod_scheduled(kube, "first", namespace) == node
    objects.create(kube, objects.pod("second", namespace, ephemeral=scratch, nodes=[node]))
    wait_pod_unschedulable(kube, "second", namespace, message=MAX_VOLUME_COUNT)


def create_pod_with_volume(
    kube: Client, driver: Driver, name: str, namespace: str, volume: str, node: str
) -> None:
    """A pod on ``node`` with one volume: a claim of its own ("claim") or a generic
    ephemeral volume ("ephemeral")."""
    if volume == "claim":
        create_pod_with_claims(kube, driver, name, namespace, 1, nodes=[node])
        return
    scratch = [("scratch", "1Gi", driver.spec.storage_class())]
    objects.create(kube, objects.pod(name, namespace, ephemeral=scratch, nodes=[node]))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(
            "claim",
            "ephemeral",
            marks=pytest.mark.upstream(
                "csi_volume_limit.go",
                "should report attach limit for generic ephemeral volume "
                "when persistent volume is attached",
            ),
            id="claim-then-ephemeral",
        ),
        pytest.param(
            "ephemeral",
            "claim",
            marks=pytest.mark.upstream(
                "csi_volume_limit.go",
                "should report attach limit for persistent volume "
                "when generic ephemeral volume is attached",
            ),
            id="ephemeral-then-claim",
        ),
    ],
)
@pytest.mark.driver(max_volumes_per_node=1)
@pytest.mark.scenario(FEATURE, "claims and generic ephemeral volumes count together")
def test_claims_and_generic_ephemeral_volumes_count_together_toward_the_limit(
    kube: Client, namespace: str, driver: Driver, first: str, second: str
) -> None:
    (node,) = scheduling_node_names(driver, 1)
    assert allocatable_counts(kube, driver.spec.name)[node] == 1
    create_pod_with_volume(kube, driver, "first", namespace, first, node)
    assert wait_pod_scheduled(kube, "first", namespace) == node
    # The first pod's volume is provisioned and bound: it is what the node holds.
    first_claim = "first-0" if first == "claim" else "first-scratch"
    wait_bound_volume(kube, first_claim, namespace)
    create_pod_with_volume(kube, driver, "second", namespace, second, node)
    message = wait_pod_unschedulable(kube, "second", namespace, message=MAX_VOLUME_COUNT)
    assert f"1 {MAX_VOLUME_COUNT}" in message, message


@pytest.mark.driver(attach_required=True, attach_limit=1)
@pytest.mark.scenario(FEATURE, "attach limit: ControllerPublish RESOURCE_EXHAUSTED, FailedAttach")
def test_attach_beyond_the_controller_attach_limit_fails_with_resource_exhausted(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient
) -> None:
    # The attach/detach controller attaches for simulated nodes too (they carry the
    # controller-managed-attach-detach annotation); there the pods never start.
    (node,) = scheduling_node_names(driver, 1)
    create_pod_with_claims(kube, driver, "first", namespace, 1, nodes=[node])
    first = wait_bound_volume(kube, "first-0", namespace)
    wait_volume_attachment(kube, str(first.metadata.name), attached=True)  # type: ignore[union-attr]

    create_pod_with_claims(kube, driver, "second", namespace, 1, nodes=[node])
    second = str(wait_bound_volume(kube, "second-0", namespace).metadata.name)  # type: ignore[union-attr]
    failure = wait_event(
        kube, namespace, reason="FailedAttachVolume", involved="second", contains=second
    )
    assert "ResourceExhausted" in failure.message, failure
    refused = admin.journal(method="ControllerPublishVolume", code="RESOURCE_EXHAUSTED")
    assert refused and {r.request.get("node_id") for r in refused} == {node}
    attachment = wait_volume_attachment(kube, second, attached=False)
    assert attachment.status is not None and attachment.status.attachError is not None


@pytest.mark.driver(max_volumes_per_node=4)
@pytest.mark.upstream(
    "mutable_csinode_allocatable.go", "should observe dynamic changes in CSINode allocatable count"
)
@pytest.mark.scenario(FEATURE, "mutable CSINode allocatable: the count follows NodeGetInfo")
def test_kubelet_refreshes_the_allocatable_count_when_the_driver_changes_it(
    kube: Client, driver: Driver
) -> None:
    # KEP-4876 (MutableCSINodeAllocatableCount): with CSIDriver
    # nodeAllocatableUpdatePeriodSeconds set, the kubelet calls NodeGetInfo again
    # periodically; on the local provider the node simulator does the same for the
    # simulated nodes.
    set_allocatable_update_period(kube, driver, 10)
    # A count of its own for every node (none the 4 they start with), so that a count
    # that went to the wrong node shows.
    wanted = {node.name: 5 + i for i, node in enumerate(driver.nodes)}
    for node, count in wanted.items():
        with driver.admin(node) as node_admin:
            node_admin.set_limits(max_volumes_per_node=count)
    wait_for(
        f"the CSINode allocatable counts to become {wanted}",
        lambda: (
            allocatable_counts(kube, driver.spec.name) == wanted,
            allocatable_counts(kube, driver.spec.name),
        ),
        timeout=45,
        interval=1,
    )


ATTACH_LIMIT_EXCEEDED = "VolumeAttachmentLimitExceeded"
"""The reason the kubelet gives a pod it rejects because an attach of its volume failed
RESOURCE_EXHAUSTED (volumemanager.VolumeAttachmentLimitExceededReason)."""
RESOURCE_EXHAUSTED_CODE = 8


@pytest.mark.slow
# Its 2 minutes are the kubelet's: it decides only once its wait for the pod's volumes
# (podAttachAndMountTimeout, 2 min 3 s, hard-coded) has run out. Its one pod is on the
# real node, so it need not hold back the cluster-wide tests meanwhile.
@pytest.mark.alone
@pytest.mark.real_nodes_only
@pytest.mark.driver(attach_required=True)
@pytest.mark.upstream(
    "mutable_csinode_allocatable.go",
    "should transition pod to failed state when attachment limit exceeded",
)
@pytest.mark.scenario(
    FEATURE,
    "attach refused RESOURCE_EXHAUSTED: the kubelet fails the pod, VolumeAttachmentLimitExceeded",
)
def test_kubelet_fails_the_pod_whose_attach_is_refused_for_the_attachment_limit(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    # With nodeAllocatableUpdatePeriodSeconds set, a kubelet whose wait for a volume
    # times out asks the VolumeAttachment: an attachError with errorCode
    # RESOURCE_EXHAUSTED (external-attacher sets it) rejects the pod instead of
    # retrying it for ever.
    set_allocatable_update_period(kube, driver, 10)
    admin.add_fault("ControllerPublishVolume", code="RESOURCE_EXHAUSTED")
    create_pod_with_claims(kube, driver, "app", namespace, 1, nodes=[pod_node])
    pv = str(wait_bound_volume(kube, "app-0", namespace).metadata.name)  # type: ignore[union-attr]

    def attach_error_code() -> tuple[bool, object]:
        errors = [va.status.attachError for va in volume_attachments(kube, pv) if va.status]
        codes = [e.errorCode for e in errors if e is not None]
        return RESOURCE_EXHAUSTED_CODE in codes, errors

    wait_for(f"the attach error of {pv} with errorCode 8", attach_error_code, timeout=30)

    def rejected() -> tuple[bool, str]:
        status = kube.get(Pod, "app", namespace=namespace).status
        assert status is not None
        seen = f"{status.phase} {status.reason}: {status.message}"
        return status.phase == "Failed", seen

    # 2 min 3 s after the kubelet started on the pod; twice that if a cluster-wide test
    # restarts the kubelet meanwhile (test_kubelet_restart.py), which starts it again.
    seen = wait_for("pod app to fail", rejected, timeout=270, interval=1)
    assert seen.startswith(f"Failed {ATTACH_LIMIT_EXCEEDED}:"), seen


@pytest.fixture
def absent_drivers(kube: Client, namespace: str) -> Iterator[Callable[[str], str]]:
    """Names of CSI drivers no node runs, ``absent_drivers(label)`` each (their CSIDriver
    and PV are created by the test, and deleted after it)."""
    made: list[str] = []

    def name(label: str) -> str:
        made.append(f"{label}.{namespace}.example")
        return made[-1]

    yield name
    for driver in made:
        with contextlib.suppress(ApiError):
            kube.delete(CSIDriver, driver)
        # The claim goes with the namespace; the PV (Retain) has nobody to delete it.
        with contextlib.suppress(ApiError):
            kube.delete(PersistentVolume, driver)


@pytest.fixture
def absent_driver(absent_drivers: Callable[[str], str]) -> str:
    """The name of one CSI driver no node runs (see ``absent_drivers``)."""
    return absent_drivers("absent")


NO_CSIDRIVER = "no CSIDriver"
"""``claim_on_absent_driver``'s ``prevent`` for a driver without a CSIDriver object."""


def claim_on_absent_driver(
    kube: Client,
    cluster: Cluster,
    namespace: str,
    driver: str,
    *,
    prevent: bool | str | None,
    claim_name: str = "data",
) -> None:
    """A CSIDriver ``driver`` with preventPodSchedulingIfMissing ``prevent`` (None: the
    field unset; NO_CSIDRIVER: no CSIDriver object at all) and a claim ``claim_name`` bound to
    a pre-made PV of it, as upstream does (no node has the driver, so nothing could
    provision one). Skips when the gate is off."""
    if scheduler_gate(cluster, SCALING_GATE) is False:
        pytest.skip(f"the cluster's kube-scheduler runs with {SCALING_GATE}=false")
    if prevent != NO_CSIDRIVER:
        # No attaching: nobody would ever attach a volume of a driver no node has.
        spec: dict[str, object] = {"attachRequired": False}
        if prevent is not None:
            spec["preventPodSchedulingIfMissing"] = prevent
        objects.create(
            kube,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": driver},
                "spec": spec,
            },
        )
        stored = kube.get(CSIDriver, driver).spec.preventPodSchedulingIfMissing  # type: ignore[attr-defined]
        if prevent is not None and stored is None:
            pytest.skip(f"the apiserver dropped preventPodSchedulingIfMissing ({SCALING_GATE} off)")
        # Unset, the API server defaults it to false (or drops it with the gate off).
        assert stored is prevent if prevent is not None else stored in (False, None)
    claim = objects.claim(claim_name, namespace, "1Gi", "")
    claim["spec"]["volumeName"] = driver
    objects.create(
        kube,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": driver},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim_name},
                "csi": {"driver": driver, "volumeHandle": "absent-volume"},
            },
        },
        claim,
    )
    wait_claim(
        kube,
        claim_name,
        namespace,
        lambda pvc: pvc.status is not None and pvc.status.phase == "Bound",
        what="Bound to its PV",
    )


@pytest.mark.upstream(
    "csi_volume_limit_scaling.go",
    "blocks scheduling when driver not installed and CSIDriver opts in",
)
@pytest.mark.scenario(
    FEATURE, "preventPodSchedulingIfMissing true: no node without the driver takes the pod"
)
def test_pod_of_a_driver_no_node_runs_is_unschedulable_when_its_csidriver_prevents_it(
    kube: Client,
    cluster: Cluster,
    namespace: str,
    driver: Driver,
    absent_drivers: Callable[[str], str],
) -> None:
    nodes = scheduling_node_names(driver, 1)
    absent = absent_drivers("absent")
    claim_on_absent_driver(kube, cluster, namespace, absent, prevent=True)
    objects.create(kube, objects.pod("app", namespace, claims=["data"], nodes=nodes))
    message = wait_pod_unschedulable(
        kube, "app", namespace, message=f"{absent} {DRIVER_NOT_INSTALLED}"
    )
    assert f"{len(nodes)} {absent} {DRIVER_NOT_INSTALLED}" in message, message
    wait_event(
        kube, namespace, reason="FailedScheduling", involved="app", contains=DRIVER_NOT_INSTALLED
    )
    # The control: the same pod, its claim's driver also on no node but not opting in,
    # is placed on the same nodes.
    control = absent_drivers("control")
    claim_on_absent_driver(kube, cluster, namespace, control, prevent=False, claim_name="ctrl")
    objects.create(kube, objects.pod("control", namespace, claims=["ctrl"], nodes=nodes))
    assert wait_pod_scheduled(kube, "control", namespace) in nodes


@pytest.mark.parametrize(
    "prevent",
    [
        pytest.param(
            None,
            id="unset",
            marks=pytest.mark.upstream(
                "csi_volume_limit_scaling.go",
                "allows scheduling when driver not installed and CSIDriver does not opt in",
            ),
        ),
        pytest.param(False, id="false"),
        pytest.param(
            NO_CSIDRIVER,
            id="no-csidriver",
            marks=pytest.mark.upstream(
                "csi_volume_limit_scaling.go",
                "allows scheduling when driver not installed and CSIDriver object is not present",
            ),
        ),
    ],
)
@pytest.mark.scenario(
    FEATURE, "preventPodSchedulingIfMissing not true: a node without the driver takes the pod"
)
def test_pod_of_a_driver_no_node_runs_is_scheduled_unless_its_csidriver_prevents_it(
    kube: Client,
    cluster: Cluster,
    namespace: str,
    driver: Driver,
    absent_driver: str,
    prevent: bool | str | None,
) -> None:
    nodes = scheduling_node_names(driver, 1)
    claim_on_absent_driver(kube, cluster, namespace, absent_driver, prevent=prevent)
    objects.create(kube, objects.pod("app", namespace, claims=["data"], nodes=nodes))
    assert wait_pod_scheduled(kube, "app", namespace) in nodes
