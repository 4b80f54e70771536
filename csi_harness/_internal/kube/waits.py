"""Waiting for Kubernetes to do something, and failing with what it did instead.

Every wait lists the objects it is about and then follows them with a watch
(``csi_harness._internal.kube.watching.watch_until``), so it answers within one event of the
change instead of a poll interval later. Every function takes a timeout; a timeout
raises ``WaitTimeout`` naming what was expected and the last thing seen (the pod's
conditions, the events, the objects).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from lightkube import Client
from lightkube.resources.core_v1 import Event, PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity, VolumeAttachment

from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.kube.watching import ListerWatcher, Selection, follow, watch_until
from csi_mock.model.quantity import parse_quantity

SELECTED_NODE = "volume.kubernetes.io/selected-node"
DRIVER_NAME_LABEL = "csi.storage.k8s.io/drivername"
"""external-provisioner's label on the CSIStorageCapacity objects it owns."""
HISTORY_SLICE = 1.0
"""Seconds of one watch request of an ``AnnotationHistory``: how long its thread
outlives stop()."""

__all__ = [
    "DRIVER_NAME_LABEL",
    "SELECTED_NODE",
    "AnnotationHistory",
    "WaitTimeout",
    "capacities",
    "claim_conditions",
    "describe_claim",
    "events",
    "pv_topology",
    "storage_of",
    "termination_message",
    "volume_attachments",
    "wait_bound_volume",
    "wait_capacity",
    "wait_claim",
    "wait_claim_capacity",
    "wait_event",
    "wait_for",
    "wait_pod_running",
    "wait_pod_scheduled",
    "wait_pod_succeeded",
    "wait_pod_unschedulable",
    "wait_volume_attachment",
    "wait_volume_attachments_gone",
    "wait_volume_capacity",
]

Kube: TypeAlias = Client | ListerWatcher
"""A lightkube client, or (in unit tests) anything that lists and watches like one."""


class CapacityPublisher(Protocol):
    """What the capacity waits need of a driver (a ``DriverDeployment`` is one): its
    name, where its CSIStorageCapacity objects live and its node topology key."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def node_topology_key(self) -> str: ...


def _conditions(pod: Pod) -> dict[str, Any]:
    return {c.type: c for c in (pod.status.conditions or [])} if pod.status else {}


def _describe(pod: Pod) -> str:
    parts = [f"phase={pod.status.phase if pod.status else None}"]
    parts += [f"{c.type}={c.status}({c.reason}: {c.message})" for c in _conditions(pod).values()]
    if pod.spec and pod.spec.nodeName:
        parts.append(f"node={pod.spec.nodeName}")
    return ", ".join(parts)


def _watch_pod(
    kube: Kube,
    name: str,
    namespace: str,
    check: Callable[[Pod], tuple[bool, Any]],
    *,
    what: str,
    timeout: float,
) -> Any:
    """``watch_until`` for one pod; while it does not exist, that is what was seen."""

    def check_pods(pods: dict[str, Pod]) -> tuple[bool, Any]:
        pod = pods.get(name)
        return (False, f"no pod {name}") if pod is None else check(pod)

    return watch_until(
        kube, Pod, namespace=namespace, name=name, what=what, check=check_pods, timeout=timeout
    )


def wait_pod_scheduled(kube: Kube, name: str, namespace: str, timeout: float = 60) -> str:
    """Wait until the pod is bound to a node; return the node's name."""

    def check(pod: Pod) -> tuple[bool, str]:
        node = pod.spec.nodeName if pod.spec else None
        return bool(node), node or _describe(pod)

    node: str = _watch_pod(
        kube,
        name,
        namespace,
        check,
        what=f"pod {namespace}/{name} to be scheduled",
        timeout=timeout,
    )
    return node


def wait_pod_running(kube: Kube, name: str, namespace: str, timeout: float = 90) -> Pod:
    def check(pod: Pod) -> tuple[bool, Any]:
        running = pod.status is not None and pod.status.phase == "Running"
        return running, pod if running else _describe(pod)

    pod: Pod = _watch_pod(
        kube, name, namespace, check, what=f"pod {namespace}/{name} to run", timeout=timeout
    )
    return pod


