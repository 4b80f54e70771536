"""kube-controller-manager's SELinuxWarningController end to end: two pods that use one
volume with SELinux labels or change policies that could not both be mounted are
reported, on both pods (events ``SELinuxLabelConflict`` / ``SELinuxChangePolicyConflict``)
and in the controller's ``selinux_warning_controller_selinux_volume_conflict`` metric;
pods that could share the volume are not.

These are the controller's half of upstream's 26 "SELinuxMount metrics" cases
(csi_selinux_mount.go), with upstream's pods: the same access modes, SELinux options
(``s0:c0,c1`` and ``s0:c98,c99``), change policies, privileged containers and first
pods that finish. The controller decides from the API objects alone (pod, claim, volume,
CSIDriver.spec.seLinuxMount) and assumes SELinux on the nodes, so it runs here. The
other half of each case, the kubelet's ``volume_manager_selinux_*`` metrics and the
second pod's FailedMount, needs SELinux enabled on the node itself, which this host's
kernel lacks (docs/selinux.md); each test says so in its ``missing``.

A case that expects no conflict must show that the controller looked: with
CSIDriver.seLinuxMount true, a third pod with a label of its own (``s0:c5,c6``), which
conflicts with every pod still using the volume, is reported against each of them
first; with seLinuxMount false, once the controller's queue has taken the second pod
and drained, turning the field on makes the controller report the pair it had let pass,
and turning it off again makes it withdraw them. The claims bind at once
(Immediate, as upstream's), as the controller needs the volume to tell which driver it
is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType
from prometheus_client.parser import text_string_to_metric_families

from csi_harness._internal.kube import objects
from csi_harness._internal.kube.waits import (
    wait_bound_volume,
    wait_for,
    wait_pod_running,
)
from csi_harness._internal.kube.waits.events import events, wait_event
from csi_harness._internal.providers.base import (
    Cluster,
    Driver,
    Unsupported,
    component_metrics,
)

pytestmark = [pytest.mark.e2e]

FEATURE = "SELinux warning controller"
FILE = "csi_selinux_mount.go"
IMMEDIATE = "csi-mock-immediate"
CONFLICT_METRIC = "selinux_warning_controller_selinux_volume_conflict"
QUEUE = "selinux_warning"
"""The controller's work queue, as its workqueue_* metrics name it."""
LABEL = "SELinuxLabel"
POLICY = "SELinuxChangePolicy"
RWO, RWX, RWOP = "ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"
LEVEL_1, LEVEL_2, WITNESS_LEVEL = "s0:c0,c1", "s0:c98,c99", "s0:c5,c6"
RECURSIVE, MOUNT_OPTION = "Recursive", "MountOption"
CONTROLLER_TIMEOUT = 60
"""Seconds for the controller to report a conflict (upstream allows 2 minutes for the
metric and 5 for the events); it reacts to each pod within an event."""
MISSING = (
    "the kubelet's half: its volume_manager_selinux_* metrics and, where upstream expects "
    "it, the second pod's FailedMount (conflicting SELinux labels) need SELinux enabled on "
    "the node, which this host's kernel lacks (docs/selinux.md)"
)
MISSING_GATE = (
    MISSING + "; and upstream runs this case with the SELinuxMount feature gate off, "
    "which only the kubelet reads"
)


@dataclass(frozen=True)
class PodShape:
    """One pod's SELinux settings, as upstream's case gives them."""

    level: str | None = LEVEL_1
    """seLinuxOptions' level (user, role and type are upstream's); None: no options."""
    policy: str | None = None
    """seLinuxChangePolicy; None: unset (MountOption, for the controller)."""
    privileged: bool = False
    ends: str | None = None
    """"Succeeded" or "Failed": the pod runs once and finishes so, before the next starts."""


@dataclass(frozen=True)
class Case:
    title: str
    access_mode: str
    first: PodShape
    second: PodShape
    conflict: str | None
    """The property the controller reports the pair for; None: no conflict."""
    se_linux_mount: bool = True
    """CSIDriver.spec.seLinuxMount."""
    gate_off: bool = False
    """Upstream runs it with SELinuxMount=false ([Feature:SELinuxMountReadWriteOncePodOnly])."""


