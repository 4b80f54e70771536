"""One line per Kubernetes object, for failure messages and diagnostics.

Every ``describe_*`` takes the object as plain data (a dict, as the API serves it)
or as a lightkube model, and never raises for a missing field: what gets described
is often an object in a state nobody expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias


class _HasToDict(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


KubeObject: TypeAlias = Mapping[str, Any] | _HasToDict
"""An object as plain data, or a lightkube model of it."""

TERMINATION_MESSAGE_CHARS = 300
"""The tail of a terminated container's message that a description keeps."""


def plain(obj: KubeObject) -> Mapping[str, Any]:
    """The object as plain data: lightkube models through ``to_dict()``."""
    return obj if isinstance(obj, Mapping) else obj.to_dict()


def get_path(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, None where a key is missing or a value is no dict."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def one_line(text: str) -> str:
    """The text's non-blank lines, stripped and joined with " | "."""
    return " | ".join(part.strip() for part in str(text).splitlines() if part.strip())


def object_name(obj: Mapping[str, Any]) -> str:
    return str(get_path(obj, "metadata", "name") or "?")


def describe_container_state(state: KubeObject | None) -> str:
    """``waiting Reason (message)``, ``terminated Reason exit N: message``, ``running``,
    or ``unknown`` for a container state that is not there."""
    if state is None:
        return "unknown"
    data = plain(state)
    waiting, done = data.get("waiting"), data.get("terminated")
    if waiting is not None:
        message = f" ({one_line(waiting['message'])})" if waiting.get("message") else ""
        return f"waiting {waiting.get('reason')}{message}"
    if done is not None:
        text = str(done.get("message") or "").strip()[-TERMINATION_MESSAGE_CHARS:]
        message = f": {one_line(text)}" if text else ""
        return f"terminated {done.get('reason')} exit {done.get('exitCode')}{message}"
    return "running"


def container_statuses(pod: KubeObject) -> list[Mapping[str, Any]]:
    """The statuses of the pod's init containers, then of its containers."""
    status = get_path(plain(pod), "status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _describe_container(status: Mapping[str, Any]) -> str:
    state = "ready" if status.get("ready") else describe_container_state(status.get("state"))
    text = f"{status.get('name')}: {state}"
    if status.get("restartCount"):
        last = describe_container_state(status.get("lastState"))
        text += f", restarts={status['restartCount']} (last: {last})"
    return text


def _describe_condition(condition: Mapping[str, Any]) -> str:
    detail = ": ".join(str(condition[key]) for key in ("reason", "message") if condition.get(key))
    return f"{condition.get('type')}={condition.get('status')}({one_line(detail)})"


def describe_pod(pod: KubeObject) -> str:
    """``name on node: Phase; container: ready|state, restarts=N (last: state); ...;
    Condition=False(reason: message)``: every container (init containers first), then
    the conditions that are not True, leaving out those that only say that
    containers are not ready (ContainersNotReady)."""
    data = plain(pod)
    node = get_path(data, "spec", "nodeName")
    phase = get_path(data, "status", "phase") or "?"
    parts = [_describe_container(status) for status in container_statuses(data)]
    parts += [
        _describe_condition(condition)
        for condition in get_path(data, "status", "conditions") or []
        if condition.get("status") != "True" and condition.get("reason") != "ContainersNotReady"
    ]
    return f"{object_name(data)} on {node or '(unscheduled)'}: {phase}; " + (
        "; ".join(parts) or "no containers yet"
    )


def describe_claim(claim: KubeObject) -> str:
    """``name Phase class=C request=2Gi capacity=1Gi volume=V selected-node=N
    resize=storage:NodeResizePending Condition(message)``: the last three only when
    the claim has them."""
    data = plain(claim)
    annotations = get_path(data, "metadata", "annotations") or {}
    selected = annotations.get("volume.kubernetes.io/selected-node")
    resize = get_path(data, "status", "allocatedResourceStatuses") or {}
    parts = [
        object_name(data),
        str(get_path(data, "status", "phase") or "?"),
        f"class={get_path(data, 'spec', 'storageClassName') or '-'}",
        f"request={get_path(data, 'spec', 'resources', 'requests', 'storage') or '-'}",
        f"capacity={get_path(data, 'status', 'capacity', 'storage') or '-'}",
        f"volume={get_path(data, 'spec', 'volumeName') or '-'}",
    ]
    if selected:
        parts.append(f"selected-node={selected}")
    if resize:
        parts.append("resize=" + ",".join(f"{key}:{value}" for key, value in resize.items()))
    parts += [
        f"{condition.get('type')}({one_line(condition.get('message') or '')})"
        for condition in get_path(data, "status", "conditions") or []
    ]
    return " ".join(parts)


def describe_volume(pv: KubeObject) -> str:
    data = plain(pv)
    claim = get_path(data, "spec", "claimRef") or {}
    parts = [
        object_name(data),
        str(get_path(data, "status", "phase") or "?"),
        str(get_path(data, "spec", "capacity", "storage") or "?"),
        f"claim={claim.get('namespace', '-')}/{claim.get('name', '-')}",
        f"class={get_path(data, 'spec', 'storageClassName') or '-'}",
        f"handle={get_path(data, 'spec', 'csi', 'volumeHandle') or '-'}",
    ]
    terms = get_path(data, "spec", "nodeAffinity", "required", "nodeSelectorTerms") or []
    expressions = [
        f"{e.get('key')} {e.get('operator')} {','.join(e.get('values') or [])}"
        for term in terms
        for e in term.get("matchExpressions") or []
    ]
    if expressions:
        parts.append(f"affinity=[{'; '.join(expressions)}]")
    return " ".join(parts)


def describe_attachment(attachment: KubeObject) -> str:
    data = plain(attachment)
    parts = [
        object_name(data),
        f"node={get_path(data, 'spec', 'nodeName') or '-'}",
        f"pv={get_path(data, 'spec', 'source', 'persistentVolumeName') or '-'}",
        f"attached={get_path(data, 'status', 'attached')}",
    ]
    for key in ("attachError", "detachError"):
        message = get_path(data, "status", key, "message")
        if message:
            parts.append(f"{key}={one_line(message)}")
    return " ".join(parts)


def describe_capacity(capacity: KubeObject) -> str:
    data = plain(capacity)
    labels = get_path(data, "nodeTopology", "matchLabels") or {}
    segment = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"
    return " ".join(
        [
            object_name(data),
            f"class={get_path(data, 'storageClassName') or '-'}",
            f"segment={segment}",
            f"capacity={get_path(data, 'capacity') or '-'}",
            f"max={get_path(data, 'maximumVolumeSize') or '-'}",
        ]
    )


def describe_csinode(csinode: KubeObject) -> str:
    data = plain(csinode)
    drivers = []
    for entry in get_path(data, "spec", "drivers") or []:
        count = get_path(entry, "allocatable", "count")
        keys = ",".join(entry.get("topologyKeys") or [])
        drivers.append(
            f"{entry.get('name')}(nodeID={entry.get('nodeID')}, count={count}, keys={keys})"
        )
    return f"{object_name(data)} drivers: {'; '.join(drivers) or 'none'}"


def describe_csidriver(driver: KubeObject) -> str:
    data = plain(driver)
    spec = get_path(data, "spec") or {}
    fields = ("attachRequired", "storageCapacity", "podInfoOnMount", "volumeLifecycleModes")
    return " ".join([object_name(data), *(f"{key}={spec.get(key)}" for key in fields)])


SNAPSHOT_ANNOTATIONS = ("being-created", "being-deleted")
"""The ``snapshot.storage.kubernetes.io/volumesnapshot-*`` annotations that say where a
content's creation or deletion is (docs/findings.md, external-snapshotter)."""


def _lifecycle(data: Mapping[str, Any]) -> list[str]:
    """A snapshot object's deletion timestamp, the finalizers that hold it and its
    status error, those it has."""
    parts = []
    if get_path(data, "metadata", "deletionTimestamp"):
        parts.append(f"deleting-since={get_path(data, 'metadata', 'deletionTimestamp')}")
    finalizers = get_path(data, "metadata", "finalizers") or []
    if finalizers:
        parts.append("finalizers=" + ",".join(f.rsplit("/", 1)[-1] for f in finalizers))
    message = get_path(data, "status", "error", "message")
    if message:
        parts.append(f"error={one_line(message)}")
    return parts


def describe_snapshot(snapshot: KubeObject) -> str:
    data = plain(snapshot)
    source = get_path(data, "spec", "source") or {}
    origin = source.get("persistentVolumeClaimName") or source.get("volumeSnapshotContentName")
    return " ".join(
        [
            object_name(data),
            f"source={origin or '-'}",
            f"ready={get_path(data, 'status', 'readyToUse')}",
            f"content={get_path(data, 'status', 'boundVolumeSnapshotContentName') or '-'}",
            *_lifecycle(data),
        ]
    )


def describe_snapshot_content(content: KubeObject) -> str:
    data = plain(content)
    annotations = get_path(data, "metadata", "annotations") or {}
    marks = [
        mark
        for mark in SNAPSHOT_ANNOTATIONS
        if f"snapshot.storage.kubernetes.io/volumesnapshot-{mark}" in annotations
    ]
    return " ".join(
        [
            object_name(data),
            f"driver={get_path(data, 'spec', 'driver') or '-'}",
            f"policy={get_path(data, 'spec', 'deletionPolicy') or '-'}",
            f"ready={get_path(data, 'status', 'readyToUse')}",
            f"handle={get_path(data, 'status', 'snapshotHandle') or '-'}",
            f"annotations={','.join(marks) or '-'}",
            *_lifecycle(data),
        ]
    )
