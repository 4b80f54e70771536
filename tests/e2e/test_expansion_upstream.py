"""Volume expansion as Kubernetes' own csimock suite checks it
(``csi_volume_expansion.go``): with and without node expansion, with and without
attach, through a pod restart, with a node-expand secret, recovery from a failed
expansion (RecoverVolumeExpansionFailure, GA in the pinned csi-resizer) and the
file system resize of a retained volume bound again to a new claim.

Upstream's mock driver fails calls through hooks; here fault rules on the controller's
or the node's csi-mock instance do the same (a size above a limit fails with a given
code), and their journals show the calls. As upstream, a claim of 1Gi is mounted by a
pod on a node with a real kubelet and then grown; a wait is done when upstream's is:
the volume's and the claim's capacity at least the request, and no resize condition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import (
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    ResourceQuota,
    Secret,
)
from lightkube.resources.storage_v1 import StorageClass
from lightkube.types import PatchType

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    claim_conditions,
    describe_claim,
    storage_of,
    wait_bound_volume,
    wait_claim,
    wait_event,
    wait_for,
    wait_pod_running,
)
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminClient
from tests.e2e.conftest import node_calls
from tests.e2e.test_expansion import (
    FS_RESIZE_PENDING,
    GI,
    RESIZE_CONDITIONS,
    expansion_results,
    pv_name,
    request_size,
    volume_id_of,
)

pytestmark = [pytest.mark.e2e]

FEATURE = "volume expansion"
FILE = "csi_volume_expansion.go"
CONTROLLER_EXPAND = "ControllerExpandVolume"
NODE_EXPAND = "NodeExpandVolume"
RESIZE_WAIT = 300
"""Upstream's csiResizeWaitPeriod (5 minutes). Resizes take seconds; the margin is for
csi-resizer v2.3.0, seen retrying a 409 conflict on the claim's status for the whole
2 minutes this file waited before (once in six runs of a recovery case); whether it
gets past that within upstream's 5 minutes is not known yet."""
CONTROLLER_LIMIT = "10Gi"
"""Upstream's maxControllerSizeLimit: its hook fails ControllerExpandVolume above it."""
NODE_LIMIT = "8Gi"
"""Upstream's maxNodeExpansionLimit: its hook fails NodeExpandVolume above it."""
SECRET = {"username": "admin", "password": "t0p-Secret"}
"""Upstream's node-expand secret."""
NODE_EXPAND_SECRET_NAME = "csi.storage.k8s.io/node-expand-secret-name"
NODE_EXPAND_SECRET_NAMESPACE = "csi.storage.k8s.io/node-expand-secret-namespace"


def upstream(title: str) -> pytest.MarkDecorator:
    return pytest.mark.upstream(FILE, title)


def claim_in_use(
    kube: Client, namespace: str, node: str, storage_class: str, pod: str = "app"
) -> PersistentVolume:
    """Claim "data" of 1Gi in ``storage_class``, mounted by ``pod`` running on ``node``."""
    objects.create(
        kube,
        objects.claim("data", namespace, "1Gi", storage_class),
        objects.pod(pod, namespace, claims=["data"], nodes=[node]),
    )
    wait_pod_running(kube, pod, namespace, timeout=120)
    return wait_bound_volume(kube, "data", namespace)


def delete_pod(kube: Client, namespace: str, name: str) -> None:
    kube.delete(Pod, name, namespace=namespace, grace_period=0)
    wait_for(
        f"pod {name} gone", lambda: objects.gone(kube, Pod, name, namespace=namespace), timeout=60
    )


def pod_uid(kube: Client, namespace: str, name: str) -> str:
    metadata = kube.get(Pod, name, namespace=namespace).metadata
    assert metadata is not None and metadata.uid is not None
    return metadata.uid


def requested(claim: PersistentVolumeClaim) -> int:
    assert claim.spec is not None and claim.spec.resources is not None
    size = storage_of(claim.spec.resources.requests)
    assert size is not None
    return size