def wait_pod_succeeded(kube: Kube, name: str, namespace: str, timeout: float = 90) -> Pod:
    """Wait until the pod has run to completion; a failed pod fails the wait at once,
    with its containers' termination messages."""

    def check(pod: Pod) -> tuple[bool, Any]:
        phase = pod.status.phase if pod.status else None
        if phase == "Failed":
            raise AssertionError(f"pod {namespace}/{name} failed: {_terminations(pod)}")
        return phase == "Succeeded", pod if phase == "Succeeded" else _describe(pod)

    pod: Pod = _watch_pod(
        kube, name, namespace, check, what=f"pod {namespace}/{name} to succeed", timeout=timeout
    )
    return pod


def termination_message(pod: Pod, container: str = "app") -> str:
    """What a finished container wrote to its termination log."""
    for status in (pod.status.containerStatuses or []) if pod.status else []:
        if status.name == container and status.state and status.state.terminated:
            return status.state.terminated.message or ""
    raise AssertionError(f"container {container} of pod {pod.metadata.name} has not finished")  # type: ignore[union-attr]


def _terminations(pod: Pod) -> str:
    finished = []
    for status in (pod.status.containerStatuses or []) if pod.status else []:
        terminated = status.state.terminated if status.state else None
        if terminated is not None:
            finished.append(
                f"{status.name}: exit {terminated.exitCode} {terminated.reason}:"
                f" {(terminated.message or '').strip()}"
            )
    return "; ".join(finished) or _describe(pod)


def wait_pod_unschedulable(
    kube: Kube, name: str, namespace: str, *, message: str | None = None, timeout: float = 60
) -> str:
    """Wait for PodScheduled=False with reason Unschedulable (and ``message`` in the
    scheduler's message, if given); return the scheduler's message."""

    def check(pod: Pod) -> tuple[bool, str]:
        condition = _conditions(pod).get("PodScheduled")
        if pod.spec and pod.spec.nodeName:
            return False, f"scheduled to {pod.spec.nodeName}"
        if condition is None or condition.status != "False" or condition.reason != "Unschedulable":
            return False, _describe(pod)
        text = condition.message or ""
        return message is None or message in text, text

    what = f"pod {namespace}/{name} to be unschedulable" + (
        f" with a message containing {message!r}" if message else ""
    )
    text: str = _watch_pod(kube, name, namespace, check, what=what, timeout=timeout)
    return text


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


def describe_claim(pvc: PersistentVolumeClaim) -> str:
    """Phase, requested and actual size and the resize state of a claim, in one line."""
    status = pvc.status
    requested = pvc.spec.resources.requests if pvc.spec and pvc.spec.resources else None
    parts = [
        f"phase={status.phase if status else None}",
        f"requested={storage_of(requested)}",
        f"capacity={storage_of(status.capacity if status else None)}",
    ]
    if status and status.allocatedResourceStatuses:
        parts.append(f"resize={dict(status.allocatedResourceStatuses)}")
    parts += [f"{kind}({message})" for kind, message in claim_conditions(pvc).items()]
    return ", ".join(parts)


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


def _of_volume(attachments: Iterable[VolumeAttachment], pv_name: str) -> list[VolumeAttachment]:
    # spec.source is not a field selector of VolumeAttachments: filter here.
    return [va for va in attachments if va.spec.source.persistentVolumeName == pv_name]


def volume_attachments(kube: Client, pv_name: str) -> list[VolumeAttachment]:
    """The VolumeAttachments of one PersistentVolume."""
    return _of_volume(kube.list(VolumeAttachment), pv_name)


def _describe_attachments(attachments: list[VolumeAttachment]) -> str:
    if not attachments:
        return "no VolumeAttachment"
    return "; ".join(
        f"{va.metadata.name if va.metadata else '?'} node={va.spec.nodeName}"
        f" attached={va.status.attached if va.status else None}"
        f" error={va.status.attachError.message if va.status and va.status.attachError else None}"
        for va in attachments
    )


def wait_volume_attachment(
    kube: Kube, pv_name: str, *, attached: bool | None = None, timeout: float = 60
) -> VolumeAttachment:
    """Wait for a VolumeAttachment of the PV (with ``status.attached`` equal to
    ``attached``, if given); return it."""

    def check(everyone: dict[str, VolumeAttachment]) -> tuple[bool, Any]:
        found = _of_volume(everyone.values(), pv_name)
        for va in found:
            is_attached = bool(va.status and va.status.attached)
            if attached is None or is_attached == attached:
                return True, va
        return False, _describe_attachments(found)

    what = f"a VolumeAttachment of {pv_name}" + (
        f" with attached={attached}" if attached is not None else ""
    )
    va: VolumeAttachment = watch_until(
        kube, VolumeAttachment, what=what, check=check, timeout=timeout
    )
    return va


