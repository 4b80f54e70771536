"""ControllerModifyVolume and CreateVolume's mutable_parameters (MODIFY_VOLUME).

The driver under test allows `iops` with any value and `tier` with three values. What
a volume holds is read from the driver's store, the record the admin API shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import assert_status, create_request, mount_capability
from tests.driver.failing_store import FailingStore

RPC = pb.ControllerServiceCapability.RPC
MODIFY: dict[str, Any] = {
    "modify": {"mutable_parameters": {"iops": [], "tier": ["gold", "silver", "bronze"]}}
}


@pytest.fixture
async def modifying(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(controller=MODIFY)


async def create(csi: RunningDriver, name: str, **mutable: str) -> str:
    request = create_request(name)
    request.mutable_parameters.update(mutable)
    response = await csi.controller.CreateVolume(request)
    return response.volume.volume_id


async def modify(csi: RunningDriver, volume_id: str, **mutable: str) -> None:
    await csi.controller.ControllerModifyVolume(
        pb.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=mutable)
    )


def held(csi: RunningDriver, volume_id: str) -> Mapping[str, str]:
    volume = csi.driver.store.volume_by_id(volume_id)
    assert volume is not None, f"{volume_id} is not in the store"
    return volume.mutable_parameters


async def controller_rpcs(csi: RunningDriver) -> set[int]:
    response = await csi.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())
    return {c.rpc.type for c in response.capabilities}


# -- the capability ------------------------------------------------------------------------


async def test_modify_volume_is_advertised_when_configured(modifying: RunningDriver) -> None:
    assert RPC.MODIFY_VOLUME in await controller_rpcs(modifying)


async def test_modify_volume_is_not_advertised_without_configuration(csi: RunningDriver) -> None:
    assert RPC.MODIFY_VOLUME not in await controller_rpcs(csi)


async def test_without_configuration_modify_volume_stays_unimplemented(
    csi: RunningDriver,
) -> None:
    volume_id = await create(csi, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(csi, volume_id, tier="gold")

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "modification is not supported")


async def test_an_empty_modify_section_allows_any_name_and_value(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"modify": {}})
    volume_id = await create(csi, "pvc-1", anything="at all")

    await modify(csi, volume_id, XXX_FakeKey="XXX_FakeValue")

    assert held(csi, volume_id) == {"anything": "at all", "XXX_FakeKey": "XXX_FakeValue"}


# -- CreateVolume with mutable parameters --------------------------------------------------


async def test_create_volume_records_allowed_mutable_parameters(modifying: RunningDriver) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold", iops="3000")

    assert held(modifying, volume_id) == {"tier": "gold", "iops": "3000"}


async def test_create_volume_without_mutable_parameters_records_none(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1")

    assert held(modifying, volume_id) == {}


async def test_create_volume_refuses_an_unknown_mutable_parameter_by_name(
    modifying: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create(modifying, "pvc-1", XXX_FakeKey="XXX_FakeValue")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "mutable_parameters", "'XXX_FakeKey'")
    assert modifying.driver.store.volume_by_name("pvc-1") is None


async def test_create_volume_refuses_a_disallowed_value_naming_the_allowed_ones(
    modifying: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create(modifying, "pvc-1", tier="platinum")

    assert_status(
        raised, grpc.StatusCode.INVALID_ARGUMENT, "tier='platinum'", "'gold', 'silver', 'bronze'"
    )


async def test_a_repeated_create_volume_with_the_same_mutable_parameters_is_the_same_volume(
    modifying: RunningDriver,
) -> None:
    first = await create(modifying, "pvc-1", tier="gold")

    assert await create(modifying, "pvc-1", tier="gold") == first


async def test_a_repeated_create_volume_with_other_mutable_parameters_already_exists(
    modifying: RunningDriver,
) -> None:
    await create(modifying, "pvc-1", tier="gold")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create(modifying, "pvc-1", tier="silver")

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "mutable_parameters", "'gold'")


async def test_a_repeated_create_volume_compares_with_the_modified_parameters(
    modifying: RunningDriver,
) -> None:
    first = await create(modifying, "pvc-1", tier="gold")
    await modify(modifying, first, tier="silver")

    assert await create(modifying, "pvc-1", tier="silver") == first
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create(modifying, "pvc-1", tier="gold")
    assert raised.value.code() == grpc.StatusCode.ALREADY_EXISTS


# -- ControllerModifyVolume: errors ----------------------------------------------------------


async def test_modify_without_volume_id_is_invalid_argument(modifying: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, "", tier="gold")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_id")


@pytest.mark.parametrize(
    "mutable", [{"tier": "gold"}, {}, {"XXX_FakeKey": "x"}], ids=["valid", "none", "unknown"]
)
async def test_modify_of_an_unknown_volume_is_not_found(
    modifying: RunningDriver, mutable: dict[str, str]
) -> None:
    # csi-sanity sends its configured parameters, which may be none, to a made-up ID.
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, "non-existing-volume-id", **mutable)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "non-existing-volume-id")


async def test_modify_without_mutable_parameters_is_invalid_argument(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, volume_id)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "mutable_parameters is required")


async def test_modify_with_an_unknown_name_is_invalid_argument_and_changes_nothing(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, volume_id, tier="silver", XXX_FakeKey="XXX_FakeValue")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "'XXX_FakeKey'", "'iops', 'tier'")
    assert held(modifying, volume_id) == {"tier": "gold"}


async def test_modify_with_a_disallowed_value_is_invalid_argument_and_changes_nothing(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, volume_id, tier="platinum")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "tier='platinum'", "'bronze'")
    assert held(modifying, volume_id) == {"tier": "gold"}


# -- ControllerModifyVolume: what it does ------------------------------------------------------


async def test_modify_merges_the_given_keys_and_keeps_the_others(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold", iops="1000")

    await modify(modifying, volume_id, tier="silver")

    assert held(modifying, volume_id) == {"tier": "silver", "iops": "1000"}


async def test_modify_adds_parameters_to_a_volume_created_without_any(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1")

    await modify(modifying, volume_id, iops="5000")

    assert held(modifying, volume_id) == {"iops": "5000"}


async def test_modify_repeated_succeeds_and_changes_nothing_more(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")

    await modify(modifying, volume_id, tier="bronze", iops="7")
    await modify(modifying, volume_id, tier="bronze", iops="7")

    assert held(modifying, volume_id) == {"tier": "bronze", "iops": "7"}


async def test_modify_leaves_size_and_ordinary_parameters_alone(
    modifying: RunningDriver,
) -> None:
    request = create_request("pvc-1", parameters={"kind": "mirrored"})
    volume = (await modifying.controller.CreateVolume(request)).volume

    await modify(modifying, volume.volume_id, tier="silver")

    got = await modifying.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume.volume_id)
    )
    assert got.volume == volume


async def test_a_modify_whose_commit_fails_is_internal_and_changes_nothing(
    start_driver: StartDriver,
) -> None:
    failing = FailingStore()
    modifying = await start_driver(controller=MODIFY, backend_store=failing.around)
    volume_id = await create(modifying, "pvc-1", tier="gold")

    failing.fail("set_mutable_parameters", after_writing=True)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await modify(modifying, volume_id, tier="silver")
    failing.heal()

    assert raised.value.code() is grpc.StatusCode.INTERNAL
    assert held(modifying, volume_id) == {"tier": "gold"}


async def test_modified_parameters_survive_a_restart(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller=MODIFY)
    volume_id = await create(csi, "pvc-1", tier="gold", iops="1")
    await modify(csi, volume_id, tier="silver")
    await csi.server.stop(grace=1)

    again = await start_driver(controller=MODIFY)

    assert held(again, volume_id) == {"tier": "silver", "iops": "1"}
    assert await create(again, "pvc-1", tier="silver") == volume_id


# -- ValidateVolumeCapabilities ------------------------------------------------------------


def validate_request(volume_id: str, **mutable: str) -> pb.ValidateVolumeCapabilitiesRequest:
    return pb.ValidateVolumeCapabilitiesRequest(
        volume_id=volume_id,
        volume_capabilities=[mount_capability()],
        mutable_parameters=mutable,
    )


async def test_validate_confirms_the_mutable_parameters_the_volume_holds(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")

    response = await modifying.controller.ValidateVolumeCapabilities(
        validate_request(volume_id, tier="gold")
    )

    assert dict(response.confirmed.mutable_parameters) == {"tier": "gold"}


async def test_validate_does_not_confirm_mutable_parameters_the_volume_does_not_hold(
    modifying: RunningDriver,
) -> None:
    volume_id = await create(modifying, "pvc-1", tier="gold")

    other = await modifying.controller.ValidateVolumeCapabilities(
        validate_request(volume_id, tier="silver")
    )
    unknown = await modifying.controller.ValidateVolumeCapabilities(
        validate_request(volume_id, XXX_FakeKey="x")
    )

    assert not other.HasField("confirmed") and "mutable_parameters" in other.message
    assert not unknown.HasField("confirmed") and "'XXX_FakeKey'" in unknown.message
