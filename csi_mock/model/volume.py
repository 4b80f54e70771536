"""Volumes and their capabilities, as the driver records them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class AccessType(enum.Enum):
    MOUNT = "mount"
    BLOCK = "block"


class AccessMode(enum.IntEnum):
    """CSI VolumeCapability.AccessMode.Mode values (numbers from the spec)."""

    UNKNOWN = 0
    SINGLE_NODE_WRITER = 1
    SINGLE_NODE_READER_ONLY = 2
    MULTI_NODE_READER_ONLY = 3
    MULTI_NODE_SINGLE_WRITER = 4
    MULTI_NODE_MULTI_WRITER = 5
    SINGLE_NODE_SINGLE_WRITER = 6
    SINGLE_NODE_MULTI_WRITER = 7

    @property
    def single_node(self) -> bool:
        return self in _SINGLE_NODE

    @property
    def read_only(self) -> bool:
        return self in (AccessMode.SINGLE_NODE_READER_ONLY, AccessMode.MULTI_NODE_READER_ONLY)


_SINGLE_NODE = frozenset(
    {
        AccessMode.SINGLE_NODE_WRITER,
        AccessMode.SINGLE_NODE_READER_ONLY,
        AccessMode.SINGLE_NODE_SINGLE_WRITER,
        AccessMode.SINGLE_NODE_MULTI_WRITER,
    }
)


@dataclass(frozen=True)
class Capability:
    """One requested way of using a volume."""

    access_type: AccessType
    access_mode: AccessMode
    fs_type: str = ""
    mount_flags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "access_type": self.access_type.value,
            "access_mode": self.access_mode.name,
            "fs_type": self.fs_type,
            "mount_flags": list(self.mount_flags),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Capability:
        flags = data.get("mount_flags", [])
        return cls(
            access_type=AccessType(str(data["access_type"])),
            access_mode=AccessMode[str(data["access_mode"])],
            fs_type=str(data.get("fs_type", "")),
            mount_flags=tuple(str(f) for f in flags) if isinstance(flags, list) else (),
        )


class SourceType(enum.Enum):
    """What a new volume's data comes from (CSI's VolumeContentSource)."""

    SNAPSHOT = "snapshot"
    VOLUME = "volume"


@dataclass(frozen=True)
class ContentSource:
    """A CreateVolume's volume_content_source: a snapshot to restore or a volume to clone."""

    type: SourceType
    id: str

    def __str__(self) -> str:
        return f"{self.type.value} {self.id}"

    def to_json(self) -> dict[str, str]:
        return {self.type.value: self.id}

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> ContentSource | None:
        for type_, id_ in data.items():
            return cls(SourceType(type_), id_)
        return None


@dataclass(frozen=True)
class Volume:
    """A provisioned volume: where it lives and what it was created for."""

    id: str
    name: str
    pool: str
    kind: str
    size: int
    allocation: int
    offset: int
    access_type: AccessType
    segment: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)
    capabilities: tuple[Capability, ...] = ()
    created_at: float = 0.0
    seq: int = 0
    """Insertion order, used as the ListVolumes pagination key."""
    mutable_parameters: Mapping[str, str] = field(default_factory=dict)
    """CreateVolume's mutable_parameters with every ControllerModifyVolume merged in."""
    content_source: ContentSource | None = None
    """The snapshot or volume whose data it was created with; None: created empty."""