def wait_expanded(
    kube: Client, namespace: str, pv: PersistentVolume, claim: str = "data"
) -> PersistentVolumeClaim:
    """As upstream's WaitForControllerVolumeResize, WaitForFSResize and
    ExpectNoResizeConditions: the volume, then the claim, at least as large as the
    claim's request, and no resize condition on the claim."""
    size = requested(kube.get(PersistentVolumeClaim, claim, namespace=namespace))
    wait_for(
        f"PersistentVolume {pv_name(pv)} of at least {size} bytes",
        lambda: (
            (seen := storage_of(kube.get(PersistentVolume, pv_name(pv)).spec.capacity))  # type: ignore[union-attr]
            is not None
            and seen >= size,
            seen,
        ),
        timeout=RESIZE_WAIT,
        interval=0.5,
    )
    grown = wait_claim(
        kube,
        claim,
        namespace,
        lambda c: (storage_of(c.status.capacity if c.status else None) or 0) >= size,
        what=f"a capacity of at least {size} bytes",
        timeout=RESIZE_WAIT,
    )
    assert not RESIZE_CONDITIONS & set(claim_conditions(grown)), describe_claim(grown)
    return grown


def resize_status(claim: PersistentVolumeClaim) -> str:
    """The claim's allocatedResourceStatuses of storage ("" without one)."""
    statuses = claim.status.allocatedResourceStatuses if claim.status else None
    return str((statuses or {}).get("storage", ""))


def allocated(claim: PersistentVolumeClaim) -> int | None:
    return storage_of(claim.status.allocatedResources if claim.status else None)


@pytest.fixture
def class_like(kube: Client, driver: Driver, namespace: str) -> Iterator[Callable[..., str]]:
    """Make a copy of the driver's WaitForFirstConsumer class with extra parameters
    and fields; the copies are deleted at the end."""
    made: list[str] = []

    def make(suffix: str, parameters: dict[str, str] | None = None, **fields: Any) -> str:
        manifest: dict[str, Any] = kube.get(StorageClass, driver.spec.storage_class()).to_dict()
        name = f"{namespace}-{suffix}"
        manifest["metadata"] = {"name": name}
        manifest["parameters"] = {**manifest.get("parameters", {}), **(parameters or {})}
        manifest.update(fields)
        objects.create(kube, manifest)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(ApiError):
            kube.delete(StorageClass, name)


# --- CSI Volume expansion ----------------------------------------------------------


