"""ValidateVolumeCapabilities."""

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver
from tests.driver.csi_helpers import (
    MULTI_NODE_MULTI_WRITER,
    SINGLE_NODE_READER_ONLY,
    assert_status,
    block_capability,
    create_volume,
    mount_capability,
)


def validate_request(
    volume: pb.Volume, *capabilities: pb.VolumeCapability, **parameters: str
) -> pb.ValidateVolumeCapabilitiesRequest:
    return pb.ValidateVolumeCapabilitiesRequest(
        volume_id=volume.volume_id,
        volume_context=volume.volume_context,
        volume_capabilities=list(capabilities),
        parameters=parameters,
    )


async def test_validate_confirms_the_capability_the_volume_was_created_with(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v")
    request = validate_request(volume, mount_capability())

    response = await csi.controller.ValidateVolumeCapabilities(request)

    assert response.HasField("confirmed")
    assert list(response.confirmed.volume_capabilities) == [mount_capability()]
    assert response.confirmed.volume_context == volume.volume_context


async def test_validate_confirms_other_access_modes_of_the_same_access_type(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v")
    request = validate_request(
        volume, mount_capability(SINGLE_NODE_READER_ONLY), mount_capability(MULTI_NODE_MULTI_WRITER)
    )

    response = await csi.controller.ValidateVolumeCapabilities(request)

    assert len(response.confirmed.volume_capabilities) == 2


async def test_validate_confirms_block_for_a_block_volume(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-b", capabilities=[block_capability()])

    response = await csi.controller.ValidateVolumeCapabilities(
        validate_request(volume, block_capability())
    )

    assert response.HasField("confirmed")


async def test_validate_does_not_confirm_block_for_a_mount_volume_and_says_why(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v")

    response = await csi.controller.ValidateVolumeCapabilities(
        validate_request(volume, block_capability())
    )

    assert not response.HasField("confirmed")
    assert "mount volume" in response.message


async def test_validate_does_not_confirm_when_any_capability_is_unsupported(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v")

    response = await csi.controller.ValidateVolumeCapabilities(
        validate_request(volume, mount_capability(), block_capability())
    )

    assert not response.HasField("confirmed")


async def test_validate_confirms_the_parameters_the_volume_was_created_with(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v", parameters={"kind": "mirrored"})

    response = await csi.controller.ValidateVolumeCapabilities(
        validate_request(volume, mount_capability(), kind="mirrored")
    )

    assert response.confirmed.parameters == {"kind": "mirrored"}


async def test_validate_does_not_confirm_different_parameters(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-v", parameters={"kind": "mirrored"})

    response = await csi.controller.ValidateVolumeCapabilities(
        validate_request(volume, mount_capability(), kind="striped")
    )

    assert not response.HasField("confirmed")
    assert "parameters" in response.message


async def test_validate_does_not_confirm_mutable_parameters_it_does_not_support(
    csi: RunningDriver,
) -> None:
    # Spec: `confirmed` lists what the plugin validated; without MODIFY_VOLUME the
    # plugin has no mutable parameters, so it must not confirm any.
    volume = await create_volume(csi, "pvc-v")
    request = validate_request(volume, mount_capability())
    request.mutable_parameters["iops"] = "5000"

    response = await csi.controller.ValidateVolumeCapabilities(request)

    assert dict(response.confirmed.mutable_parameters) == {}


async def test_validate_twice_gives_the_same_answer(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-v")
    request = validate_request(volume, mount_capability())

    first = await csi.controller.ValidateVolumeCapabilities(request)
    second = await csi.controller.ValidateVolumeCapabilities(request)

    assert first == second


async def test_validate_an_unknown_volume_is_not_found(csi: RunningDriver) -> None:
    request = pb.ValidateVolumeCapabilitiesRequest(
        volume_id="vol-missing", volume_capabilities=[mount_capability()]
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ValidateVolumeCapabilities(request)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_validate_without_capabilities_is_invalid_argument(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-v")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ValidateVolumeCapabilities(validate_request(volume))

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_capabilities")


async def test_validate_a_capability_without_access_mode_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-v")
    capability = mount_capability()
    capability.ClearField("access_mode")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ValidateVolumeCapabilities(validate_request(volume, capability))

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "access_mode")
