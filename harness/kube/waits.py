"""Waiting for Kubernetes to do something, and failing with what it did instead.

Every function takes a timeout; a timeout raises ``WaitTimeout`` naming what was
expected and the last thing seen (the pod's conditions, the events, the objects).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event, PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity, VolumeAttachment

from csi_mock.model.quantity import parse_quantity
from harness.deploy.spec import DRIVER_NAMESPACE, NODE_TOPOLOGY_KEY
from harness.local.waiting import WaitTimeout, wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"

__all__ = [
    "SELECTED_NODE",
    "AnnotationHistory",
    "WaitTimeout",
    "capacities",
    "events",
    "pv_topology",
    "volume_attachments",
    "wait_bound_volume",
    "wait_capacity",
    "wait_event",
    "wait_for",
    "wait_pod_running",
    "wait_pod_scheduled",
    "wait_pod_unschedulable",
    "wait_volume_attachment",
    "wait_volume_attachments_gone",
]


def _conditions(pod: Pod) -> dict[str, Any]:
    return {c.type: c for c in (pod.status.conditions or [])} if pod.status else {}


def _describe(pod: Pod) -> str:
    parts = [f"phase={pod.status.phase if pod.status else None}"]
    parts += [f"{c.type}={c.status}({c.reason}: {c.message})" for c in _conditions(pod).values()]
    if pod.spec and pod.spec.nodeName:
        parts.append(f"node={pod.spec.nodeName}")
    return ", ".join(parts)


def wait_pod_scheduled(kube: Client, name: str, namespace: str, timeout: float = 60) -> str:
    """Wait until the pod is bound to a node; return the node's name."""

    def probe() -> tuple[bool, str]:
        pod = kube.get(Pod, name, namespace=namespace)
        node = pod.spec.nodeName if pod.spec else None
        return bool(node), node or _describe(pod)

    return wait_for(
        f"pod {namespace}/{name} to be scheduled", probe, timeout=timeout, interval=0.25
    )


def wait_pod_running(kube: Client, name: str, namespace: str, timeout: float = 90) -> Pod:
    def probe() -> tuple[bool, Any]:
        pod = kube.get(Pod, name, namespace=namespace)
        running = pod.status is not None and pod.status.phase == "Running"
        return running, pod if running else _describe(pod)

    pod: Pod = wait_for(f"pod {namespace}/{name} to run", probe, timeout=timeout, interval=0.25)
    return pod


def wait_pod_unschedulable(
    kube: Client, name: str, namespace: str, *, message: str | None = None, timeout: float = 60
) -> str:
    """Wait for PodScheduled=False with reason Unschedulable (and ``message`` in the
    scheduler's message, if given); return the scheduler's message."""

    def probe() -> tuple[bool, str]:
        pod = kube.get(Pod, name, namespace=namespace)
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
    return wait_for(what, probe, timeout=timeout, interval=0.25)


def wait_bound_volume(
    kube: Client, claim: str, namespace: str, timeout: float = 60
) -> PersistentVolume:
    """Wait until the claim is bound; return its PersistentVolume."""

    def probe() -> tuple[bool, Any]:
        pvc = kube.get(PersistentVolumeClaim, claim, namespace=namespace)
        volume = pvc.spec.volumeName if pvc.spec else None
        if not volume:
            return False, f"claim {claim} is {pvc.status.phase if pvc.status else None}"
        return True, kube.get(PersistentVolume, volume)

    pv: PersistentVolume = wait_for(
        f"claim {namespace}/{claim} to be bound", probe, timeout=timeout, interval=0.25
    )
    return pv


def pv_topology(pv: PersistentVolume) -> dict[str, set[str]]:
    """Topology key -> values of the PV's required node affinity (every term)."""
    affinity = pv.spec.nodeAffinity if pv.spec else None
    terms = affinity.required.nodeSelectorTerms if affinity and affinity.required else []
    topology: dict[str, set[str]] = {}
    for term in terms:
        for expression in term.matchExpressions or []:
            topology.setdefault(expression.key, set()).update(expression.values or [])
    return topology


