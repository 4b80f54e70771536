"""Events, journal records and log lines as the sections show them: one line each,
oldest first, routine calls that succeeded left out."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from csi_harness._internal.kube.describe import get_path, one_line
from csi_mock.observe.calls import CallRecord

# Calls a healthy cluster makes all the time (capacity polling, probes, volume stats):
# a section shows them only when they failed. The journal files keep everything.
ROUTINE_METHODS = frozenset(
    {
        "Probe",
        "GetPluginInfo",
        "GetPluginCapabilities",
        "ControllerGetCapabilities",
        "NodeGetCapabilities",
        "GetCapacity",
        "NodeGetVolumeStats",
    }
)


# Logs in the order worth reading: the driver and its sidecars, the control plane
# that acts on volumes, the nodes, then the rest.
LOG_ORDER = (
    "csi-mock-controller",
    "csi-mock-node-",
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "snapshot-controller",
    "kube-scheduler",
    "kube-controller-manager",
    "kubelet-",
    "node-simulator",
    "kube-apiserver",
    "containerd-",
    "etcd",
)


def clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_OLDEST = datetime.min.replace(tzinfo=UTC)


def event_time(event: Mapping[str, Any]) -> datetime:
    """When the event last happened: lastTimestamp, or the events.k8s.io fields
    (series, eventTime), or when the object was made."""
    for value in (
        get_path(event, "lastTimestamp"),
        get_path(event, "series", "lastObservedTime"),
        get_path(event, "eventTime"),
        get_path(event, "firstTimestamp"),
        get_path(event, "metadata", "creationTimestamp"),
    ):
        parsed = _timestamp(value)
        if parsed is not None:
            return parsed
    return _OLDEST


def format_event(event: Mapping[str, Any]) -> str:
    """``12:00:03 Warning ProvisioningFailed PersistentVolumeClaim/data x3 [csi-provisioner]:
    message`` (times UTC)."""
    when = event_time(event)
    stamp = when.strftime("%H:%M:%S") if when is not _OLDEST else "--:--:--"
    involved = get_path(event, "involvedObject") or {}
    subject = f"{involved.get('kind', '?')}/{involved.get('name', '?')}"
    count = get_path(event, "count") or get_path(event, "series", "count")
    times = f" x{count}" if isinstance(count, int) and count > 1 else ""
    source = (
        get_path(event, "reportingComponent")
        or get_path(event, "source", "component")
        or get_path(event, "reportingController")
    )
    origin = f" [{source}]" if source else ""
    kind = get_path(event, "type") or "?"
    reason = get_path(event, "reason") or "?"
    message = one_line(get_path(event, "message") or "")
    return f"{stamp} {kind} {reason} {subject}{times}{origin}: {message}"


def sorted_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(events, key=event_time)


def _request_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def format_record(record: CallRecord, instance: str | None = None) -> str:
    """One journal record on one line, what happened before what it was about:
    ``12:00:03.123 [controller] CreateVolume RESOURCE_EXHAUSTED 0.3ms "no room"
    [fault rule-1] name=pvc-1 required_bytes=1073741824`` (times UTC)."""
    when = datetime.fromtimestamp(record.time, UTC)
    parts = [when.strftime("%H:%M:%S.") + f"{when.microsecond // 1000:03d}"]
    if instance is not None:
        parts.append(f"[{instance}]")
    parts += [record.method, record.code, f"{record.duration_ms:.1f}ms"]
    if record.message:
        parts.append(f'"{one_line(record.message)}"')
    if record.fault:
        parts.append(f"[fault {record.fault}]")
    parts += [f"{key}={_request_value(value)}" for key, value in record.request.items()]
    return " ".join(parts)


def is_routine(record: CallRecord) -> bool:
    return record.method in ROUTINE_METHODS and record.code == "OK"


def is_routine_log_line(line: str) -> bool:
    """A csi-mock call record (a JSON log line) of a routine call that succeeded."""
    if not line.startswith("{"):
        return False
    try:
        data = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get("method") in ROUTINE_METHODS
        and data.get("code") == "OK"
    )


def log_rank(component: str) -> tuple[int, str]:
    for rank, prefix in enumerate(LOG_ORDER):
        if component.startswith(prefix):
            return rank, component
    return len(LOG_ORDER), component


def last(lines: Sequence[str], limit: int) -> tuple[list[str], str]:
    """The last ``limit`` lines, and how many they are of all: "3" or "last 30 of 41"."""
    if len(lines) <= limit:
        return list(lines), f"{len(lines)}"
    return list(lines[-limit:]), f"last {limit} of {len(lines)}"
