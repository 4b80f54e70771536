"""ControllerGetCapabilities, and the controller RPCs the driver refuses as not offered."""

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import assert_status, create_request

RPC = pb.ControllerServiceCapability.RPC


async def controller_rpcs(csi: RunningDriver) -> set[int]:
    response = await csi.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())
    return {c.rpc.type for c in response.capabilities}


async def test_controller_capabilities_without_attach(csi: RunningDriver) -> None:
    assert await controller_rpcs(csi) == {
        RPC.CREATE_DELETE_VOLUME,
        RPC.LIST_VOLUMES,
        RPC.GET_CAPACITY,
        RPC.GET_VOLUME,
        RPC.SINGLE_NODE_MULTI_WRITER,
        RPC.EXPAND_VOLUME,
    }


async def test_controller_capabilities_with_attach_add_publish_readonly_and_published_nodes(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(attach_required=True)

    rpcs = await controller_rpcs(csi)

    assert {
        RPC.PUBLISH_UNPUBLISH_VOLUME,
        RPC.PUBLISH_READONLY,
        RPC.LIST_VOLUMES_PUBLISHED_NODES,
    } <= rpcs


async def test_controller_capabilities_omit_expand_volume_when_expansion_is_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"expansion": False})

    assert RPC.EXPAND_VOLUME not in await controller_rpcs(csi)


async def test_controller_capabilities_never_offer_snapshots_clones_or_modify(
    csi: RunningDriver,
) -> None:
    rpcs = await controller_rpcs(csi)

    assert rpcs.isdisjoint(
        {
            RPC.CREATE_DELETE_SNAPSHOT,
            RPC.LIST_SNAPSHOTS,
            RPC.CLONE_VOLUME,
            RPC.MODIFY_VOLUME,
            RPC.GET_SNAPSHOT,
        }
    )


Call = Callable[[RunningDriver], Awaitable[Any]]
NOT_OFFERED: dict[str, tuple[Call, str]] = {
    "CreateSnapshot": (
        lambda c: c.controller.CreateSnapshot(
            pb.CreateSnapshotRequest(source_volume_id="vol-1", name="snap")
        ),
        "snapshots",
    ),
    "DeleteSnapshot": (
        lambda c: c.controller.DeleteSnapshot(pb.DeleteSnapshotRequest(snapshot_id="snap")),
        "snapshots",
    ),
    "ListSnapshots": (
        lambda c: c.controller.ListSnapshots(pb.ListSnapshotsRequest()),
        "snapshots",
    ),
    "GetSnapshot": (
        lambda c: c.controller.GetSnapshot(pb.GetSnapshotRequest(snapshot_id="snap")),
        "snapshots",
    ),
    "ControllerModifyVolume": (
        lambda c: c.controller.ControllerModifyVolume(
            pb.ControllerModifyVolumeRequest(volume_id="vol-1", mutable_parameters={"a": "b"})
        ),
        "modification",
    ),
}


@pytest.mark.parametrize("rpc", sorted(NOT_OFFERED))
async def test_rpcs_not_offered_are_unimplemented(csi: RunningDriver, rpc: str) -> None:
    call, fragment = NOT_OFFERED[rpc]

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(csi)

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, fragment)


async def test_controller_rpcs_are_unimplemented_in_node_mode(start_driver: StartDriver) -> None:
    csi = await start_driver(mode="node")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.CreateVolume(create_request("pvc-node-mode"))

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_node_rpcs_are_unimplemented_in_controller_mode(start_driver: StartDriver) -> None:
    csi = await start_driver(mode="controller")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