P1, P2 = PodShape(LEVEL_1), PodShape(LEVEL_2)
CASES = (
    Case("warning is not bumped on two Pods with the same context on RWO volume",
         RWO, P1, P1, None, gate_off=True),
    Case("warning is bumped on two Pods with a different context on RWO volume",
         RWO, P1, P2, LABEL, gate_off=True),
    Case("warning is bumped on two Pods with different policies on RWO volume",
         RWO, P1, PodShape(LEVEL_1, RECURSIVE), POLICY, gate_off=True),
    Case("warning is not bumped on two Pods with Recursive policy and a different context "
         "on RWO volume",
         RWO, PodShape(LEVEL_1, RECURSIVE), PodShape(LEVEL_2, RECURSIVE), None, gate_off=True),
    Case("error is not bumped on two Pods with the same context on RWO volume and "
         "SELinuxMount enabled",
         RWO, P1, P1, None),
    Case("error is bumped on two Pods with a different context on RWO volume and "
         "SELinuxMount enabled",
         RWO, P1, P2, LABEL),
    Case("error is bumped on two Pods with a different policy on RWO volume and "
         "SELinuxMount enabled (nil + Recursive)",
         RWO, P1, PodShape(LEVEL_1, RECURSIVE), POLICY),
    Case("error is bumped on two Pods with a different policy on RWO volume and "
         "SELinuxMount enabled (Recursive + nil)",
         RWO, PodShape(LEVEL_1, RECURSIVE), P1, POLICY),
    Case("error is bumped on two Pods with a different policy on RWO volume and "
         "SELinuxMount enabled (Recursive + MountOption)",
         RWO, PodShape(LEVEL_1, RECURSIVE), PodShape(LEVEL_1, MOUNT_OPTION), POLICY),
    Case("error is bumped on two Pods with a different context on RWX volume and "
         "SELinuxMount enabled",
         RWX, P1, P2, LABEL),
    Case("error is not bumped on two Pods with Recursive policy and a different context "
         "on RWX volume",
         RWX, PodShape(LEVEL_1, RECURSIVE), PodShape(LEVEL_2, RECURSIVE), None),
    # Upstream's pods are in the reverse order of the title's.
    Case("error is not bumped on two Pods with the same policy RWX volume (nil + MountOption)",
         RWX, PodShape(LEVEL_1, MOUNT_OPTION), P1, None),
    Case("error is not bumped on two Pods with the same policy RWX volume "
         "(MountOption + MountOption)",
         RWX, PodShape(LEVEL_1, MOUNT_OPTION), PodShape(LEVEL_1, MOUNT_OPTION), None),
    Case("error is bumped on two Pods with a different context on RWOP volume",
         RWOP, P1, P2, LABEL),
    Case("error is bumped on two Pods with MountOption policy and a different context on "
         "RWOP volume",
         RWOP, PodShape(LEVEL_1, MOUNT_OPTION), PodShape(LEVEL_2, MOUNT_OPTION), LABEL),
    # Upstream's inputs: Recursive here and MountOption in the next, the other way
    # round from the titles.
    Case("error is not bumped on two privileged Pods with mount policy RWO volume",
         RWO, PodShape(None, RECURSIVE, privileged=True),
         PodShape(None, RECURSIVE, privileged=True), None),
    Case("error is not bumped on two privileged Pods with recursive policy RWO volume",
         RWO, PodShape(None, MOUNT_OPTION, privileged=True),
         PodShape(None, MOUNT_OPTION, privileged=True), None),
    Case("error is not bumped on a privileged and unprivileged Pod with given SELinux "
         "context and recursive policy",
         RWX, PodShape(None, privileged=True), PodShape(LEVEL_1, RECURSIVE), None),
    Case("error is bumped on a privileged and unprivileged Pod with given SELinux with "
         "MountOption policy",
         RWOP, PodShape(None, privileged=True), PodShape(LEVEL_1, MOUNT_OPTION), LABEL),
    Case("error is bumped on an unprivileged and privileged Pod with given SELinux with "
         "MountOption policy",
         RWOP, PodShape(LEVEL_1, MOUNT_OPTION), PodShape(None, privileged=True), LABEL),
    Case("error is not bumped on a finished Pod with a different context on RWO volume "
         "and SELinuxMount enabled",
         RWO, PodShape(LEVEL_1, ends="Succeeded"), P2, None),
    Case("error is not bumped on a failed Pod with a different context on RWO volume and "
         "SELinuxMount enabled",
         RWO, PodShape(LEVEL_1, ends="Failed"), P2, None),
    Case("warning is not bumped on RWO volume with CSIDriver.SELinuxMount disabled and "
         "mismatched labels",
         RWO, P1, P2, None, se_linux_mount=False),
    Case("warning is not bumped on RWX volume with CSIDriver.SELinuxMount disabled and "
         "mismatched labels",
         RWX, P1, P2, None, se_linux_mount=False),
    Case("warning is not bumped on RWO volume with CSIDriver.SELinuxMount disabled and "
         "mismatched policies",
         RWO, PodShape(LEVEL_1, RECURSIVE), PodShape(LEVEL_1, MOUNT_OPTION), None,
         se_linux_mount=False),
    Case("warning is not bumped on RWX volume with CSIDriver.SELinuxMount disabled and "
         "mismatched policies",
         RWX, PodShape(LEVEL_1, RECURSIVE), PodShape(LEVEL_1, MOUNT_OPTION), None,
         se_linux_mount=False),
)  # fmt: skip


