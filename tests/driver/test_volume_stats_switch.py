"""node.volume_stats and node.volume_condition: NodeGetVolumeStats on and off."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import assert_status, create_volume, stage, stats

NodeRPC = pb.NodeServiceCapability.RPC
DIRECTORY_NODE = {"id": "node-1", "mount": "directory"}


async def node_rpcs(csi: RunningDriver) -> set[int]:
    reply = await csi.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    return {c.rpc.type for c in reply.capabilities}


async def test_volume_stats_off_is_unimplemented_and_not_advertised(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(node={**DIRECTORY_NODE, "volume_stats": False})
    volume = await create_volume(csi, "pvc-1")
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, volume.volume_id, staging)

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "node.volume_stats")
    # VOLUME_CONDITION is reported by NodeGetVolumeStats, so it goes with it.
    assert not {NodeRPC.GET_VOLUME_STATS, NodeRPC.VOLUME_CONDITION} & await node_rpcs(csi)


async def test_volume_stats_on_by_default_with_a_healthy_condition(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-1")
    await stage(csi, volume.volume_id, staging)

    reply = await stats(csi, volume.volume_id, staging)

    assert {NodeRPC.GET_VOLUME_STATS, NodeRPC.VOLUME_CONDITION} <= await node_rpcs(csi)
    assert (reply.volume_condition.abnormal, reply.volume_condition.message) == (
        False,
        "healthy",
    )


async def test_volume_condition_off_reports_stats_without_a_condition(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(node={**DIRECTORY_NODE, "volume_condition": False})
    volume = await create_volume(csi, "pvc-1")
    await stage(csi, volume.volume_id, staging)

    reply = await stats(csi, volume.volume_id, staging)

    assert not reply.HasField("volume_condition")
    assert NodeRPC.VOLUME_CONDITION not in await node_rpcs(csi)
    assert NodeRPC.GET_VOLUME_STATS in await node_rpcs(csi)
