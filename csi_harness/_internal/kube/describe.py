"""One line per Kubernetes object, for failure messages and diagnostics.

Every ``describe_*`` takes the object as plain data (a dict, as the API serves it)
and never raises for a missing field: what gets described is often an object in a
state nobody expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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


def describe_pod(pod: Mapping[str, Any]) -> str:
    parts = [object_name(pod), str(get_path(pod, "status", "phase") or "?")]
    parts.append(f"node={get_path(pod, 'spec', 'nodeName') or '-'}")
    for condition in get_path(pod, "status", "conditions") or []:
        if condition.get("status") != "True":
            detail = ": ".join(
                str(condition[key]) for key in ("reason", "message") if condition.get(key)
            )
            parts.append(f"{condition.get('type')}={condition.get('status')}({one_line(detail)})")
    for container in get_path(pod, "status", "containerStatuses") or []:
        waiting = get_path(container, "state", "waiting")
        if waiting:
            parts.append(f"{container.get('name')} waiting: {waiting.get('reason')}")
    return " ".join(parts)


def describe_claim(claim: Mapping[str, Any]) -> str:
    annotations = get_path(claim, "metadata", "annotations") or {}
    parts = [
        object_name(claim),
        str(get_path(claim, "status", "phase") or "?"),
        f"class={get_path(claim, 'spec', 'storageClassName') or '-'}",
        f"request={get_path(claim, 'spec', 'resources', 'requests', 'storage') or '-'}",
        f"volume={get_path(claim, 'spec', 'volumeName') or '-'}",
    ]
    selected = annotations.get("volume.kubernetes.io/selected-node")
    if selected:
        parts.append(f"selected-node={selected}")
    return " ".join(parts)


def describe_volume(pv: Mapping[str, Any]) -> str:
    claim = get_path(pv, "spec", "claimRef") or {}
    parts = [
        object_name(pv),
        str(get_path(pv, "status", "phase") or "?"),
        str(get_path(pv, "spec", "capacity", "storage") or "?"),
        f"claim={claim.get('namespace', '-')}/{claim.get('name', '-')}",
        f"class={get_path(pv, 'spec', 'storageClassName') or '-'}",
        f"handle={get_path(pv, 'spec', 'csi', 'volumeHandle') or '-'}",
    ]
    terms = get_path(pv, "spec", "nodeAffinity", "required", "nodeSelectorTerms") or []
    expressions = [
        f"{e.get('key')} {e.get('operator')} {','.join(e.get('values') or [])}"
        for term in terms
        for e in term.get("matchExpressions") or []
    ]
    if expressions:
        parts.append(f"affinity=[{'; '.join(expressions)}]")
    return " ".join(parts)


def describe_attachment(attachment: Mapping[str, Any]) -> str:
    parts = [
        object_name(attachment),
        f"node={get_path(attachment, 'spec', 'nodeName') or '-'}",
        f"pv={get_path(attachment, 'spec', 'source', 'persistentVolumeName') or '-'}",
        f"attached={get_path(attachment, 'status', 'attached')}",
    ]
    for key in ("attachError", "detachError"):
        message = get_path(attachment, "status", key, "message")
        if message:
            parts.append(f"{key}={one_line(message)}")
    return " ".join(parts)


def describe_capacity(capacity: Mapping[str, Any]) -> str:
    labels = get_path(capacity, "nodeTopology", "matchLabels") or {}
    segment = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"
    return " ".join(
        [
            object_name(capacity),
            f"class={get_path(capacity, 'storageClassName') or '-'}",
            f"segment={segment}",
            f"capacity={get_path(capacity, 'capacity') or '-'}",
            f"max={get_path(capacity, 'maximumVolumeSize') or '-'}",
        ]
    )


def describe_csinode(csinode: Mapping[str, Any]) -> str:
    drivers = []
    for entry in get_path(csinode, "spec", "drivers") or []:
        count = get_path(entry, "allocatable", "count")
        keys = ",".join(entry.get("topologyKeys") or [])
        drivers.append(
            f"{entry.get('name')}(nodeID={entry.get('nodeID')}, count={count}, keys={keys})"
        )
    return f"{object_name(csinode)} drivers: {'; '.join(drivers) or 'none'}"


def describe_csidriver(driver: Mapping[str, Any]) -> str:
    spec = get_path(driver, "spec") or {}
    fields = ("attachRequired", "storageCapacity", "podInfoOnMount", "volumeLifecycleModes")
    return " ".join([object_name(driver), *(f"{key}={spec.get(key)}" for key in fields)])
