"""Capacity and limit knobs, turned through the admin API and seen through CSI."""

from __future__ import annotations

import grpc
import pytest

from csi_mock.admin import AdminError
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import GiB, assert_status, capacity, create_volume, mount_capability
from tests.driver.failing_store import FailingStore

# The default test driver: pool node-1 is 10Gi (volumes up to 4Gi), node-2 is 20Gi.


# -- resize ------------------------------------------------------------------------------


async def test_growing_a_pool_grows_get_capacity(with_admin: AdminDriver) -> None:
    await with_admin.admin.resize_pool("node-1", "16Gi")

    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 16 * GiB


async def test_shrinking_a_pool_shrinks_get_capacity_and_refuses_volumes_beyond_it(
    with_admin: AdminDriver,
) -> None:
    await with_admin.admin.resize_pool("node-1", 2 * GiB)

    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 2 * GiB
    await create_volume(with_admin.csi, "pvc-1", 2 * GiB, requisite=["node-1"])
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(with_admin.csi, "pvc-2", GiB, requisite=["node-1"])
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED)


async def test_shrinking_a_pool_below_what_volumes_use_is_refused_and_changes_nothing(
    with_admin: AdminDriver,
) -> None:
    await create_volume(with_admin.csi, "pvc-1", 3 * GiB, requisite=["node-1"])

    with pytest.raises(AdminError) as raised:
        await with_admin.admin.resize_pool("node-1", 2 * GiB)

    assert (raised.value.status, raised.value.field) == (409, "size")
    assert (await with_admin.admin.pool("node-1")).total == 10 * GiB
    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 7 * GiB


async def test_a_resize_whose_commit_fails_leaves_the_pool_as_it_was(
    start_admin: StartAdmin,
) -> None:
    failing = FailingStore()
    with_admin = await start_admin(backend_store=failing.around)

    failing.fail("set_pool_total")
    with pytest.raises(AdminError) as raised:
        await with_admin.admin.resize_pool("node-1", 16 * GiB)

    assert raised.value.status == 500
    assert (await with_admin.admin.pool("node-1")).total == 10 * GiB
    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 10 * GiB


# -- drift (space consumed outside CSI) --------------------------------------------------


async def test_consumed_bytes_disappear_from_get_capacity(with_admin: AdminDriver) -> None:
    await with_admin.admin.consume("node-1", "3Gi")

    report = await capacity(with_admin.csi, "node-1")
    assert report.available_capacity == 7 * GiB
    assert (await with_admin.admin.pool("node-1")).external == 3 * GiB


async def test_released_bytes_come_back_in_get_capacity(with_admin: AdminDriver) -> None:
    await with_admin.admin.consume("node-1", 3 * GiB)
    await with_admin.admin.release("node-1", 2 * GiB)

    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 9 * GiB


async def test_drift_makes_create_volume_fail_where_get_capacity_said_there_was_room(
    with_admin: AdminDriver,
) -> None:
    before = await capacity(with_admin.csi, "node-1")
    await with_admin.admin.consume("node-1", "9Gi")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(with_admin.csi, "pvc-1", 2 * GiB, requisite=["node-1"])

    assert before.available_capacity >= 2 * GiB
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED)


async def test_consuming_more_than_is_free_is_refused_and_changes_nothing(
    with_admin: AdminDriver,
) -> None:
    with pytest.raises(AdminError) as raised:
        await with_admin.admin.consume("node-1", "11Gi")

    assert (raised.value.status, raised.value.field) == (409, "bytes")
    assert (await with_admin.admin.pool("node-1")).external == 0


async def test_releasing_more_than_was_consumed_is_refused(with_admin: AdminDriver) -> None:
    await with_admin.admin.consume("node-1", "1Gi")

    with pytest.raises(AdminError) as raised:
        await with_admin.admin.release("node-1", "2Gi")

    assert (raised.value.status, raised.value.field) == (409, "bytes")
    assert (await with_admin.admin.pool("node-1")).external == GiB


# -- frozen capacity ---------------------------------------------------------------------


async def test_frozen_get_capacity_stays_constant_while_volumes_are_created(
    with_admin: AdminDriver,
) -> None:
    csi = with_admin.csi
    before = await capacity(csi, "node-1")
    await with_admin.admin.freeze_capacity()

    for index in range(3):
        await create_volume(csi, f"pvc-{index}", 2 * GiB, requisite=["node-1"])
        assert await capacity(csi, "node-1") == before

    assert (await with_admin.admin.pool("node-1")).used == 6 * GiB


async def test_with_frozen_capacity_create_volume_fails_although_get_capacity_shows_room(
    with_admin: AdminDriver,
) -> None:
    csi = with_admin.csi
    await with_admin.admin.freeze_capacity()
    for index in range(2):
        await create_volume(csi, f"pvc-{index}", 4 * GiB, requisite=["node-1"])

    shown = await capacity(csi, "node-1")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-next", 4 * GiB, requisite=["node-1"])

    assert shown.available_capacity == 10 * GiB
    assert shown.maximum_volume_size.value == 4 * GiB
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED)


async def test_unfreezing_reports_the_live_capacity_again(with_admin: AdminDriver) -> None:
    csi = with_admin.csi
    await with_admin.admin.freeze_capacity()
    await create_volume(csi, "pvc-1", 3 * GiB, requisite=["node-1"])

    assert await with_admin.admin.unfreeze_capacity() is False
    assert (await capacity(csi, "node-1")).available_capacity == 7 * GiB


async def test_freezing_twice_keeps_the_first_snapshot(with_admin: AdminDriver) -> None:
    csi = with_admin.csi
    await with_admin.admin.freeze_capacity()
    await create_volume(csi, "pvc-1", 3 * GiB, requisite=["node-1"])
    await with_admin.admin.freeze_capacity()

    assert (await capacity(csi, "node-1")).available_capacity == 10 * GiB


# -- limits ------------------------------------------------------------------------------


async def test_max_volumes_per_node_is_what_node_get_info_reports_next(
    with_admin: AdminDriver,
) -> None:
    await with_admin.admin.set_limits(max_volumes_per_node=5)

    response = await with_admin.csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert response.max_volumes_per_node == 5


async def test_the_attach_limit_applies_to_the_next_controller_publish(
    start_admin: StartAdmin,
) -> None:
    driver = await start_admin(attach_required=True)
    csi = driver.csi
    volumes = [await create_volume(csi, f"pvc-{i}") for i in range(3)]

    async def publish(index: int) -> None:
        await csi.controller.ControllerPublishVolume(
            pb.ControllerPublishVolumeRequest(
                volume_id=volumes[index].volume_id,
                node_id="node-1",
                volume_capability=mount_capability(),
            )
        )

    await driver.admin.set_limits(attach_limit=1)
    await publish(0)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(1)
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "attach limit of 1")

    await driver.admin.set_limits(attach_limit=0)
    await publish(1)
    await publish(2)


async def test_a_limit_for_a_service_not_running_here_is_refused_and_nothing_changes(
    start_admin: StartAdmin,
) -> None:
    driver = await start_admin(mode="controller")

    with pytest.raises(AdminError) as raised:
        await driver.admin.set_limits(max_volumes_per_node=3, attach_limit=2)

    assert (raised.value.status, raised.value.field) == (409, "max_volumes_per_node")
    assert "node service does not run" in raised.value.message
    limits = await driver.admin.limits()
    assert (limits.max_volumes_per_node, limits.attach_limit) == (None, 0)
