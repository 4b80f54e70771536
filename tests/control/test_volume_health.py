"""CSI v1.13 volume and storage health: the admin API's /v1/volumes/{id}/health and
/v1/storage-health, reported by NodeGetVolumeHealth, ControllerGetVolumeHealth,
ControllerListVolumeHealth and NodeGetStorageHealth; each RPC only with its
capability."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest

from csi_mock.admin import AdminError
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import GiB, assert_status, create_volume, publish, stage

NodeRPC = pb.NodeServiceCapability.RPC
ControllerRPC = pb.ControllerServiceCapability.RPC
INACCESSIBLE = {"status": "INACCESSIBLE", "reason": "AbnormalVolumeHealth", "message": "gone"}
UNREACHABLE = {"status": "STORAGE_UNREACHABLE", "reason": "BackendUnavailable", "message": "down"}


@pytest.fixture
async def healthy(start_admin: StartAdmin) -> AdminDriver:
    """A driver offering every health RPC."""
    return await start_admin(
        node={"id": "node-1", "mount": "directory", "volume_health": True, "storage_health": True},
        controller={"volume_health": True},
    )


async def node_health(driver: AdminDriver, volume_id: str) -> list[tuple[int, str, str]]:
    reply = await driver.csi.node.NodeGetVolumeHealth(
        pb.NodeGetVolumeHealthRequest(volume_id=volume_id)
    )
    assert reply.volume_health.volume_id == volume_id
    return [(e.status, e.reason, e.message) for e in reply.volume_health.health_statuses]


@pytest.mark.parametrize("configured", [True, False])
async def test_every_health_capability_is_advertised_only_when_configured(
    start_admin: StartAdmin, configured: bool
) -> None:
    driver = await start_admin(
        node={"id": "node-1", "volume_health": configured, "storage_health": configured},
        controller={"volume_health": configured},
    )
    node = await driver.csi.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    controller = await driver.csi.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )
    node_rpcs = {c.rpc.type for c in node.capabilities}
    controller_rpcs = {c.rpc.type for c in controller.capabilities}
    assert ({NodeRPC.GET_VOLUME_HEALTH, NodeRPC.GET_STORAGE_HEALTH} <= node_rpcs) is configured
    health = {ControllerRPC.GET_VOLUME_HEALTH, ControllerRPC.LIST_VOLUME_HEALTH}
    assert (health <= controller_rpcs) is configured
    assert ({NodeRPC.GET_VOLUME_HEALTH} & node_rpcs) is not configured


async def test_without_the_capabilities_the_health_rpcs_are_unimplemented_naming_the_key(
    with_admin: AdminDriver,
) -> None:
    csi = with_admin.csi
    calls = [
        (csi.node.NodeGetVolumeHealth(pb.NodeGetVolumeHealthRequest(volume_id="v")), "node."),
        (csi.node.NodeGetStorageHealth(pb.NodeGetStorageHealthRequest()), "node.storage_health"),
        (
            csi.controller.ControllerGetVolumeHealth(
                pb.ControllerGetVolumeHealthRequest(volume_id="v")
            ),
            "controller.volume_health",
        ),
        (
            csi.controller.ControllerListVolumeHealth(pb.ControllerListVolumeHealthRequest()),
            "controller.volume_health",
        ),
    ]
    for call, key in calls:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call
        assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, key)


async def test_a_staged_volume_is_healthy_and_one_whose_data_is_gone_is_inaccessible(
    healthy: AdminDriver, tmp_path: Path
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    await stage(healthy.csi, volume.volume_id, tmp_path / "staging")
    assert await node_health(healthy, volume.volume_id) == []

    staging = healthy.driver.store.staging(volume.volume_id)
    assert staging is not None
    shutil.rmtree(staging.data_path)

    ((status, reason, message),) = await node_health(healthy, volume.volume_id)
    assert (status, reason) == (pb.INACCESSIBLE, "BackingDataMissing")
    assert staging.data_path in message


async def test_a_published_volume_whose_target_is_gone_is_inaccessible(
    healthy: AdminDriver, tmp_path: Path
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    await stage(healthy.csi, volume.volume_id, tmp_path / "staging")
    target = tmp_path / "target"
    await publish(healthy.csi, volume.volume_id, target, tmp_path / "staging")
    assert await node_health(healthy, volume.volume_id) == []

    target.unlink() if target.is_symlink() else shutil.rmtree(target)

    assert [(s, r) for s, r, _ in await node_health(healthy, volume.volume_id)] == [
        (pb.INACCESSIBLE, "TargetPathMissing")
    ]


async def test_set_health_wins_over_what_the_node_measures_until_cleared(
    healthy: AdminDriver, tmp_path: Path
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    await stage(healthy.csi, volume.volume_id, tmp_path / "staging")

    view = await healthy.admin.set_volume_health(volume.volume_id, [INACCESSIBLE])

    assert (view.set, view.entries) == (True, (INACCESSIBLE,))
    assert await node_health(healthy, volume.volume_id) == [
        (pb.INACCESSIBLE, "AbnormalVolumeHealth", "gone")
    ]
    got = await healthy.csi.controller.ControllerGetVolumeHealth(
        pb.ControllerGetVolumeHealthRequest(volume_id=volume.volume_id)
    )
    assert [e.reason for e in got.volume_health.health_statuses] == ["AbnormalVolumeHealth"]

    cleared = await healthy.admin.clear_volume_health(volume.volume_id)

    assert (cleared.set, cleared.entries) == (False, ())
    assert await node_health(healthy, volume.volume_id) == []


async def test_a_volume_neither_staged_nor_published_here_is_not_found(
    healthy: AdminDriver,
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    for volume_id, code in ((volume.volume_id, grpc.StatusCode.NOT_FOUND), ("", None)):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await node_health(healthy, volume_id)
        if code is None:
            assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_id")
        else:
            assert_status(raised, code, "not staged or published")


async def test_the_controller_lists_only_abnormal_existing_volumes_page_by_page(
    healthy: AdminDriver,
) -> None:
    ids = [(await create_volume(healthy.csi, f"pvc-{i}", GiB)).volume_id for i in range(4)]
    for volume_id in ids[:3]:
        await healthy.admin.set_volume_health(volume_id, [INACCESSIBLE])
    await healthy.admin.set_volume_health(ids[3], [])  # set healthy: not listed

    listed: list[str] = []
    token = ""
    pages = 0
    while True:
        reply = await healthy.csi.controller.ControllerListVolumeHealth(
            pb.ControllerListVolumeHealthRequest(max_entries=2, starting_token=token)
        )
        listed += [entry.volume_id for entry in reply.entries]
        pages += 1
        token = reply.next_token
        if not token:
            break

    assert (sorted(listed), pages) == (sorted(ids[:3]), 2)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await healthy.csi.controller.ControllerListVolumeHealth(
            pb.ControllerListVolumeHealthRequest(starting_token="bogus")
        )
    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_storage_health_is_reported_until_cleared(healthy: AdminDriver) -> None:
    async def backend() -> list[tuple[int, str]]:
        reply = await healthy.csi.node.NodeGetStorageHealth(pb.NodeGetStorageHealthRequest())
        return [(entry.status, entry.reason) for entry in reply.backend_health]

    assert await backend() == []
    view = await healthy.admin.set_storage_health([UNREACHABLE])
    assert view.entries == (UNREACHABLE,)
    assert await backend() == [(pb.STORAGE_UNREACHABLE, "BackendUnavailable")]

    await healthy.admin.clear_storage_health()

    assert await backend() == []
    assert (await healthy.admin.storage_health()).entries == ()


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"status": "BROKEN", "reason": "Whatever"}, "entries[0].status"),
        ({"status": "DEGRADED", "reason": "not camel"}, "entries[0].reason"),
        ({"status": "DEGRADED", "reason": ""}, "reason"),
        ({"status": "DEGRADED", "reason": "Slow", "extra": "x"}, "extra"),
    ],
)
async def test_a_bad_health_entry_is_400_naming_it_and_changes_nothing(
    healthy: AdminDriver, entry: dict[str, str], named: str
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    await healthy.admin.set_volume_health(volume.volume_id, [INACCESSIBLE])

    with pytest.raises(AdminError) as raised:
        await healthy.admin.set_volume_health(volume.volume_id, [entry])

    assert raised.value.status == 400
    assert named in str(raised.value)
    assert (await healthy.admin.volume_health(volume.volume_id)).entries == (INACCESSIBLE,)


async def test_the_same_condition_twice_and_a_storage_status_on_a_volume_are_refused(
    healthy: AdminDriver,
) -> None:
    volume = await create_volume(healthy.csi, "pvc-1", GiB)
    for entries in ([INACCESSIBLE, INACCESSIBLE], [UNREACHABLE]):
        with pytest.raises(AdminError) as raised:
            await healthy.admin.set_volume_health(volume.volume_id, entries)
        assert raised.value.status == 400
    with pytest.raises(AdminError):
        await healthy.admin.set_storage_health([INACCESSIBLE])


async def test_health_of_an_unknown_volume_is_404_naming_volume_id(healthy: AdminDriver) -> None:
    with pytest.raises(AdminError) as raised:
        await healthy.admin.set_volume_health("no-such-volume", [INACCESSIBLE])

    assert (raised.value.status, raised.value.field) == (404, "volume_id")


async def test_a_reset_forgets_volume_and_storage_health(healthy: AdminDriver) -> None:
    await healthy.admin.set_storage_health([UNREACHABLE])

    await healthy.admin.reset()

    assert (await healthy.admin.storage_health()).entries == ()
