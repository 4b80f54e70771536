"""Protobuf <-> domain conversions shared by the servicers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from csi_mock.backend.health import HealthEntry
from csi_mock.model.errors import InvalidArgument
from csi_mock.model.volume import AccessMode, AccessType, Capability
from csi_mock.proto import csi_pb2 as pb


def capability_from_pb(message: pb.VolumeCapability, field: str) -> Capability:
    which = message.WhichOneof("access_type")
    if which is None:
        raise InvalidArgument(f"{field}: access_type (block or mount) is required")
    mode = message.access_mode.mode
    if mode == pb.VolumeCapability.AccessMode.UNKNOWN:
        raise InvalidArgument(f"{field}: access_mode is required")
    try:
        access_mode = AccessMode(mode)
    except ValueError:
        raise InvalidArgument(f"{field}: access_mode {mode} is not a known mode") from None
    if which == "block":
        return Capability(AccessType.BLOCK, access_mode)
    return Capability(
        AccessType.MOUNT,
        access_mode,
        fs_type=message.mount.fs_type,
        mount_flags=tuple(message.mount.mount_flags),
    )


def capabilities_from_pb(
    messages: Iterable[pb.VolumeCapability], field: str = "volume_capabilities"
) -> list[Capability]:
    return [capability_from_pb(m, f"{field}[{i}]") for i, m in enumerate(messages)]


def optional_capability(
    request: pb.ControllerPublishVolumeRequest
    | pb.NodeStageVolumeRequest
    | pb.NodePublishVolumeRequest,
) -> Capability | None:
    """The request's volume_capability, or None when absent (the backend refuses that)."""
    if not request.HasField("volume_capability"):
        return None
    return capability_from_pb(request.volume_capability, "volume_capability")


def capability_to_pb(capability: Capability) -> pb.VolumeCapability:
    message = pb.VolumeCapability(
        access_mode=pb.VolumeCapability.AccessMode(mode=int(capability.access_mode))  # type: ignore[arg-type]
    )
    if capability.access_type is AccessType.BLOCK:
        message.block.SetInParent()
    else:
        message.mount.fs_type = capability.fs_type
        message.mount.mount_flags.extend(capability.mount_flags)
    return message


def topology_to_pb(segment: Mapping[str, str]) -> pb.Topology:
    return pb.Topology(segments=dict(segment))


def volume_health_to_pb(volume_id: str, entries: Iterable[HealthEntry]) -> pb.VolumeHealth:
    return pb.VolumeHealth(
        volume_id=volume_id,
        health_statuses=[
            pb.VolumeHealth.VolumeHealthEntry(
                status=pb.VolumeHealthErrorType.Value(entry.status),
                reason=entry.reason,
                message=entry.message,
            )
            for entry in entries
        ],
    )