def case_id(case: Case) -> str:
    def shape(pod: PodShape) -> str:
        parts = ["priv" if pod.privileged else (pod.level or "none").replace(",", "_")]
        parts += [pod.policy or "nil"] + ([pod.ends] if pod.ends else [])
        return "-".join(parts)

    mode = {RWO: "rwo", RWX: "rwx", RWOP: "rwop"}[case.access_mode]
    driver = "" if case.se_linux_mount else "-nomount"
    gate = "-gateoff" if case.gate_off else ""
    return f"{mode}{driver}{gate}-{shape(case.first)}+{shape(case.second)}"


def selinux_pod(
    name: str, namespace: str, node: str, shape: PodShape, claim: str = "data"
) -> dict[str, Any]:
    """Upstream's pod of a case: the claim mounted, the SELinux settings of ``shape``,
    on ``node``; it sleeps, or runs once and ends as ``shape.ends`` says."""
    command = {"Succeeded": ["true"], "Failed": ["false"]}.get(shape.ends or "")
    pod = objects.pod(name, namespace, claims=[claim], nodes=[node], command=command)
    context: dict[str, Any] = {}
    if shape.level is not None:
        context["seLinuxOptions"] = {
            "user": "system_u",
            "role": "system_r",
            "type": "container_t",
            "level": shape.level,
        }
    if shape.policy is not None:
        context["seLinuxChangePolicy"] = shape.policy
    if context:
        pod["spec"]["securityContext"] = context
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": shape.privileged}
    return pod


def start_pod(kube: Client, namespace: str, node: str, name: str, shape: PodShape) -> None:
    """Create the pod and wait until it runs, or has ended as its shape says."""
    objects.create(kube, selinux_pod(name, namespace, node, shape))
    if shape.ends is None:
        wait_pod_running(kube, name, namespace)
        return

    def ended() -> tuple[bool, str]:
        pod = kube.get(Pod, name, namespace=namespace)
        phase = pod.status.phase if pod.status else None
        return phase == shape.ends, f"phase {phase}"

    wait_for(f"pod {name} to end {shape.ends}", ended, timeout=90, interval=0.5)


# -- what the controller reports -------------------------------------------------------


