"""ControllerPublishVolume and ControllerUnpublishVolume, with attach off and on."""

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    MULTI_NODE_MULTI_WRITER,
    MULTI_NODE_READER_ONLY,
    SINGLE_NODE_WRITER,
    GiB,
    assert_status,
    block_capability,
    create_volume,
    list_all,
    mount_capability,
)

RPC = pb.ControllerServiceCapability.RPC


def publish_request(
    volume_id: str,
    node_id: str = "node-1",
    capability: pb.VolumeCapability | None = None,
    readonly: bool = False,
) -> pb.ControllerPublishVolumeRequest:
    return pb.ControllerPublishVolumeRequest(
        volume_id=volume_id,
        node_id=node_id,
        volume_capability=capability or mount_capability(),
        readonly=readonly,
    )


def unpublish_request(
    volume_id: str, node_id: str = "node-1"
) -> pb.ControllerUnpublishVolumeRequest:
    return pb.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=node_id)


async def published_nodes(csi: RunningDriver, volume_id: str) -> list[str]:
    response = await csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume_id)
    )
    return list(response.status.published_node_ids)


@pytest.fixture
async def attach(start_driver: StartDriver) -> RunningDriver:
    """Attach on; the controller knows the nodes node-1, node-2, ... (a glob)."""
    return await start_driver(attach_required=True, controller={"known_nodes": ["node-*"]})


# -- attach off ----------------------------------------------------------------------------


async def test_publish_unpublish_volume_is_not_advertised_when_attach_is_off(
    csi: RunningDriver,
) -> None:
    response = await csi.controller.ControllerGetCapabilities(pb.ControllerGetCapabilitiesRequest())

    assert RPC.PUBLISH_UNPUBLISH_VOLUME not in {c.rpc.type for c in response.capabilities}


async def test_controller_publish_is_unimplemented_when_attach_is_off(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-a")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "attach")


async def test_controller_unpublish_is_unimplemented_when_attach_is_off(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-a")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "attach")


# -- publishing ------------------------------------------------------------------------------


async def test_publish_unpublish_volume_is_advertised_when_attach_is_on(
    attach: RunningDriver,
) -> None:
    response = await attach.controller.ControllerGetCapabilities(
        pb.ControllerGetCapabilitiesRequest()
    )

    assert RPC.PUBLISH_UNPUBLISH_VOLUME in {c.rpc.type for c in response.capabilities}


async def test_controller_publish_returns_a_publish_context_naming_the_node(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")

    response = await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    assert response.publish_context["csi-mock/attached-node"] == "node-1"


async def test_controller_publish_records_the_node_as_published(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a")

    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    assert await published_nodes(attach, volume.volume_id) == ["node-1"]


async def test_list_volumes_reports_the_published_nodes(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    (entry,) = await list_all(attach)

    assert list(entry.status.published_node_ids) == ["node-1"]


async def test_controller_publish_twice_with_same_arguments_is_ok_with_the_same_context(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    first = await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    second = await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    assert second.publish_context == first.publish_context
    assert await published_nodes(attach, volume.volume_id) == ["node-1"]


async def test_controller_publish_readonly_is_accepted(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-ro")

    response = await attach.controller.ControllerPublishVolume(
        publish_request(volume.volume_id, readonly=True)
    )

    assert response.publish_context["csi-mock/attached-node"] == "node-1"


async def test_controller_publish_again_with_different_readonly_is_already_exists(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, readonly=True)
        )

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, volume.volume_id, "node-1")


async def test_controller_publish_again_with_different_capability_is_already_exists(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, capability=mount_capability(MULTI_NODE_MULTI_WRITER))
        )

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "different capability")


async def test_controller_publish_of_an_unknown_volume_is_not_found(attach: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(publish_request("vol-missing"))

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_controller_publish_to_an_unknown_node_is_not_found(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, node_id="worker-7")
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "worker-7")


async def test_combined_mode_controller_knows_only_its_own_node(start_driver: StartDriver) -> None:
    csi = await start_driver(attach_required=True)
    volume = await create_volume(csi, "pvc-a")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, node_id="node-2")
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "node-2")


async def test_controller_publish_with_the_other_access_type_is_invalid_argument(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a", capabilities=[mount_capability()])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, capability=block_capability())
        )

    # The field is named (found by tests/fuzz: the message named only the volume).
    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_capability", "mount volume")


async def test_controller_publish_single_node_volume_to_a_second_node_is_failed_precondition(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id, "node-1"))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id, "node-2"))

    # Spec: the message SHOULD name the node the volume is published at.
    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "node-1")


async def test_controller_publish_multi_node_volume_to_a_second_node_is_ok(
    attach: RunningDriver,
) -> None:
    capability = mount_capability(MULTI_NODE_MULTI_WRITER)
    volume = await create_volume(attach, "pvc-rwx", capabilities=[capability])
    await attach.controller.ControllerPublishVolume(
        publish_request(volume.volume_id, "node-1", capability)
    )

    await attach.controller.ControllerPublishVolume(
        publish_request(volume.volume_id, "node-2", capability)
    )

    assert await published_nodes(attach, volume.volume_id) == ["node-1", "node-2"]