@pytest.mark.driver(node_expansion=False, node_expansion_required=False)
@upstream("should expand volume without restarting pod if nodeExpansion=off")
@pytest.mark.scenario(FEATURE, "without node expansion a claim in use grows on the controller")
def test_without_node_expansion_a_claim_in_use_grows_on_the_controller_alone(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = claim_in_use(kube, namespace, pod_node, driver.spec.storage_class())
    volume_id = volume_id_of(pv)
    uid = pod_uid(kube, namespace, "app")

    request_size(kube, "data", namespace, "6Gi")

    claim = wait_expanded(kube, namespace, pv)
    assert storage_of(claim.status.capacity) == 6 * GI  # type: ignore[union-attr]
    assert expansion_results(admin, volume_id) == {("OK", 6 * GI)}
    assert node_calls(driver, pod_node, NODE_EXPAND, volume_id) == []
    assert pod_uid(kube, namespace, "app") == uid, "the pod was replaced"


@pytest.mark.parametrize(
    "missing_staging_path",
    [
        pytest.param(
            False,
            marks=[
                pytest.mark.driver(attach_required=True),
                upstream("should expand volume by restarting pod if attach=on, nodeExpansion=on"),
            ],
            id="attach-on",
        ),
        pytest.param(
            True,
            marks=[
                pytest.mark.driver(attach_required=True),
                upstream(
                    "should not have staging_path missing in node expand volume pod if attach=on,"
                    " nodeExpansion=on"
                ),
            ],
            id="attach-on-staging-path",
        ),
        pytest.param(
            False,
            marks=[
                pytest.mark.driver(attach_required=False),
                upstream("should expand volume by restarting pod if attach=off, nodeExpansion=on"),
            ],
            id="attach-off",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "a claim grown in use is grown on its node once a new pod runs")
def test_a_claim_grown_in_use_is_grown_on_its_node_by_the_time_a_new_pod_runs(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    pod_node: str,
    missing_staging_path: bool,
) -> None:
    pv = claim_in_use(kube, namespace, pod_node, driver.spec.storage_class())
    volume_id = volume_id_of(pv)
    rule = None
    if missing_staging_path:
        # Upstream's hook: a NodeExpandVolume without a staging path is refused.
        with driver.admin(pod_node) as node_admin:
            rule = node_admin.add_fault(
                NODE_EXPAND,
                code="INVALID_ARGUMENT",
                message="invalid node expansion request, missing staging path",
                where={"staging_target_path": ""},
            )

    request_size(kube, "data", namespace, "6Gi")
    wait_for(
        "the controller's part of the expansion",
        lambda: (expansion_results(admin, volume_id) == {("OK", 6 * GI)}, "not yet"),
        timeout=120,
        interval=0.5,
    )
    # Upstream's WaitForPendingFSResizeCondition: the node's part pending, or done
    # (the driver is online: the kubelet may grow the volume in the running pod).
    wait_claim(
        kube,
        "data",
        namespace,
        lambda c: (
            FS_RESIZE_PENDING in claim_conditions(c)
            or not RESIZE_CONDITIONS & set(claim_conditions(c))
        ),
        what=f"{FS_RESIZE_PENDING} or no resize condition",
        timeout=120,
    )
    delete_pod(kube, namespace, "app")
    objects.create(kube, objects.pod("next", namespace, claims=["data"], nodes=[pod_node]))
    wait_pod_running(kube, "next", namespace, timeout=120)

    claim = wait_expanded(kube, namespace, pv)
    assert storage_of(claim.status.capacity) == 6 * GI  # type: ignore[union-attr]
    grown = node_calls(driver, pod_node, NODE_EXPAND, volume_id)
    assert grown and all(r.request.get("staging_target_path") for r in grown), grown
    assert [(r.code, r.request.get("required_bytes")) for r in grown][-1] == ("OK", 6 * GI)
    if rule is not None:
        with driver.admin(pod_node) as node_admin:
            assert node_admin.fault(rule.id).fired == 0


@pytest.mark.driver(resizer=False, node_expansion=False, node_expansion_required=False)
@upstream("should not expand volume if resizingOnDriver=off, resizingOnSC=on")
@pytest.mark.scenario(FEATURE, "without external-resizer a claim is never grown")
def test_without_the_resizer_a_claim_is_never_grown(
    kube: Client, namespace: str, driver: Driver, admin: AdminClient, pod_node: str
) -> None:
    pv = claim_in_use(kube, namespace, pod_node, driver.spec.storage_class())
    volume_id = volume_id_of(pv)

    request_size(kube, "data", namespace, "6Gi")

    # kube-controller-manager leaves the claim to an external resizer ...
    wait_event(kube, namespace, reason="ExternalExpanding", involved="data", timeout=60)

    # ... which does not run: no Resizing condition and no expansion (upstream
    # watches for 2 minutes; a running resizer takes about a second).
    def unchanged() -> tuple[bool, str]:
        claim = kube.get(PersistentVolumeClaim, "data", namespace=namespace)
        assert "Resizing" not in claim_conditions(claim), describe_claim(claim)
        assert expansion_results(admin, volume_id) == set()
        return False, "unchanged"

    with contextlib.suppress(TimeoutError):
        wait_for("a change that must not come", unchanged, timeout=5, interval=0.5)
    assert storage_of(kube.get(PersistentVolume, pv_name(pv)).spec.capacity) == GI  # type: ignore[union-attr]


# --- CSI online volume expansion (with secret) -------------------------------------


@pytest.mark.driver(attach_required=True, journal_requests="whole")
@upstream(
    "should expand volume without restarting pod if attach=on, nodeExpansion=on,"
    " csiNodeExpandSecret=on"
)
@pytest.mark.scenario(FEATURE, "NodeExpandVolume gets the class's node-expand secret")
def test_node_expand_volume_gets_the_secret_the_class_names(
    kube: Client,
    namespace: str,
    driver: Driver,
    pod_node: str,
    class_like: Callable[..., str],
) -> None:
    objects.create(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "test-secret", "namespace": namespace},
            "stringData": SECRET,
        },
    )
    storage_class = class_like(
        "secret",
        {NODE_EXPAND_SECRET_NAME: "test-secret", NODE_EXPAND_SECRET_NAMESPACE: namespace},
    )
    pv = claim_in_use(kube, namespace, pod_node, storage_class)
    volume_id = volume_id_of(pv)
    uid = pod_uid(kube, namespace, "app")
    assert pv.spec is not None and pv.spec.csi is not None
    ref = pv.spec.csi.nodeExpandSecretRef
    assert ref is not None and (ref.namespace, ref.name) == (namespace, "test-secret"), ref

    request_size(kube, "data", namespace, "6Gi")

    wait_expanded(kube, namespace, pv)
    assert pod_uid(kube, namespace, "app") == uid, "the pod was replaced"
    with driver.admin(pod_node) as node_admin:
        hashed = {key: node_admin.secret_hash(value) for key, value in SECRET.items()}
        calls = node_admin.journal(method=NODE_EXPAND, volume=volume_id)
    assert calls, f"no {NODE_EXPAND} of {volume_id}"
    for call in calls:
        assert call.whole_request is not None, call
        assert (call.code, call.whole_request.get("secrets")) == ("OK", hashed), call
    kube.delete(Secret, "test-secret", namespace=namespace)


# --- Expansion with recovery -------------------------------------------------------


def recovery_case(
    title: str,
    case_id: str,
    *,
    request: str,
    fault: tuple[str, str] | None = None,
    controller_expansion: bool = True,
    status: str = "",
    recovery: str | None = None,
    quota_used: str | None = None,
) -> Any:
    return pytest.param(
        request,
        fault,
        status,
        recovery,
        quota_used,
        marks=[
            # Node-only expansion: the node advertises EXPAND_VOLUME, the controller not.
            pytest.mark.driver(controller_expansion=controller_expansion, node_expansion=True),
            upstream(title),
        ],
        id=case_id,
    )


def quantity(size: str) -> int:
    assert size.endswith("Gi"), size
    return int(size[:-2]) * GI


@pytest.mark.parametrize(
    ("request_to", "fault", "status", "recovery", "quota_used"),
    [
        recovery_case(
            "should record target size in allocated resources",
            "success",
            request="4Gi",
            quota_used="4Gi",
        ),
        recovery_case(
            "should allow recovery if controller expansion fails with infeasible error",
            "controller-infeasible",
            request="11Gi",
            fault=(CONTROLLER_EXPAND, "INVALID_ARGUMENT"),
            status="ControllerResizeInfeasible",
            recovery="4Gi",
            quota_used="4Gi",
        ),
        recovery_case(
            "should allow recovery if controller expansion fails with final error",
            "controller-final",
            request="11Gi",
            fault=(CONTROLLER_EXPAND, "PERMISSION_DENIED"),
            status="ControllerResizeInProgress",
            recovery="4Gi",
            quota_used="4Gi",
        ),
        recovery_case(
            "recovery should not be possible in partially expanded volumes",
            "partially-expanded",
            request="9Gi",
            fault=(NODE_EXPAND, "INVALID_ARGUMENT"),
            status="NodeResizeInfeasible",
            recovery="5Gi",
        ),
        recovery_case(
            "recovery should be possible for node-only expanded volumes with infeasible error",
            "node-only-infeasible",
            request="9Gi",
            fault=(NODE_EXPAND, "INVALID_ARGUMENT"),
            controller_expansion=False,
            status="NodeResizeInfeasible",
            recovery="5Gi",
            quota_used="5Gi",
        ),
        recovery_case(
            "recovery should be possible for node-only expanded volumes with final error",
            "node-only-final",
            request="9Gi",
            fault=(NODE_EXPAND, "PERMISSION_DENIED"),
            controller_expansion=False,
            status="NodeResizeInProgress",
            recovery="5Gi",
            quota_used="5Gi",
        ),
    ],
)
@pytest.mark.scenario(FEATURE, "a failed expansion is recovered by asking for less")
def test_a_failed_expansion_is_recovered_by_asking_for_less_unless_the_controller_grew_it(
    kube: Client,
    namespace: str,
    driver: Driver,
    admin: AdminClient,
    pod_node: str,
    request_to: str,
    fault: tuple[str, str] | None,
    status: str,
    recovery: str | None,
    quota_used: str | None,
) -> None:
    if quota_used is not None:
        objects.create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "quota", "namespace": namespace},
                "spec": {"hard": {"requests.storage": "20Gi", "persistentvolumeclaims": "5"}},
            },
        )
    if fault is not None:
        method, code = fault
        limit = CONTROLLER_LIMIT if method == CONTROLLER_EXPAND else NODE_LIMIT
        rule: dict[str, Any] = {
            "code": code,
            "message": "injected expansion failure",
            "where": {"capacity_range.required_bytes": f">{limit}"},
        }
        if method == CONTROLLER_EXPAND:
            admin.add_fault(method, **rule)
        else:
            with driver.admin(pod_node) as node_admin:
                node_admin.add_fault(method, **rule)
    pv = claim_in_use(kube, namespace, pod_node, driver.spec.storage_class())

    request_size(kube, "data", namespace, request_to)

    if fault is None:
        claim = wait_expanded(kube, namespace, pv)
        assert allocated(claim) == quantity(request_to), describe_claim(claim)
        assert resize_status(claim) == "", describe_claim(claim)
    else:
        claim = wait_claim(
            kube,
            "data",
            namespace,
            lambda c: allocated(c) == quantity(request_to),
            what=f"allocated resources of {request_to}",
            timeout=RESIZE_WAIT,
        )
        failed_on_node = failed_status(status)
        wait_claim(kube, "data", namespace, failed_on_node, what=status, timeout=RESIZE_WAIT)
        assert recovery is not None

        request_size(kube, "data", namespace, recovery)

        if fault[0] == NODE_EXPAND and driver.spec.controller_expansion:
            # The controller grew the volume already: it cannot shrink back.
            claim = wait_claim(
                kube,
                "data",
                namespace,
                lambda c: (
                    requested(c) == quantity(recovery) and "NodeResizeError" in claim_conditions(c)
                ),
                what="NodeResizeError after the smaller request",
                timeout=RESIZE_WAIT,
            )
            assert allocated(claim) == quantity(request_to), describe_claim(claim)
        else:
            claim = wait_expanded(kube, namespace, pv)
            assert allocated(claim) == quantity(recovery), describe_claim(claim)
            assert resize_status(claim) == "", describe_claim(claim)
    if quota_used is not None:
        expected = {"persistentvolumeclaims": 1, "requests.storage": quantity(quota_used)}

        def used() -> tuple[bool, dict[str, int | None]]:
            quota = kube.get(ResourceQuota, "quota", namespace=namespace)
            seen = {
                key: storage_of({"storage": value})
                for key, value in ((quota.status.used if quota.status else None) or {}).items()
            }
            return seen == expected, seen

        wait_for(f"quota usage {expected}", used, timeout=60, interval=0.5)