def conflicts(cluster: Cluster, namespace: str) -> set[tuple[str, str, str]]:
    """The conflicts the controller's metric holds for pods of ``namespace``: (property,
    pod, other pod), each pair in both directions."""
    found = set()
    for family in text_string_to_metric_families(
        component_metrics(cluster).controller_manager_metrics()
    ):
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name == CONFLICT_METRIC
                and sample.value == 1
                and labels.get("pod1_namespace") == namespace
                and labels.get("pod2_namespace") == namespace
            ):
                found.add((labels["property"], labels["pod1_name"], labels["pod2_name"]))
    return found


def queue_counts(cluster: Cluster) -> tuple[float, float]:
    """The controller's work queue: (items added ever, items waiting now)."""
    adds = depth = 0.0
    for family in text_string_to_metric_families(
        component_metrics(cluster).controller_manager_metrics()
    ):
        for sample in family.samples:
            if sample.labels.get("name") != QUEUE:
                continue
            if sample.name == "workqueue_adds_total":
                adds = sample.value
            elif sample.name == "workqueue_depth":
                depth = sample.value
    return adds, depth


def wait_queue_took(cluster: Cluster, adds_before: float) -> None:
    """Wait until the controller's queue has taken an item since it had ``adds_before``
    and has none left waiting."""

    def took() -> tuple[bool, object]:
        adds, depth = queue_counts(cluster)
        return adds > adds_before and depth == 0, {"adds": adds, "depth": depth}

    wait_for(f"the {QUEUE} queue to take the pod", took, timeout=CONTROLLER_TIMEOUT, interval=0.5)


def conflict_events(kube: Client, namespace: str, pod: str, other: str) -> list[str]:
    """The controller's conflict events on ``pod`` that name ``other``."""
    return [
        str(event)
        for event in events(kube, namespace, involved=pod)
        if event.reason.endswith("Conflict") and f"conflicts with pod {other} " in event.message
    ]


def wait_reported(
    kube: Client, cluster: Cluster, namespace: str, prop: str, pod: str, other: str
) -> None:
    """Wait until the controller has reported ``pod`` and ``other`` for ``prop``: an
    event on each pod naming the other, and the metric's series of the pair."""
    for this, that in ((pod, other), (other, pod)):
        wait_event(
            kube,
            namespace,
            reason=f"{prop}Conflict",
            involved=this,
            contains=f"conflicts with pod {that} that uses the same volume as this pod with {prop}",
            timeout=CONTROLLER_TIMEOUT,
        )

    def in_metric() -> tuple[bool, object]:
        found = conflicts(cluster, namespace)
        return (prop, pod, other) in found and (prop, other, pod) in found, found

    wait_for(
        f"{CONFLICT_METRIC} to hold {prop} of {pod} and {other}",
        in_metric,
        timeout=CONTROLLER_TIMEOUT,
        interval=0.5,
    )


def pair_conflicts(
    cluster: Cluster, namespace: str, pod: str, other: str
) -> set[tuple[str, str, str]]:
    """The metric's conflicts between ``pod`` and ``other``, in either direction."""
    return {c for c in conflicts(cluster, namespace) if {c[1], c[2]} == {pod, other}}


def assert_not_reported(
    kube: Client, cluster: Cluster, namespace: str, pod: str, other: str
) -> None:
    pairs = pair_conflicts(cluster, namespace, pod, other)
    assert not pairs, f"the controller reports {pod} and {other}: {sorted(pairs)}"
    for this, that in ((pod, other), (other, pod)):
        assert not conflict_events(kube, namespace, this, that)


def wait_seen_by_witness(
    kube: Client, cluster: Cluster, namespace: str, node: str, live: list[str]
) -> None:
    """Start a pod with a label of its own on the volume and wait until the controller
    has reported it against each pod in ``live``: by then it has taken in every one."""
    objects.create(kube, selinux_pod("witness", namespace, node, PodShape(WITNESS_LEVEL)))

    def reported() -> tuple[bool, object]:
        pairs = {(a, b) for _, a, b in conflicts(cluster, namespace)}
        return all(("witness", pod) in pairs for pod in live), sorted(pairs)

    wait_for(
        f"the controller to report the witness pod against {live}",
        reported,
        timeout=CONTROLLER_TIMEOUT,
        interval=0.5,
    )


