"""Request builders and observations shared by the in-process driver tests.

Everything here talks to the driver through its gRPC stubs (or reads the host's own
/proc/self/mountinfo), never through the driver's internals.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from csi_mock.host.backing import LOST_DIR, PENDING_DIR, RETIRED_DIR
from csi_mock.proto import csi_pb2 as pb

if TYPE_CHECKING:
    from tests.driver.conftest import RunningDriver

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
NODE_KEY = "topology.csi-mock.example/node"
EPHEMERAL_KEY = "csi.storage.k8s.io/ephemeral"

Mode = pb.VolumeCapability.AccessMode
SINGLE_NODE_WRITER = Mode.SINGLE_NODE_WRITER
SINGLE_NODE_READER_ONLY = Mode.SINGLE_NODE_READER_ONLY
MULTI_NODE_READER_ONLY = Mode.MULTI_NODE_READER_ONLY
MULTI_NODE_MULTI_WRITER = Mode.MULTI_NODE_MULTI_WRITER
SINGLE_NODE_SINGLE_WRITER = Mode.SINGLE_NODE_SINGLE_WRITER
SINGLE_NODE_MULTI_WRITER = Mode.SINGLE_NODE_MULTI_WRITER


# -- capabilities and topology ---------------------------------------------------------


def mount_capability(mode: int = SINGLE_NODE_WRITER, fs_type: str = "") -> pb.VolumeCapability:
    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(fs_type=fs_type),
        access_mode=Mode(mode=mode),  # type: ignore[arg-type]
    )


def block_capability(mode: int = SINGLE_NODE_WRITER) -> pb.VolumeCapability:
    return pb.VolumeCapability(
        block=pb.VolumeCapability.BlockVolume(),
        access_mode=Mode(mode=mode),  # type: ignore[arg-type]
    )


def on_node(node: str) -> pb.Topology:
    return pb.Topology(segments={NODE_KEY: node})


# -- controller ------------------------------------------------------------------------


def create_request(
    name: str,
    required: int = GiB,
    limit: int = 0,
    *,
    capabilities: Sequence[pb.VolumeCapability] | None = None,
    parameters: Mapping[str, str] | None = None,
    requisite: Sequence[str] = (),
    preferred: Sequence[str] = (),
) -> pb.CreateVolumeRequest:
    request = pb.CreateVolumeRequest(
        name=name,
        capacity_range=pb.CapacityRange(required_bytes=required, limit_bytes=limit),
        volume_capabilities=list(capabilities or [mount_capability()]),
        parameters=dict(parameters or {}),
    )
    if requisite or preferred:
        request.accessibility_requirements.CopyFrom(
            pb.TopologyRequirement(
                requisite=[on_node(n) for n in requisite],
                preferred=[on_node(n) for n in preferred],
            )
        )
    return request


async def create_volume(
    csi: RunningDriver, name: str, required: int = GiB, **kw: object
) -> pb.Volume:
    response = await csi.controller.CreateVolume(create_request(name, required, **kw))  # type: ignore[arg-type]
    return response.volume


async def capacity(
    csi: RunningDriver, node: str | None = None, kind: str | None = None
) -> pb.GetCapacityResponse:
    request = pb.GetCapacityRequest(parameters={"kind": kind} if kind else {})
    if node is not None:
        request.accessible_topology.CopyFrom(on_node(node))
    return await csi.controller.GetCapacity(request)


async def list_all(csi: RunningDriver) -> list[pb.ListVolumesResponse.Entry]:
    return list((await csi.controller.ListVolumes(pb.ListVolumesRequest())).entries)


@dataclass(frozen=True)
class ControllerState:
    """What a client can see of the controller: its volumes and every capacity figure."""

    volumes: tuple[tuple[str, str, int], ...]
    capacities: tuple[tuple[str | None, str, int, int], ...]


async def controller_state(csi: RunningDriver) -> ControllerState:
    volumes = tuple(
        sorted(
            (e.volume.volume_id, e.volume.volume_context["csi-mock/pool"], e.volume.capacity_bytes)
            for e in await list_all(csi)
        )
    )
    capacities = []
    for node in (None, "node-1", "node-2"):
        for kind in ("striped", "mirrored"):
            report = await capacity(csi, node, kind)
            capacities.append(
                (node, kind, report.available_capacity, report.maximum_volume_size.value)
            )
    return ControllerState(volumes, tuple(capacities))


# -- node --------------------------------------------------------------------------------


async def stage(
    csi: RunningDriver,
    volume_id: str,
    staging: Path,
    capability: pb.VolumeCapability | None = None,
    publish_context: Mapping[str, str] | None = None,
) -> None:
    await csi.node.NodeStageVolume(
        pb.NodeStageVolumeRequest(
            volume_id=volume_id,
            staging_target_path=str(staging),
            volume_capability=capability or mount_capability(),
            publish_context=dict(publish_context or {}),
        )
    )


async def unstage(csi: RunningDriver, volume_id: str, staging: Path) -> None:
    await csi.node.NodeUnstageVolume(
        pb.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
    )


def publish_request(
    volume_id: str,
    target: Path,
    staging: Path | None,
    capability: pb.VolumeCapability | None = None,
    *,
    readonly: bool = False,
    publish_context: Mapping[str, str] | None = None,
    volume_context: Mapping[str, str] | None = None,
) -> pb.NodePublishVolumeRequest:
    return pb.NodePublishVolumeRequest(
        volume_id=volume_id,
        target_path=str(target),
        staging_target_path=str(staging) if staging is not None else "",
        volume_capability=capability or mount_capability(),
        readonly=readonly,
        publish_context=dict(publish_context or {}),
        volume_context=dict(volume_context or {}),
    )


async def publish(
    csi: RunningDriver,
    volume_id: str,
    target: Path,
    staging: Path | None,
    capability: pb.VolumeCapability | None = None,
    **kw: object,
) -> None:
    await csi.node.NodePublishVolume(
        publish_request(volume_id, target, staging, capability, **kw)  # type: ignore[arg-type]
    )


async def unpublish(csi: RunningDriver, volume_id: str, target: Path) -> None:
    await csi.node.NodeUnpublishVolume(
        pb.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target))
    )


async def stats(
    csi: RunningDriver, volume_id: str, path: Path | str
) -> pb.NodeGetVolumeStatsResponse:
    return await csi.node.NodeGetVolumeStats(
        pb.NodeGetVolumeStatsRequest(volume_id=volume_id, volume_path=str(path))
    )


def usage(response: pb.NodeGetVolumeStatsResponse, unit: int) -> pb.VolumeUsage:
    (found,) = [u for u in response.usage if u.unit == unit]
    return found


# -- status assertions -------------------------------------------------------------------


def assert_status(
    raised: pytest.ExceptionInfo[grpc.aio.AioRpcError], code: grpc.StatusCode, *fragments: str
) -> None:
    """The call failed with `code` and a message naming every fragment."""
    error = raised.value
    assert error.code() == code, f"{error.code()}: {error.details()}"
    details = error.details() or ""
    for fragment in fragments:
        assert fragment in details, f"{fragment!r} not in {details!r}"


# -- mounts ------------------------------------------------------------------------------


def mount_points() -> list[str]:
    """Mount points of this process, read independently of the driver's own parser."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
        for line in info:
            fields = line.split(" ")
            if len(fields) > 4:
                points.append(_unescape_octal(fields[4]))
    return points


