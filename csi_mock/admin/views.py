"""The JSON resources of the admin API.

One typed shape per resource: the server builds it from the driver's state (`of`), the
client parses it back (`from_json`), and `to_json` is exactly what travels, so the two
sides cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool
from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import Volume
from csi_mock.observe.calls import CallRecord

if TYPE_CHECKING:  # the client side needs no gRPC
    from csi_mock.services.registration import KubeletRegistration

_T = TypeVar("_T")

TOKEN_HEADER = "X-CSI-Mock-Token"
"""Carries the TCP token where `Authorization: Bearer` cannot: behind the Kubernetes API
server's pod proxy, which consumes the Authorization header for its own authentication."""


def _known(cls: type[_T], data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of `cls` (a newer server may send more)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return {key: value for key, value in data.items() if key in names}


@dataclass(frozen=True)
class RegistrationView:
    """Registration with the kubelet's plugin watcher."""

    socket: str
    registered: bool | None = None
    """The kubelet's NotifyRegistrationStatus; None until it has called."""
    error: str | None = None
    """Why the kubelet did not register the driver."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegistrationView:
        return cls(**_known(cls, data))

    @classmethod
    def of(cls, registration: KubeletRegistration) -> RegistrationView:
        return cls(
            socket=str(registration.socket),
            registered=registration.registered,
            error=registration.error,
        )


@dataclass(frozen=True)
class Health:
    """GET /healthz."""

    ready: bool
    failure: str | None = None
    registration: RegistrationView | None = None
    """None when the driver does not register with the kubelet."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        values = _known(cls, data)
        if values.get("registration") is not None:
            registration = _known(RegistrationView, values["registration"])
            values["registration"] = RegistrationView(**registration)
        return cls(**values)


@dataclass(frozen=True)
class ErrorView:
    code: str
    message: str = "injected fault"


@dataclass(frozen=True)
class RescueView:
    code: str | None = None
    """None: any error."""
    reply: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class FaultRuleView:
    """A fault rule as the API shows it: its spec (defaults filled in) and counters.

    The spec's fields are those `csi_mock.fault_rules.FaultRuleSpec` declares, typed
    again here for the client's callers; tests/control/test_faults.py holds them equal.
    """

    id: str
    method: str
    matched: int = 0
    fired: int = 0
    error: ErrorView | None = None
    delay: float = 0.0
    hang: bool = False
    override: dict[str, Any] | None = None
    rescue: RescueView | None = None
    volume: str | None = None
    node: str | None = None
    parameters: dict[str, str] | None = None
    topology: dict[str, str] | None = None
    where: dict[str, str | int | float | bool] | None = None
    times: int | None = None
    skip: int = 0
    probability: float = 1.0
    seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FaultRuleView:
        """Parse FaultRule.describe() output (which leaves default fields out)."""
        values = _known(cls, data)
        if values.get("error") is not None:
            values["error"] = ErrorView(**values["error"])
        if values.get("rescue") is not None:
            values["rescue"] = RescueView(**values["rescue"])
        return cls(**values)

    @property
    def action(self) -> str:
        """The rule's action in words, e.g. 'error RESOURCE_EXHAUSTED' or 'delay 0.5s'."""
        parts = []
        if self.delay:
            parts.append(f"delay {self.delay:g}s")
        if self.hang:
            parts.append("hang")
        if self.error is not None:
            parts.append(f"error {self.error.code}")
        if self.rescue is not None:
            parts.append(f"rescue {self.rescue.code or 'any error'}")
        if self.override:
            parts.append("override " + ",".join(f"{k}={v}" for k, v in self.override.items()))
        return " + ".join(parts)


@dataclass(frozen=True)
class PoolView:
    """A pool's live accounting (never the frozen GetCapacity snapshot)."""

    name: str
    segment: dict[str, str]
    kinds: list[str]
    allocation: str
    total: int
    used: int
    external: int
    free: int
    largest_free_extent: int
    max_volume_size: dict[str, int]
    """The largest volume of each served kind the pool can take now."""

    @classmethod
    def of(cls, pool: Pool, kinds: Iterable[VolumeKind]) -> PoolView:
        served = [kind for kind in kinds if pool.serves(kind)]
        return cls(
            name=pool.name,
            segment=dict(pool.segment),
            kinds=[kind.name for kind in served],
            allocation=pool.spec.allocation.value,
            total=pool.total,
            used=pool.used,
            external=pool.external,
            free=pool.free(),
            largest_free_extent=pool.largest_free_extent(),
            max_volume_size={kind.name: pool.maximum_volume_size(kind) for kind in served},
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PoolView:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Limits:
    """The live limits; None where that service does not run in this process."""

    max_volumes_per_node: int | None
    """NodeGetInfo max_volumes_per_node (0 = no limit)."""
    attach_limit: int | None
    """ControllerPublishVolume attachments per node (0 = no limit)."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limits:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class SwitchesView:
    """The live expansion and stats switches (`Switches` of the backend)."""

    controller_expansion: bool
    node_expansion: bool
    node_expansion_required: bool
    online_expansion: bool
    volume_stats: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SwitchesView:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class ConditionView:
    """A volume's condition as the VOLUME_CONDITION replies report it."""

    volume_id: str
    abnormal: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConditionView:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class HealthView:
    """The adverse conditions reported for a volume (volume_id set) or for the storage
    backend (volume_id empty); none: healthy. `set` tells whether they were set through
    the admin API or are the default (a node reports what it measures then)."""

    volume_id: str
    entries: tuple[dict[str, str], ...]
    set: bool

    def to_json(self) -> dict[str, Any]:
        return {"volume_id": self.volume_id, "entries": list(self.entries), "set": self.set}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HealthView:
        return cls(
            str(data.get("volume_id", "")),
            tuple(dict(entry) for entry in data.get("entries", ())),
            bool(data.get("set", False)),
        )


@dataclass(frozen=True)
class AttachmentView:
    node_id: str
    readonly: bool


@dataclass(frozen=True)
class VolumeView:
    """A volume from the state store, with its attachments and node-side use."""

    id: str
    name: str
    pool: str
    kind: str
    size: int
    allocation: int
    access_type: str
    segment: dict[str, str]
    parameters: dict[str, str]
    capabilities: list[dict[str, Any]]
    created_at: float
    seq: int
    attachments: list[AttachmentView] = field(default_factory=list)
    """ControllerPublishVolume attachments (nodes the volume is published to)."""
    staging_path: str | None = None
    """Where this process's node service staged it, if it did."""
    target_paths: list[str] = field(default_factory=list)
    """Where this process's node service published it."""
    mutable_parameters: dict[str, str] = field(default_factory=dict)
    """Its mutable parameters now: CreateVolume's with every ControllerModifyVolume
    merged in (a VolumeAttributesClass's parameters, in Kubernetes)."""
    content_source: dict[str, str] | None = None
    """What it was made from: {"snapshot": id} (a restore) or {"volume": id} (a clone)."""

    @classmethod
    def of(
        cls,
        volume: Volume,
        attachments: Iterable[AttachmentView],
        staging_path: str | None,
        target_paths: Sequence[str],
    ) -> VolumeView:
        return cls(
            id=volume.id,
            name=volume.name,
            pool=volume.pool,
            kind=volume.kind,
            size=volume.size,
            allocation=volume.allocation,
            access_type=volume.access_type.value,
            segment=dict(volume.segment),
            parameters=dict(volume.parameters),
            capabilities=[capability.to_json() for capability in volume.capabilities],
            created_at=volume.created_at,
            seq=volume.seq,
            attachments=list(attachments),
            staging_path=staging_path,
            target_paths=list(target_paths),
            mutable_parameters=dict(volume.mutable_parameters),
            content_source=(
                volume.content_source.to_json() if volume.content_source is not None else None
            ),
        )

    @property
    def published_nodes(self) -> list[str]:
        return [attachment.node_id for attachment in self.attachments]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VolumeView:
        values = _known(cls, data)
        values["attachments"] = [AttachmentView(**a) for a in values.get("attachments", [])]
        return cls(**values)


@dataclass(frozen=True)
class VolumePage:
    """GET /v1/volumes: one page in creation order; `next_after` continues it."""

    volumes: list[VolumeView]
    next_after: int | None
    """Pass as `after` for the next page; None on the last page."""

    def to_json(self) -> dict[str, Any]:
        return {
            "volumes": [volume.to_json() for volume in self.volumes],
            "next_after": self.next_after,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VolumePage:
        return cls(
            volumes=[VolumeView.from_json(v) for v in data.get("volumes", [])],
            next_after=data.get("next_after"),
        )


@dataclass(frozen=True)
class SnapshotView:
    """A snapshot from the state store, with what it takes from its pool."""

    id: str
    name: str
    source_volume_id: str
    pool: str
    kind: str
    size: int
    """The source volume's size when cut (CSI size_bytes)."""
    charge: int
    """Pool bytes it takes (controller.snapshots.accounting); the pool's `used` has it."""
    access_type: str
    segment: dict[str, str]
    parameters: dict[str, str]
    created_at: float
    ready_at: float
    ready_to_use: bool
    seq: int

    @classmethod
    def of(cls, snapshot: Snapshot, now: float) -> SnapshotView:
        return cls(
            id=snapshot.id,
            name=snapshot.name,
            source_volume_id=snapshot.source_volume_id,
            pool=snapshot.pool,
            kind=snapshot.kind,
            size=snapshot.size,
            charge=snapshot.charge,
            access_type=snapshot.access_type.value,
            segment=dict(snapshot.segment),
            parameters=dict(snapshot.parameters),
            created_at=snapshot.created_at,
            ready_at=snapshot.ready_at,
            ready_to_use=snapshot.ready_to_use(now),
            seq=snapshot.seq,
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SnapshotView:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class SnapshotPage:
    """GET /v1/snapshots: one page in creation order; `next_after` continues it."""

    snapshots: list[SnapshotView]
    next_after: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshots": [snapshot.to_json() for snapshot in self.snapshots],
            "next_after": self.next_after,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SnapshotPage:
        return cls(
            snapshots=[SnapshotView.from_json(s) for s in data.get("snapshots", [])],
            next_after=data.get("next_after"),
        )


def record_to_json(record: CallRecord) -> dict[str, Any]:
    """A journal record: the same fields as the driver's JSON log line."""
    return dataclasses.asdict(record)


def record_from_json(data: Mapping[str, Any]) -> CallRecord:
    return CallRecord(**_known(CallRecord, data))