def wait_withdrawn(cluster: Cluster, namespace: str, pod: str, other: str) -> None:
    """Wait until the controller's metric no longer holds any conflict of the pair."""

    def withdrawn() -> tuple[bool, object]:
        pairs = pair_conflicts(cluster, namespace, pod, other)
        return not pairs, sorted(pairs)

    wait_for(
        f"{CONFLICT_METRIC} to drop {pod} and {other}",
        withdrawn,
        timeout=CONTROLLER_TIMEOUT,
        interval=0.5,
    )


def set_se_linux_mount(kube: Client, driver: Driver, value: bool) -> None:
    kube.patch(
        CSIDriver, driver.spec.name, {"spec": {"seLinuxMount": value}}, patch_type=PatchType.MERGE
    )


def params() -> list[Any]:
    return [
        pytest.param(
            case,
            marks=[
                pytest.mark.driver(se_linux_mount=case.se_linux_mount, storage_capacity=False),
                pytest.mark.upstream(
                    FILE, case.title, missing=MISSING_GATE if case.gate_off else MISSING
                ),
            ],
            id=case_id(case),
        )
        for case in CASES
    ]


@pytest.fixture
def controller_metrics(cluster: Cluster) -> None:
    """Skips the test where the harness cannot read kube-controller-manager's metrics
    (a cluster it did not bring up)."""
    try:
        component_metrics(cluster).controller_manager_metrics()
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))


@pytest.mark.usefixtures("controller_metrics")
@pytest.mark.parametrize("case", params())
@pytest.mark.scenario(
    FEATURE, "pods that could not share a volume's SELinux mount are reported, others are not"
)
def test_selinux_warning_controller_reports_pods_that_cannot_share_the_volume(
    kube: Client,
    cluster: Cluster,
    namespace: str,
    driver: Driver,
    pod_node: str,
    case: Case,
) -> None:
    claim = objects.claim("data", namespace, "1Gi", driver.spec.storage_class(IMMEDIATE))
    claim["spec"]["accessModes"] = [case.access_mode]
    objects.create(kube, claim)
    wait_bound_volume(kube, "data", namespace)
    csidriver = kube.get(CSIDriver, driver.spec.name).spec
    assert csidriver is not None and csidriver.seLinuxMount is case.se_linux_mount, csidriver

    start_pod(kube, namespace, pod_node, "first", case.first)
    adds_before, _ = queue_counts(cluster)
    # The second pod need not run: on a ReadWriteOncePod volume the scheduler keeps it
    # off the node while the first runs, and the controller reads pods as they are.
    objects.create(kube, selinux_pod("second", namespace, pod_node, case.second))

    if case.conflict is not None:
        wait_reported(kube, cluster, namespace, case.conflict, "first", "second")
        return
    if case.se_linux_mount:
        live = ["second"] if case.first.ends else ["first", "second"]
        wait_seen_by_witness(kube, cluster, namespace, pod_node, live)
        assert_not_reported(kube, cluster, namespace, "first", "second")
        return
    # Without seLinuxMount the controller treats both pods as Recursive, unlabelled: no
    # pod can conflict. Turning the field on must make it report the pair it let pass
    # (so it had taken both pods in), and turning it off again must withdraw them.
    wait_pod_running(kube, "second", namespace)
    wait_queue_took(cluster, adds_before)
    assert_not_reported(kube, cluster, namespace, "first", "second")
    set_se_linux_mount(kube, driver, True)
    expected = LABEL if case.first.level != case.second.level else POLICY
    wait_reported(kube, cluster, namespace, expected, "first", "second")
    set_se_linux_mount(kube, driver, False)
    wait_withdrawn(cluster, namespace, "first", "second")
