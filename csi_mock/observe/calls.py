"""One record per RPC: the JSON log line (and, later, the journal entry)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from google.protobuf.message import Message

# Request fields worth seeing in a log line; large or secret fields are never copied.
KEY_FIELDS = (
    "name",
    "volume_id",
    "source_volume_id",
    "snapshot_id",
    "node_id",
    "target_path",
    "staging_target_path",
    "volume_path",
    "starting_token",
    "max_entries",
)


@dataclass
class CallRecord:
    time: float
    method: str
    service: str
    request: dict[str, Any] = field(default_factory=dict)
    code: str = "OK"
    message: str = ""
    duration_ms: float = 0.0
    fault: str | None = None
    seq: int = 0
    whole_request: dict[str, Any] | None = None
    """The request, whole, as proto3 JSON with secrets hashed (journal `requests: whole`)."""
    whole_reply: dict[str, Any] | None = None
    """The reply of a successful call, the same way; None for an error."""

    def to_json(self) -> str:
        # Not dataclasses.asdict: it deep-copies the request fields, which only get read.
        fields = {name: getattr(self, name) for name in _RECORD_FIELDS}
        # Whole messages only when the journal keeps them: today's log line otherwise.
        for name in ("whole_request", "whole_reply"):
            if fields[name] is None:
                del fields[name]
        return json.dumps(fields, separators=(",", ":"), sort_keys=True)


_RECORD_FIELDS = tuple(f.name for f in dataclass_fields(CallRecord))


def key_fields(request: Message) -> dict[str, Any]:
    """The identifying fields of a request: IDs, names, paths, sizes, topology."""
    found: dict[str, Any] = {}
    descriptor = request.DESCRIPTOR
    for name in KEY_FIELDS:
        if name in descriptor.fields_by_name:
            value = getattr(request, name)
            if value:
                found[name] = value
    if "capacity_range" in descriptor.fields_by_name and request.HasField("capacity_range"):
        capacity = request.capacity_range  # type: ignore[attr-defined]
        found["required_bytes"] = capacity.required_bytes
        if capacity.limit_bytes:
            found["limit_bytes"] = capacity.limit_bytes
    for name in ("parameters", "mutable_parameters"):
        if name in descriptor.fields_by_name:
            parameters = dict(getattr(request, name))
            if parameters:
                found[name] = parameters
    if "accessible_topology" in descriptor.fields_by_name and request.HasField(
        "accessible_topology"
    ):
        found["topology"] = dict(request.accessible_topology.segments)  # type: ignore[attr-defined]
    if "accessibility_requirements" in descriptor.fields_by_name and request.HasField(
        "accessibility_requirements"
    ):
        requirements = request.accessibility_requirements  # type: ignore[attr-defined]
        for kind in ("requisite", "preferred"):
            segments = [dict(t.segments) for t in getattr(requirements, kind)]
            if segments:
                found[kind] = segments
    return found


def request_segments(fields: dict[str, Any]) -> list[dict[str, str]]:
    """Every topology segment a request names (GetCapacity's, CreateVolume's)."""
    segments: list[dict[str, str]] = []
    if "topology" in fields:
        segments.append(fields["topology"])
    segments.extend(fields.get("requisite", []))
    segments.extend(fields.get("preferred", []))
    return segments


def split_method(full_method: str) -> tuple[str, str]:
    """'/csi.v1.Controller/CreateVolume' -> ('Controller', 'CreateVolume')."""
    service, _, method = full_method.rpartition("/")
    return service.rsplit(".", 1)[-1], method


RecordSink = Callable[[CallRecord], None]


class JsonLogSink:
    """Writes each record as one JSON line through the standard logging module."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def __call__(self, record: CallRecord) -> None:
        level = logging.INFO if record.code == "OK" else logging.WARNING
        # Encoding costs more than the rest of the record's handling: only when shown.
        if self._logger.isEnabledFor(level):
            self._logger.log(level, record.to_json())
