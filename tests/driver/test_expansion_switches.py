"""Expansion switches: controller expansion, node expansion, node_expansion_required and
online expansion, each seen in the capabilities and in the RPCs."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import GiB, assert_status, create_volume, publish, stage

ControllerRPC = pb.ControllerServiceCapability.RPC
NodeRPC = pb.NodeServiceCapability.RPC
Expansion = pb.PluginCapability.VolumeExpansion


async def controller_rpcs(csi: RunningDriver) -> set[int]:
    reply = await csi.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())
    return {c.rpc.type for c in reply.capabilities}


async def node_rpcs(csi: RunningDriver) -> set[int]:
    reply = await csi.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    return {c.rpc.type for c in reply.capabilities}


async def plugin_expansion(csi: RunningDriver) -> list[int]:
    reply = await csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    return [c.volume_expansion.type for c in reply.capabilities if c.HasField("volume_expansion")]


def expand(volume_id: str, required: int) -> pb.ControllerExpandVolumeRequest:
    return pb.ControllerExpandVolumeRequest(
        volume_id=volume_id, capacity_range=pb.CapacityRange(required_bytes=required)
    )


def node_expand(volume_id: str, path: Path, required: int) -> pb.NodeExpandVolumeRequest:
    return pb.NodeExpandVolumeRequest(
        volume_id=volume_id,
        volume_path=str(path),
        capacity_range=pb.CapacityRange(required_bytes=required),
    )


async def test_by_default_both_sides_expand_online_and_ask_for_node_expansion(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-1", GiB)

    reply = await csi.controller.ControllerExpandVolume(expand(volume.volume_id, 2 * GiB))

    assert reply.node_expansion_required
    assert ControllerRPC.EXPAND_VOLUME in await controller_rpcs(csi)
    assert NodeRPC.EXPAND_VOLUME in await node_rpcs(csi)
    assert await plugin_expansion(csi) == [Expansion.ONLINE]


async def test_controller_expansion_off_is_node_only(start_driver: StartDriver) -> None:
    csi = await start_driver(
        controller={"expansion": False},
        node={"id": "node-1", "expansion": True, "mount": "directory"},
    )
    volume = await create_volume(csi, "pvc-1", GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand(volume.volume_id, 2 * GiB))

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "controller.expansion")
    assert ControllerRPC.EXPAND_VOLUME not in await controller_rpcs(csi)
    assert NodeRPC.EXPAND_VOLUME in await node_rpcs(csi)
    assert await plugin_expansion(csi) == [Expansion.ONLINE]


async def test_a_controller_alone_answers_whether_the_node_expands_and_nothing_else(
    start_driver: StartDriver,
) -> None:
    # external-resizer asks the controller's socket; a failing call makes it exit.
    csi = await start_driver(
        mode="controller", controller={"expansion": False}, node={"expansion": True}
    )

    assert NodeRPC.EXPAND_VOLUME in await node_rpcs(csi)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_node_expansion_off_drops_the_node_capability_and_refuses_node_expand(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(node={"id": "node-1", "expansion": False, "mount": "directory"})
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(node_expand(volume.volume_id, staging, 2 * GiB))

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "node.expansion")
    assert NodeRPC.EXPAND_VOLUME not in await node_rpcs(csi)
    assert ControllerRPC.EXPAND_VOLUME in await controller_rpcs(csi)


async def test_controller_expansion_off_alone_turns_node_expansion_off_as_before(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"expansion": False})

    assert NodeRPC.EXPAND_VOLUME not in await node_rpcs(csi)
    assert await plugin_expansion(csi) == []


async def test_node_expansion_not_required_is_what_controller_expand_replies(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"node_expansion_required": False})
    volume = await create_volume(csi, "pvc-1", GiB)

    reply = await csi.controller.ControllerExpandVolume(expand(volume.volume_id, 2 * GiB))

    assert (reply.capacity_bytes, reply.node_expansion_required) == (2 * GiB, False)


async def test_online_expansion_off_advertises_offline(start_driver: StartDriver) -> None:
    csi = await start_driver(online_expansion=False)

    assert await plugin_expansion(csi) == [Expansion.OFFLINE]


async def test_online_expansion_off_refuses_to_expand_an_attached_volume(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(online_expansion=False, attach_required=True)
    volume = await create_volume(csi, "pvc-1", GiB, requisite=["node-1"])
    await csi.controller.ControllerPublishVolume(
        pb.ControllerPublishVolumeRequest(
            volume_id=volume.volume_id,
            node_id="node-1",
            volume_capability=pb.VolumeCapability(
                mount=pb.VolumeCapability.MountVolume(),
                access_mode=pb.VolumeCapability.AccessMode(
                    mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
                ),
            ),
        )
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand(volume.volume_id, 2 * GiB))

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "online_expansion")


async def test_node_max_expansion_size_refuses_larger_node_expansion(
    start_driver: StartDriver, staging: Path, target: Path
) -> None:
    csi = await start_driver(
        node={"id": "node-1", "mount": "directory", "max_expansion_size": "2Gi"}
    )
    volume = await create_volume(csi, "pvc-1", GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(node_expand(volume.volume_id, target, 3 * GiB))

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "node.max_expansion_size")
    reply = await csi.node.NodeExpandVolume(node_expand(volume.volume_id, target, 2 * GiB))
    assert reply.capacity_bytes == 2 * GiB