async def test_controller_publish_elsewhere_while_single_node_published_is_failed_precondition(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(
        attach,
        "pvc-mixed",
        capabilities=[
            mount_capability(SINGLE_NODE_WRITER),
            mount_capability(MULTI_NODE_READER_ONLY),
        ],
    )
    await attach.controller.ControllerPublishVolume(
        publish_request(volume.volume_id, "node-1", mount_capability(SINGLE_NODE_WRITER))
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.ControllerPublishVolume(
            publish_request(
                volume.volume_id, "node-2", mount_capability(MULTI_NODE_READER_ONLY), readonly=True
            )
        )

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "node-1")


async def test_controller_publish_beyond_the_attach_limit_is_resource_exhausted(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(attach_required=True, controller={"attach_limit": 1})
    first = await create_volume(csi, "pvc-1")
    second = await create_volume(csi, "pvc-2")
    await csi.controller.ControllerPublishVolume(publish_request(first.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerPublishVolume(publish_request(second.volume_id))

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "attach limit")


async def test_controller_publish_at_the_attach_limit_is_still_idempotent(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(attach_required=True, controller={"attach_limit": 1})
    volume = await create_volume(csi, "pvc-1")
    await csi.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    await csi.controller.ControllerPublishVolume(publish_request(volume.volume_id))


async def test_attach_limit_frees_a_slot_after_unpublish(start_driver: StartDriver) -> None:
    csi = await start_driver(attach_required=True, controller={"attach_limit": 1})
    first = await create_volume(csi, "pvc-1")
    second = await create_volume(csi, "pvc-2")
    await csi.controller.ControllerPublishVolume(publish_request(first.volume_id))
    await csi.controller.ControllerUnpublishVolume(unpublish_request(first.volume_id))

    await csi.controller.ControllerPublishVolume(publish_request(second.volume_id))

    assert await published_nodes(csi, second.volume_id) == ["node-1"]


# -- unpublishing ----------------------------------------------------------------------------


async def test_controller_unpublish_removes_the_node(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))

    assert await published_nodes(attach, volume.volume_id) == []


async def test_controller_unpublish_twice_is_ok(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))
    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))

    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))

    assert await published_nodes(attach, volume.volume_id) == []


async def test_controller_unpublish_of_a_never_published_volume_is_ok(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")

    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))


async def test_controller_unpublish_of_an_unknown_volume_is_ok(attach: RunningDriver) -> None:
    # Spec: a volume that cannot be found can be regarded as unpublished: SHOULD be OK.
    await attach.controller.ControllerUnpublishVolume(unpublish_request("vol-missing"))


async def test_controller_unpublish_from_one_node_keeps_the_others(attach: RunningDriver) -> None:
    capability = mount_capability(MULTI_NODE_MULTI_WRITER)
    volume = await create_volume(attach, "pvc-rwx", capabilities=[capability])
    for node in ("node-1", "node-2"):
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, node, capability)
        )

    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id, "node-1"))

    assert await published_nodes(attach, volume.volume_id) == ["node-2"]


async def test_controller_unpublish_without_node_id_unpublishes_from_every_node(
    attach: RunningDriver,
) -> None:
    capability = mount_capability(MULTI_NODE_MULTI_WRITER)
    volume = await create_volume(attach, "pvc-rwx", capabilities=[capability])
    for node in ("node-1", "node-2"):
        await attach.controller.ControllerPublishVolume(
            publish_request(volume.volume_id, node, capability)
        )

    await attach.controller.ControllerUnpublishVolume(
        pb.ControllerUnpublishVolumeRequest(volume_id=volume.volume_id)
    )

    assert await published_nodes(attach, volume.volume_id) == []


async def test_single_node_volume_can_move_to_another_node_after_unpublish(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id, "node-1"))
    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id, "node-1"))

    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id, "node-2"))

    assert await published_nodes(attach, volume.volume_id) == ["node-2"]


# -- deleting published volumes ------------------------------------------------------------


async def test_delete_published_volume_is_failed_precondition_naming_the_node(
    attach: RunningDriver,
) -> None:
    volume = await create_volume(attach, "pvc-a")
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await attach.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "node-1")
    assert [e.volume.volume_id for e in await list_all(attach)] == [volume.volume_id]


async def test_delete_volume_after_unpublish_succeeds(attach: RunningDriver) -> None:
    volume = await create_volume(attach, "pvc-a", GiB)
    await attach.controller.ControllerPublishVolume(publish_request(volume.volume_id))
    await attach.controller.ControllerUnpublishVolume(unpublish_request(volume.volume_id))

    await attach.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert await list_all(attach) == []
