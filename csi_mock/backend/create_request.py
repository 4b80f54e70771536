"""CreateVolume's request: its checks, its idempotency rule and the volume it makes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from csi_mock.backend.names import check_name
from csi_mock.backend.parameters import resolve_kind, significant
from csi_mock.model.errors import AlreadyExistsIncompatible, InvalidArgument
from csi_mock.model.kind import VolumeKind
from csi_mock.model.mutable_parameters import MutableParameterRules, satisfies
from csi_mock.model.placement import Placement, validate_range
from csi_mock.model.topology import Segment, reachable_from_any
from csi_mock.model.volume import AccessType, Capability, ContentSource, Volume


@dataclass(frozen=True)
class CreateRequest:
    name: str
    capabilities: Sequence[Capability]
    required_bytes: int = 0
    limit_bytes: int = 0
    parameters: Mapping[str, str] | None = None
    requisite: Sequence[Segment] = ()
    preferred: Sequence[Segment] = ()
    mutable_parameters: Mapping[str, str] | None = None
    content_source: ContentSource | None = None


@dataclass(frozen=True)
class ValidCreate:
    """A CreateRequest that passed its own checks, with what they worked out."""

    request: CreateRequest
    access_type: AccessType
    parameters: dict[str, str]
    kind: VolumeKind
    mutable: dict[str, str]

    def check_compatible(self, existing: Volume) -> None:
        """CreateVolume is idempotent: a volume of the same name must match the request,
        else AlreadyExistsIncompatible names every difference."""
        request = self.request
        problems = []
        if request.required_bytes and existing.size < request.required_bytes:
            problems.append(f"size {existing.size} < required_bytes {request.required_bytes}")
        if request.limit_bytes and existing.size > request.limit_bytes:
            problems.append(f"size {existing.size} > limit_bytes {request.limit_bytes}")
        if self.access_type is not existing.access_type:
            problems.append(
                f"access type {existing.access_type.value}, not {self.access_type.value}"
            )
        if significant(self.parameters) != significant(existing.parameters):
            problems.append(f"parameters {dict(significant(existing.parameters))}")
        if request.requisite and not reachable_from_any(existing.segment, request.requisite):
            problems.append(f"it is not reachable from the requisite topology {existing.segment}")
        if not satisfies(existing.mutable_parameters, request.mutable_parameters or {}):
            problems.append(f"mutable_parameters {dict(existing.mutable_parameters)}")
        if request.content_source != existing.content_source:
            problems.append(f"content source {existing.content_source or 'none'}")
        if problems:
            raise AlreadyExistsIncompatible(
                f"volume {existing.name!r} already exists with " + "; ".join(problems)
            )

    def new_volume(self, placement: Placement) -> Volume:
        """The volume this request creates where `placement` puts it (not stored yet)."""
        return Volume(
            id=new_volume_id(),
            name=self.request.name,
            pool=placement.pool.name,
            kind=self.kind.name,
            size=placement.size,
            allocation=placement.allocation,
            offset=placement.offset,
            access_type=self.access_type,
            segment=dict(placement.pool.segment),
            parameters=self.parameters,
            capabilities=tuple(self.request.capabilities),
            created_at=time.time(),
            mutable_parameters=self.mutable,
            content_source=self.request.content_source,
        )


def validate_create(
    request: CreateRequest,
    kinds: Mapping[str, VolumeKind],
    default_kind: str,
    mutable_rules: MutableParameterRules | None,
) -> ValidCreate:
    """CreateVolume's checks of the request itself: its name, access type, parameters,
    kind, capacity range and mutable parameters."""
    if not request.name:
        raise InvalidArgument("name is required")
    check_name(request.name)
    if not request.capabilities:
        raise InvalidArgument("volume_capabilities is required")
    access_type = _single_access_type(request.capabilities)
    parameters = dict(request.parameters or {})
    kind = resolve_kind(parameters, kinds, default_kind)
    validate_range(request.required_bytes, request.limit_bytes)
    mutable = dict(request.mutable_parameters or {})
    if mutable:
        if mutable_rules is None:
            raise InvalidArgument(
                "mutable_parameters is not supported (no MODIFY_VOLUME capability)"
            )
        mutable_rules.check(mutable)
    return ValidCreate(request, access_type, parameters, kind, mutable)


def new_volume_id() -> str:
    return "vol-" + uuid.uuid4().hex


def _single_access_type(capabilities: Sequence[Capability]) -> AccessType:
    types = {c.access_type for c in capabilities}
    if len(types) > 1:
        raise InvalidArgument("volume_capabilities mixes block and mount access types")
    return types.pop()
