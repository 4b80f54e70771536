"""/v1/reset: a running driver back to how it started, so that a harness can hand it to
the next test instead of deploying a new one; refused while it holds a volume."""

from __future__ import annotations

from typing import Any

from csi_mock.admin import AdminError
from csi_mock.admin.views import Limits
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import GiB, capacity, create_volume

CONFIGURED_FAULT: dict[str, Any] = {
    "id": "from-start-up",
    "method": "DeleteVolume",
    "delay": "1ms",
}


async def leave_everything_changed(with_admin: AdminDriver) -> None:
    """What a test may leave behind, one of each: a fault rule, a resized and a drained
    pool, frozen capacity, changed limits and switches, a volume condition, calls in
    the journal."""
    admin = with_admin.admin
    volume = await create_volume(with_admin.csi, "pvc-1", GiB, requisite=["node-1"])
    await admin.set_condition(volume.volume_id, abnormal=True, message="left behind")
    await with_admin.csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))
    await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED")
    await admin.resize_pool("node-2", "30Gi")
    await admin.consume("node-1", "9Gi")
    await admin.freeze_capacity()
    await admin.set_limits(max_volumes_per_node=3, attach_limit=2)
    await admin.set_switches(controller_expansion=False, volume_stats=False)


async def test_reset_undoes_what_a_test_leaves_behind(start_admin: StartAdmin) -> None:
    with_admin = await start_admin(faults=[CONFIGURED_FAULT])
    admin = with_admin.admin
    before_switches = await admin.switches()
    await leave_everything_changed(with_admin)
    assert await admin.journal()

    await admin.reset()

    assert [rule.id for rule in await admin.faults()] == ["from-start-up"]
    pools = {pool.name: pool for pool in await admin.pools()}
    assert (pools["node-1"].total, pools["node-1"].external, pools["node-1"].used) == (
        10 * GiB,
        0,
        0,
    )
    assert pools["node-2"].total == 20 * GiB
    assert await admin.capacity_frozen() is False
    assert await admin.limits() == Limits(max_volumes_per_node=0, attach_limit=0)
    assert await admin.switches() == before_switches
    assert with_admin.driver.conditions.all() == {}
    assert await admin.journal() == []
    assert (await capacity(with_admin.csi, "node-1")).available_capacity == 10 * GiB


async def test_reset_pool_sizes_hold_across_a_restart(start_admin: StartAdmin) -> None:
    """The configured size is what the store says after a reset, not the resized one."""
    with_admin = await start_admin()
    await with_admin.admin.resize_pool("node-2", "30Gi")
    await with_admin.admin.reset()

    usage = with_admin.driver.store.pool_usage()

    assert usage["node-2"].total is None
    assert (usage["node-2"].external, usage["node-2"].used) == (0, 0)


async def test_reset_is_refused_while_a_volume_exists_and_changes_nothing(
    with_admin: AdminDriver,
) -> None:
    admin = with_admin.admin
    await create_volume(with_admin.csi, "pvc-1", GiB, requisite=["node-1"])
    rule = await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED")
    await admin.consume("node-1", "2Gi")

    try:
        await admin.reset()
    except AdminError as error:
        refusal = error
    else:
        raise AssertionError("a reset of a driver holding a volume was accepted")

    assert refusal.status == 409
    assert "1 volumes" in refusal.message and "nothing was reset" in refusal.message
    assert [r.id for r in await admin.faults()] == [rule.id]
    assert (await admin.pool("node-1")).external == 2 * GiB
    assert await admin.journal()
