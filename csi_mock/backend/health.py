"""Volume and storage health (CSI v1.13's GET_VOLUME_HEALTH and GET_STORAGE_HEALTH).

A test sets a volume's adverse conditions, or the storage backend's, through the
admin API; NodeGetVolumeHealth, ControllerGetVolumeHealth, ControllerListVolumeHealth
and NodeGetStorageHealth report them. A node also measures what it can see itself: a
volume it staged or published whose backing data or target is gone is INACCESSIBLE.

Kept in memory by each process, as volume conditions are: a controller and a node in
separate processes each report what was set on them.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from csi_mock.model.errors import Aborted, InvalidArgument, NotFound
from csi_mock.store.interface import Store

MAX_ENTRIES = 16
"""Conditions one volume or the backend may carry (the kubelet takes at most 16 of the
backend's)."""


class VolumeHealthStatus(enum.Enum):
    """VolumeHealthErrorType, without its unknown zero value."""

    DEGRADED = "DEGRADED"
    INACCESSIBLE = "INACCESSIBLE"
    DATA_LOSS = "DATA_LOSS"


class StorageHealthStatus(enum.Enum):
    """StorageHealthErrorType, without its unknown zero value."""

    STORAGE_DEGRADED = "STORAGE_DEGRADED"
    STORAGE_UNREACHABLE = "STORAGE_UNREACHABLE"


@dataclass(frozen=True)
class HealthEntry:
    """One adverse condition: its status (a VolumeHealthStatus or StorageHealthStatus
    name), a CamelCase reason and a message for people."""

    status: str
    reason: str
    message: str = ""

    def to_json(self) -> dict[str, str]:
        return {"status": self.status, "reason": self.reason, "message": self.message}


def check_entries(entries: Sequence[HealthEntry], allowed: type[enum.Enum]) -> None:
    """Refuse what the spec forbids: an unknown status, an empty or non-CamelCase
    reason, the same (status, reason) twice, more than MAX_ENTRIES."""
    if len(entries) > MAX_ENTRIES:
        raise InvalidArgument(f"entries: {len(entries)} conditions, at most {MAX_ENTRIES}")
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        if entry.status not in allowed.__members__:
            names = ", ".join(allowed.__members__)
            raise InvalidArgument(f"{where}.status {entry.status!r} is not one of {names}")
        reason = entry.reason
        if not (reason[:1].isascii() and reason[:1].isupper() and reason.isalnum()):
            raise InvalidArgument(
                f"{where}.reason {reason!r} is not a CamelCase word (e.g. BackendUnavailable)"
            )
        if (entry.status, reason) in seen:
            raise InvalidArgument(f"{where}: ({entry.status}, {reason}) is given twice")
        seen.add((entry.status, reason))


class ReportedHealth:
    """The conditions set for each volume and for the storage backend; none: healthy."""

    def __init__(self) -> None:
        self._volumes: dict[str, tuple[HealthEntry, ...]] = {}
        self._storage: tuple[HealthEntry, ...] = ()

    def set_volume(self, volume_id: str, entries: Sequence[HealthEntry]) -> None:
        check_entries(entries, VolumeHealthStatus)
        self._volumes[volume_id] = tuple(entries)

    def clear_volume(self, volume_id: str) -> bool:
        """Forget what was set for the volume; False when nothing was."""
        return self._volumes.pop(volume_id, None) is not None

    def of_volume(self, volume_id: str) -> tuple[HealthEntry, ...] | None:
        """What was set for the volume; None when nothing was (an empty tuple means set
        healthy, which hides what a node measures)."""
        return self._volumes.get(volume_id)

    def volumes(self) -> dict[str, tuple[HealthEntry, ...]]:
        return dict(self._volumes)

    def set_storage(self, entries: Sequence[HealthEntry]) -> None:
        check_entries(entries, StorageHealthStatus)
        self._storage = tuple(entries)

    def storage(self) -> tuple[HealthEntry, ...]:
        return self._storage

    def clear_all(self) -> None:
        self._volumes.clear()
        self._storage = ()


def node_volume_health(
    health: ReportedHealth, store: Store, volume_id: str
) -> tuple[HealthEntry, ...]:
    """A volume's health as this node sees it: what was set for it, else what the node
    measures of its stagings and publications. NOT_FOUND for a volume that is neither
    staged nor published here and has nothing set."""
    if not volume_id:
        raise InvalidArgument("volume_id is required")
    set_here = health.of_volume(volume_id)
    if set_here is not None:
        return set_here
    staging = store.staging(volume_id)
    publications = store.publications_of_volume(volume_id)
    if staging is None and not publications:
        raise NotFound(f"volume {volume_id!r} is not staged or published on this node")
    # Only paths csi-mock recorded are looked at, never the request's.
    entries: list[HealthEntry] = []
    data_paths = {record.data_path for record in (staging, *publications) if record is not None}
    for data_path in sorted(data_paths):
        if not os.path.lexists(data_path):
            message = f"backing data {data_path} is missing"
            entries.append(HealthEntry("INACCESSIBLE", "BackingDataMissing", message))
            break
    for publication in publications:
        if not os.path.lexists(publication.target_path):
            message = f"target path {publication.target_path} does not exist"
            entries.append(HealthEntry("INACCESSIBLE", "TargetPathMissing", message))
            break
    return tuple(entries)


def abnormal_page(
    health: ReportedHealth, existing: Iterable[str], max_entries: int, starting_token: str
) -> tuple[list[tuple[str, tuple[HealthEntry, ...]]], str]:
    """One page of ControllerListVolumeHealth: the existing volumes with adverse
    conditions, by volume ID, and the next page's token ("" for the last page). The
    token is the last volume ID listed, so volumes created or deleted meanwhile do not
    shift the pages."""
    if max_entries < 0:
        raise InvalidArgument(f"max_entries {max_entries} must not be negative")
    known = set(existing)
    abnormal = sorted(
        (volume_id, entries)
        for volume_id, entries in health.volumes().items()
        if entries and volume_id in known
    )
    if starting_token:
        if not starting_token.startswith("after:"):
            raise Aborted(f"starting_token {starting_token!r} was not given by this driver")
        after = starting_token.removeprefix("after:")
        abnormal = [item for item in abnormal if item[0] > after]
    if not max_entries or len(abnormal) <= max_entries:
        return abnormal, ""
    page = abnormal[:max_entries]
    return page, f"after:{page[-1][0]}"