def failed_status(status: str) -> Callable[[PersistentVolumeClaim], bool]:
    """Upstream's wait for a failure: NodeResizeError for an infeasible node expansion
    (waitForResizeToFailOnNode), else the resize status."""
    if status == "NodeResizeInfeasible":
        return lambda c: "NodeResizeError" in claim_conditions(c)
    return lambda c: resize_status(c) == status


# --- CSI offline volume expansion after PVC deletion -------------------------------


def pv_phase(kube: Client, name: str) -> str:
    status = kube.get(PersistentVolume, name).status
    return str(status.phase) if status else "?"


def wait_pv_phase(kube: Client, name: str, phase: str) -> None:
    wait_for(
        f"PersistentVolume {name} {phase}",
        lambda: ((seen := pv_phase(kube, name)) == phase, seen),
        timeout=60,
        interval=0.5,
    )


@upstream("should complete filesystem resize after PVC is deleted and new PVC binds to retained PV")
@pytest.mark.scenario(
    FEATURE, "a retained volume grown offline is grown on the node for a new claim"
)
def test_a_retained_volume_grown_offline_completes_its_resize_for_a_new_claim(
    kube: Client,
    namespace: str,
    driver: Driver,
    pod_node: str,
    class_like: Callable[..., str],
) -> None:
    storage_class = class_like("retain", reclaimPolicy="Retain")
    pv = claim_in_use(kube, namespace, pod_node, storage_class)
    name = pv_name(pv)
    volume_id = volume_id_of(pv)
    try:
        delete_pod(kube, namespace, "app")
        request_size(kube, "data", namespace, "6Gi")
        wait_for(
            f"PersistentVolume {name} of 6Gi",
            lambda: (
                storage_of(kube.get(PersistentVolume, name).spec.capacity) == 6 * GI,  # type: ignore[union-attr]
                "not yet",
            ),
            timeout=120,
            interval=0.5,
        )
        wait_claim(
            kube,
            "data",
            namespace,
            lambda c: FS_RESIZE_PENDING in claim_conditions(c),
            what=f"a {FS_RESIZE_PENDING} condition",
            timeout=120,
        )
        kube.delete(PersistentVolumeClaim, "data", namespace=namespace)
        wait_pv_phase(kube, name, "Released")
        before = len(node_calls(driver, pod_node, NODE_EXPAND, volume_id))
        kube.patch(PersistentVolume, name, {"spec": {"claimRef": None}}, patch_type=PatchType.MERGE)
        wait_pv_phase(kube, name, "Available")

        rebound = objects.claim("rebound", namespace, "6Gi", storage_class)
        rebound["spec"]["volumeName"] = name
        objects.create(kube, rebound)
        # The PV controller takes the claim's capacity from the PV's pre-resize annotation.
        wait_claim(
            kube,
            "rebound",
            namespace,
            lambda c: storage_of(c.status.capacity if c.status else None) == GI,
            what="a capacity of 1Gi (the size before the resize)",
            timeout=60,
        )
        objects.create(kube, objects.pod("next", namespace, claims=["rebound"], nodes=[pod_node]))
        wait_pod_running(kube, "next", namespace, timeout=120)

        claim = wait_expanded(kube, namespace, pv, claim="rebound")
        assert storage_of(claim.status.capacity) == 6 * GI  # type: ignore[union-attr]
        wait_for(
            f"a new {NODE_EXPAND} of {volume_id}",
            lambda: (
                (count := len(node_calls(driver, pod_node, NODE_EXPAND, volume_id))) > before,
                count,
            ),
            timeout=60,
            interval=0.5,
        )
    finally:
        # So that the namespace's clean-up deletes the volume.
        with contextlib.suppress(ApiError):
            kube.patch(
                PersistentVolume,
                name,
                {"spec": {"persistentVolumeReclaimPolicy": "Delete"}},
                patch_type=PatchType.MERGE,
            )
