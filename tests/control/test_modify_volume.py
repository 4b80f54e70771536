"""ControllerModifyVolume through the control surface: the admin API's volume listing
shows what a modification did, and fault rules and the journal cover the call."""

from __future__ import annotations

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.csi_helpers import assert_status, create_request

MODIFY = {"modify": {"mutable_parameters": {"iops": [], "tier": ["gold", "silver"]}}}


@pytest.fixture
async def modifying(start_admin: StartAdmin) -> AdminDriver:
    return await start_admin(controller=MODIFY)


async def create(handle: AdminDriver, name: str, **mutable: str) -> str:
    request = create_request(name)
    request.mutable_parameters.update(mutable)
    response = await handle.csi.controller.CreateVolume(request)
    return response.volume.volume_id


def modify_request(volume_id: str, **mutable: str) -> pb.ControllerModifyVolumeRequest:
    return pb.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=mutable)


async def listed(handle: AdminDriver) -> dict[str, dict[str, str]]:
    page = await handle.admin.volumes()
    return {volume.name: volume.mutable_parameters for volume in page.volumes}


async def test_the_volume_listing_shows_the_mutable_parameters_after_a_modification(
    modifying: AdminDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold", iops="100")
    await create(modifying, "pvc-2")
    assert await listed(modifying) == {"pvc-1": {"tier": "gold", "iops": "100"}, "pvc-2": {}}

    await modifying.csi.controller.ControllerModifyVolume(modify_request(volume_id, tier="silver"))

    assert await listed(modifying) == {"pvc-1": {"tier": "silver", "iops": "100"}, "pvc-2": {}}


async def test_a_fault_rule_fails_the_modification_before_it_applies_and_the_journal_has_it(
    modifying: AdminDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")
    rule = await modifying.admin.add_fault(
        "ControllerModifyVolume",
        code="RESOURCE_EXHAUSTED",
        message="backend busy (injected)",
        volume=volume_id,
        times=1,
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modifying.csi.controller.ControllerModifyVolume(
            modify_request(volume_id, tier="silver")
        )
    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "backend busy (injected)")
    assert await listed(modifying) == {"pvc-1": {"tier": "gold"}}
    await modifying.csi.controller.ControllerModifyVolume(modify_request(volume_id, tier="silver"))

    failed, retried = await modifying.admin.journal(method="ControllerModifyVolume")
    assert (failed.code, failed.fault) == ("RESOURCE_EXHAUSTED", rule.id)
    assert failed.request == {"volume_id": volume_id, "mutable_parameters": {"tier": "silver"}}
    assert (retried.code, retried.fault) == ("OK", None)
    assert await listed(modifying) == {"pvc-1": {"tier": "silver"}}


async def test_the_journal_records_a_refused_modification_with_its_code(
    modifying: AdminDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError):
        await modifying.csi.controller.ControllerModifyVolume(
            modify_request(volume_id, tier="platinum")
        )

    (record,) = await modifying.admin.journal(method="ControllerModifyVolume")
    assert record.code == "INVALID_ARGUMENT"
    assert "tier='platinum'" in record.message