def volume_attachments(kube: Client, pv_name: str) -> list[VolumeAttachment]:
    """The VolumeAttachments of one PersistentVolume."""
    return [
        va for va in kube.list(VolumeAttachment) if va.spec.source.persistentVolumeName == pv_name
    ]


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
    kube: Client, pv_name: str, *, attached: bool | None = None, timeout: float = 60
) -> VolumeAttachment:
    """Wait for a VolumeAttachment of the PV (with ``status.attached`` equal to
    ``attached``, if given); return it."""

    def probe() -> tuple[bool, Any]:
        found = volume_attachments(kube, pv_name)
        for va in found:
            is_attached = bool(va.status and va.status.attached)
            if attached is None or is_attached == attached:
                return True, va
        return False, _describe_attachments(found)

    what = f"a VolumeAttachment of {pv_name}" + (
        f" with attached={attached}" if attached is not None else ""
    )
    va: VolumeAttachment = wait_for(what, probe, timeout=timeout, interval=0.25)
    return va


def wait_volume_attachments_gone(kube: Client, pv_name: str, timeout: float = 90) -> None:
    def probe() -> tuple[bool, str]:
        found = volume_attachments(kube, pv_name)
        return not found, _describe_attachments(found)

    wait_for(
        f"the VolumeAttachments of {pv_name} to be deleted", probe, timeout=timeout, interval=0.5
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


def events(
    kube: Client,
    namespace: str,
    *,
    reason: str | None = None,
    contains: str | None = None,
    involved: str | None = None,
) -> list[SeenEvent]:
    found = []
    for event in kube.list(Event, namespace=namespace):
        obj = event.involvedObject
        seen = SeenEvent(
            reason=event.reason or "",
            message=event.message or "",
            kind=obj.kind or "",
            name=obj.name or "",
            count=event.count or 1,
        )
        if reason is not None and seen.reason != reason:
            continue
        if contains is not None and contains not in seen.message:
            continue
        if involved is not None and seen.name != involved:
            continue
        found.append(seen)
    return found


def wait_event(
    kube: Client,
    namespace: str,
    *,
    reason: str,
    contains: str | None = None,
    involved: str | None = None,
    timeout: float = 60,
) -> SeenEvent:
    def probe() -> tuple[bool, Any]:
        matching = events(kube, namespace, reason=reason, contains=contains, involved=involved)
        if matching:
            return True, matching[0]
        recent = [str(e) for e in events(kube, namespace)][-8:]
        return False, recent or "no events"

    what = f"a {reason} event" + (f" for {involved}" if involved else "")
    what += f" containing {contains!r}" if contains else ""
    seen: SeenEvent = wait_for(what, probe, timeout=timeout, interval=0.5)
    return seen


def capacities(kube: Client) -> dict[tuple[str, str], tuple[int, int | None]]:
    """(node, storage class) -> (capacity, maximumVolumeSize) of every published
    CSIStorageCapacity whose topology is a node segment."""
    seen: dict[tuple[str, str], tuple[int, int | None]] = {}
    for obj in kube.list(CSIStorageCapacity, namespace=DRIVER_NAMESPACE):
        labels = (obj.nodeTopology.matchLabels or {}) if obj.nodeTopology else {}
        node = labels.get(NODE_TOPOLOGY_KEY)
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


def wait_capacity(
    kube: Client,
    expected: dict[tuple[str, str], int],
    *,
    maximum: dict[tuple[str, str], int] | None = None,
    timeout: float = 30,
) -> None:
    """Wait until the published capacity (and maximumVolumeSize) of each given
    (node, storage class) equals the expected bytes."""

    def probe() -> tuple[bool, dict[tuple[str, str], tuple[int, int | None]]]:
        seen = capacities(kube)
        ok = all(seen.get(key, (None,))[0] == value for key, value in expected.items())
        if maximum is not None:
            ok = ok and all(seen.get(key, (0, None))[1] == v for key, v in maximum.items())
        return ok, {key: seen.get(key, (-1, None)) for key in expected}

    wait_for(
        f"published capacity {expected} (maximum {maximum})", probe, timeout=timeout, interval=0.5
    )


@dataclass
class AnnotationHistory:
    """Every value an annotation of one PVC takes, in order, as seen by a watch
    (None while it is absent); start() before the PVC changes, stop() after."""

    kube: Client
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
        while not self._stop.is_set():
            try:
                for _, obj in self.kube.watch(
                    PersistentVolumeClaim,
                    namespace=self.namespace,
                    fields={"metadata.name": self.name},
                ):
                    annotations = (obj.metadata.annotations or {}) if obj.metadata else {}
                    self._record(annotations.get(self.key))
                    if self._stop.is_set():
                        return
            except ApiError as exc:
                self._error = exc
                time.sleep(0.2)
            except Exception as exc:  # the watch ends on timeouts; reconnect
                self._error = exc
                time.sleep(0.2)

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