def mount_options(path: Path) -> set[str]:
    """The per-mount options (rw/ro, ...) of the topmost mount at `path`."""
    found: set[str] = set()
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
        for line in info:
            fields = line.split(" ")
            if len(fields) > 5 and _unescape_octal(fields[4]) == os.path.normpath(path):
                found = set(fields[5].split(","))
    return found


def is_mount_point(path: Path) -> bool:
    return os.path.normpath(path) in mount_points()


def _unescape_octal(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


@asynccontextmanager
async def staged_and_published(
    csi: RunningDriver,
    volume_id: str,
    staging: Path,
    target: Path,
    capability: pb.VolumeCapability | None = None,
    *,
    readonly: bool = False,
) -> AsyncIterator[Path]:
    """Stage and publish a volume; the driver's own NodeUnpublish/NodeUnstage undo it."""
    await stage(csi, volume_id, staging, capability)
    try:
        await publish(csi, volume_id, target, staging, capability, readonly=readonly)
        try:
            yield target
        finally:
            await unpublish(csi, volume_id, target)
    finally:
        await unstage(csi, volume_id, staging)


def backing_entries(root: Path) -> set[str]:
    """What a BackingStore root holds: live entries by name, and the driver's pending,
    retired and parked ones as '.pending/<name>', '.retired/<name>', 'lost+found/<name>'
    (empty when nothing at all is left behind)."""
    found = set()
    for entry in os.scandir(root):
        if entry.name in (PENDING_DIR, RETIRED_DIR, LOST_DIR):
            found |= {f"{entry.name}/{name}" for name in os.listdir(entry.path)}
        else:
            found.add(entry.name)
    return found
