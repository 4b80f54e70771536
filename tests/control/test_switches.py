"""/v1/switches: expansion and stats switched while the driver serves, seen through CSI."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from csi_mock.admin import AdminError
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.control.test_admin_api import raw_http
from tests.driver.csi_helpers import GiB, assert_status, create_volume, stage, stats

ControllerRPC = pb.ControllerServiceCapability.RPC
NodeRPC = pb.NodeServiceCapability.RPC
Expansion = pb.PluginCapability.VolumeExpansion


def expand(volume_id: str, required: int) -> pb.ControllerExpandVolumeRequest:
    return pb.ControllerExpandVolumeRequest(
        volume_id=volume_id, capacity_range=pb.CapacityRange(required_bytes=required)
    )


async def test_switches_start_as_configured(start_admin: StartAdmin) -> None:
    driver = await start_admin(controller={"node_expansion_required": False})

    switches = await driver.admin.switches()

    assert switches.node_expansion_required is False
    assert switches.controller_expansion and switches.volume_stats and switches.online_expansion


async def test_node_expansion_required_off_changes_the_next_controller_expand(
    with_admin: AdminDriver,
) -> None:
    volume = await create_volume(with_admin.csi, "pvc-1", GiB)

    await with_admin.admin.set_switches(node_expansion_required=False)

    reply = await with_admin.csi.controller.ControllerExpandVolume(
        expand(volume.volume_id, 2 * GiB)
    )
    assert reply.node_expansion_required is False


async def test_controller_expansion_off_withdraws_the_capability_and_the_rpc(
    with_admin: AdminDriver,
) -> None:
    volume = await create_volume(with_admin.csi, "pvc-1", GiB)

    await with_admin.admin.set_switches(controller_expansion=False)

    caps = await with_admin.csi.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    assert ControllerRPC.EXPAND_VOLUME not in {c.rpc.type for c in caps.capabilities}
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await with_admin.csi.controller.ControllerExpandVolume(expand(volume.volume_id, 2 * GiB))
    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED)


async def test_online_expansion_off_advertises_offline(with_admin: AdminDriver) -> None:
    await with_admin.admin.set_switches(online_expansion=False)

    reply = await with_admin.csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    kinds = [c.volume_expansion.type for c in reply.capabilities if c.HasField("volume_expansion")]
    assert kinds == [Expansion.OFFLINE]


async def test_volume_stats_off_makes_node_get_volume_stats_unimplemented(
    with_admin: AdminDriver, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    volume = await create_volume(with_admin.csi, "pvc-1", GiB)
    await stage(with_admin.csi, volume.volume_id, staging)
    await stats(with_admin.csi, volume.volume_id, staging)

    await with_admin.admin.set_switches(volume_stats=False)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(with_admin.csi, volume.volume_id, staging)
    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED)


async def test_a_node_switch_on_a_controller_only_driver_is_409_and_changes_nothing(
    start_admin: StartAdmin,
) -> None:
    driver = await start_admin(mode="controller", node={})

    with pytest.raises(AdminError) as raised:
        await driver.admin.set_switches(node_expansion_required=False, volume_stats=False)

    assert (raised.value.status, raised.value.field) == (409, "volume_stats")
    assert (await driver.admin.switches()).node_expansion_required is True


async def test_a_switch_that_is_not_a_boolean_is_refused_naming_it(
    with_admin: AdminDriver,
) -> None:
    async with raw_http(with_admin) as http:
        response = await http.patch("/v1/switches", json={"volume_stats": "no"})

    assert (response.status_code, response.json()["field"]) == (400, "volume_stats")
    assert (await with_admin.admin.switches()).volume_stats is True
