"""/v1/volumes/{id}/condition: a condition set per volume, reported by ListVolumes,
ControllerGetVolume and NodeGetVolumeStats."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_mock.admin import AdminError
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import GiB, create_volume, list_all, stage, stats

ControllerRPC = pb.ControllerServiceCapability.RPC


@pytest.fixture
async def reporting(start_admin: StartAdmin) -> AdminDriver:
    """A driver whose controller reports volume conditions too."""
    return await start_admin(controller={"volume_condition": True})


async def controller_rpcs(driver: AdminDriver) -> set[int]:
    reply = await driver.csi.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    return {c.rpc.type for c in reply.capabilities}


async def test_the_controller_advertises_volume_condition_when_configured(
    reporting: AdminDriver,
) -> None:
    assert ControllerRPC.VOLUME_CONDITION in await controller_rpcs(reporting)


async def test_the_controller_does_not_advertise_volume_condition_by_default(
    with_admin: AdminDriver,
) -> None:
    assert ControllerRPC.VOLUME_CONDITION not in await controller_rpcs(with_admin)


async def test_a_set_condition_is_what_controller_get_volume_and_list_volumes_report(
    reporting: AdminDriver,
) -> None:
    sick = await create_volume(reporting.csi, "pvc-sick", GiB)
    well = await create_volume(reporting.csi, "pvc-well", GiB)

    await reporting.admin.set_condition(sick.volume_id, abnormal=True, message="disk on fire")

    got = await reporting.csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=sick.volume_id)
    )
    assert (got.status.volume_condition.abnormal, got.status.volume_condition.message) == (
        True,
        "disk on fire",
    )
    listed = {e.volume.volume_id: e.status.volume_condition for e in await list_all(reporting.csi)}
    assert listed[sick.volume_id].abnormal is True
    assert (listed[well.volume_id].abnormal, listed[well.volume_id].message) == (False, "healthy")


async def test_a_set_condition_is_what_node_get_volume_stats_reports(
    with_admin: AdminDriver, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    volume = await create_volume(with_admin.csi, "pvc-1", GiB)
    await stage(with_admin.csi, volume.volume_id, staging)
    assert (
        await stats(with_admin.csi, volume.volume_id, staging)
    ).volume_condition.abnormal is False

    await with_admin.admin.set_condition(volume.volume_id, abnormal=True, message="degraded")

    condition = (await stats(with_admin.csi, volume.volume_id, staging)).volume_condition
    assert (condition.abnormal, condition.message) == (True, "degraded")


async def test_clearing_a_condition_makes_the_volume_healthy_again(
    reporting: AdminDriver,
) -> None:
    volume = await create_volume(reporting.csi, "pvc-1", GiB)
    await reporting.admin.set_condition(volume.volume_id, abnormal=True, message="bad")

    cleared = await reporting.admin.clear_condition(volume.volume_id)

    assert (cleared.abnormal, cleared.message) == (False, "healthy")
    got = await reporting.csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume.volume_id)
    )
    assert got.status.volume_condition.abnormal is False


async def test_without_controller_volume_condition_the_controller_reports_none(
    with_admin: AdminDriver,
) -> None:
    volume = await create_volume(with_admin.csi, "pvc-1", GiB)
    await with_admin.admin.set_condition(volume.volume_id, abnormal=True, message="bad")

    got = await with_admin.csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume.volume_id)
    )

    assert not got.status.HasField("volume_condition")


async def test_a_condition_for_an_unknown_volume_is_404_naming_volume_id(
    with_admin: AdminDriver,
) -> None:
    with pytest.raises(AdminError) as raised:
        await with_admin.admin.set_condition("no-such-volume", abnormal=True)

    assert (raised.value.status, raised.value.field) == (404, "volume_id")
