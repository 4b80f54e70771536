"""node.volume_mount_group: VOLUME_MOUNT_GROUP and volume_mount_group in NodeStage and
NodePublish."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import assert_status, create_volume, mount_capability, publish, stage

NodeRPC = pb.NodeServiceCapability.RPC
GROUP_NODE = {"id": "node-1", "mount": "directory", "volume_mount_group": True}


def with_group(group: str) -> pb.VolumeCapability:
    capability = mount_capability()
    capability.mount.volume_mount_group = group
    return capability


async def node_rpcs(csi: RunningDriver) -> set[int]:
    reply = await csi.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    return {c.rpc.type for c in reply.capabilities}


def data_of(csi: RunningDriver, volume_id: str) -> Path:
    return csi.config.volumes_dir / volume_id


async def test_volume_mount_group_on_is_advertised(start_driver: StartDriver) -> None:
    csi = await start_driver(node=GROUP_NODE)

    assert NodeRPC.VOLUME_MOUNT_GROUP in await node_rpcs(csi)


@pytest.mark.root
async def test_staging_with_a_mount_group_gives_the_data_to_that_group(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(node=GROUP_NODE)
    volume = await create_volume(csi, "pvc-1")

    await stage(csi, volume.volume_id, staging, with_group("4321"))

    data = os.stat(data_of(csi, volume.volume_id))
    assert data.st_gid == 4321
    assert data.st_mode & stat.S_ISGID and data.st_mode & stat.S_IRWXG == stat.S_IRWXG


@pytest.mark.root
async def test_publishing_with_a_mount_group_gives_the_data_to_that_group(
    start_driver: StartDriver, staging: Path, target: Path
) -> None:
    csi = await start_driver(node=GROUP_NODE)
    volume = await create_volume(csi, "pvc-1")
    await stage(csi, volume.volume_id, staging)

    await publish(csi, volume.volume_id, target, staging, with_group("2000"))

    assert os.stat(data_of(csi, volume.volume_id)).st_gid == 2000


async def test_a_mount_group_that_is_not_a_number_is_refused_naming_the_field(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(node=GROUP_NODE)
    volume = await create_volume(csi, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging, with_group("wheel"))

    assert_status(
        raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_capability.mount.volume_mount_group"
    )
    assert not staging.exists()


async def test_a_mount_group_without_the_capability_is_refused(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging, with_group("2000"))

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "VOLUME_MOUNT_GROUP")
    assert NodeRPC.VOLUME_MOUNT_GROUP not in await node_rpcs(csi)