def wait_volume_attachments_gone(kube: Kube, pv_name: str, timeout: float = 90) -> None:
    def check(everyone: dict[str, VolumeAttachment]) -> tuple[bool, str]:
        found = _of_volume(everyone.values(), pv_name)
        return not found, _describe_attachments(found)

    watch_until(
        kube,
        VolumeAttachment,
        what=f"the VolumeAttachments of {pv_name} to be deleted",
        check=check,
        timeout=timeout,
    )


@dataclass(frozen=True)
class SeenEvent:
    reason: str
    message: str
    kind: str
    name: str
    count: int

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} {self.reason}: {self.message} (x{self.count})"

    @classmethod
    def of(cls, event: Event) -> SeenEvent:
        obj = event.involvedObject
        return cls(
            reason=event.reason or "",
            message=event.message or "",
            kind=obj.kind or "",
            name=obj.name or "",
            count=event.count or 1,
        )

    def matches(
        self, reason: str | None = None, contains: str | None = None, involved: str | None = None
    ) -> bool:
        return (
            (reason is None or self.reason == reason)
            and (contains is None or contains in self.message)
            and (involved is None or self.name == involved)
        )


def events(
    kube: Client,
    namespace: str,
    *,
    reason: str | None = None,
    contains: str | None = None,
    involved: str | None = None,
) -> list[SeenEvent]:
    seen = (SeenEvent.of(event) for event in kube.list(Event, namespace=namespace))
    return [event for event in seen if event.matches(reason, contains, involved)]


def wait_event(
    kube: Kube,
    namespace: str,
    *,
    reason: str,
    contains: str | None = None,
    involved: str | None = None,
    timeout: float = 60,
) -> SeenEvent:
    def check(found: dict[str, Event]) -> tuple[bool, Any]:
        seen = [SeenEvent.of(event) for event in found.values()]
        matching = [event for event in seen if event.matches(reason, contains, involved)]
        if matching:
            return True, matching[0]
        recent = [str(e) for e in seen][-8:]
        return False, recent or "no events"

    what = f"a {reason} event" + (f" for {involved}" if involved else "")
    what += f" containing {contains!r}" if contains else ""
    event: SeenEvent = watch_until(
        kube, Event, namespace=namespace, what=what, check=check, timeout=timeout
    )
    return event


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


@dataclass
class AnnotationHistory:
    """Every value an annotation of one PVC takes, in order, as seen by a watch
    (None while it is absent); start() before the PVC changes, stop() after.

    The watch resumes from the last resourceVersion it saw, so no change between
    two watch requests is lost; the thread ends within ``HISTORY_SLICE`` seconds
    of stop()."""

    kube: Kube
    name: str
    namespace: str
    key: str = SELECTED_NODE
    values: list[str | None] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> AnnotationHistory:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _record(self, value: str | None) -> None:
        if not self.values or self.values[-1] != value:
            self.values.append(value)

    def _run(self) -> None:
        selection = Selection(
            PersistentVolumeClaim, self.namespace, fields={"metadata.name": self.name}
        )
        while not self._stop.is_set():
            states = follow(
                self.kube,
                selection,
                stopped=self._stop.is_set,
                on_error=self._failed,
                slice_seconds=HISTORY_SLICE,
            )
            try:
                with contextlib.closing(states):
                    for claims in states:
                        if self._stop.is_set():
                            return
                        claim = claims.get(self.name)
                        annotations = (
                            claim.metadata.annotations if claim and claim.metadata else None
                        )
                        self._record((annotations or {}).get(self.key))
            except Exception as exc:  # what follow() does not retry (403 ...): try again
                self._failed(exc)
                time.sleep(0.2)

    def _value(self, claim: PersistentVolumeClaim | None) -> str | None:
        annotations = claim.metadata.annotations if claim and claim.metadata else None
        return (annotations or {}).get(self.key)

    def _failed(self, exc: Exception) -> None:
        self._error = exc

    def wait_for_values(
        self, predicate: Callable[[list[str | None]], bool], what: str, timeout: float = 60
    ) -> list[str | None]:
        return wait_for(
            f"{self.key} of {self.namespace}/{self.name} to show {what}",
            lambda: (predicate(list(self.values)), list(self.values)),
            timeout=timeout,
            interval=0.25,
        )

    def stop(self) -> list[str | None]:
        self._stop.set()
        return list(self.values)
