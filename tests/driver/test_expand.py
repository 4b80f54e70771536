"""ControllerExpandVolume and NodeExpandVolume."""

from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    GiB,
    MiB,
    assert_status,
    block_capability,
    capacity,
    create_volume,
    mount_capability,
    publish,
    stage,
    stats,
    usage,
)
from tests.driver.failing_store import FailingStore

BYTES = pb.VolumeUsage.Unit.BYTES


def expand_request(
    volume_id: str, required: int, limit: int = 0
) -> pb.ControllerExpandVolumeRequest:
    return pb.ControllerExpandVolumeRequest(
        volume_id=volume_id,
        capacity_range=pb.CapacityRange(required_bytes=required, limit_bytes=limit),
    )


def node_expand_request(
    volume_id: str, path: Path, required: int = 0, limit: int = 0
) -> pb.NodeExpandVolumeRequest:
    return pb.NodeExpandVolumeRequest(
        volume_id=volume_id,
        volume_path=str(path),
        capacity_range=pb.CapacityRange(required_bytes=required, limit_bytes=limit),
    )


async def size_of(csi: RunningDriver, volume_id: str) -> int:
    response = await csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=volume_id)
    )
    return response.volume.capacity_bytes


# -- ControllerExpandVolume -------------------------------------------------------------


async def test_controller_expand_grows_the_volume_and_asks_for_node_expansion(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-grow", GiB)

    response = await csi.controller.ControllerExpandVolume(
        expand_request(volume.volume_id, 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB
    assert response.node_expansion_required is True


async def test_controller_expand_is_visible_in_get_volume(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-grow", GiB)

    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 3 * GiB))

    assert await size_of(csi, volume.volume_id) == 3 * GiB


async def test_controller_expand_takes_the_growth_from_the_pool(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-grow", GiB, requisite=["node-1"])

    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 3 * GiB))

    assert (await capacity(csi, "node-1")).available_capacity == 7 * GiB


async def test_controller_expand_of_a_mirrored_volume_takes_twice_the_growth(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(
        csi, "pvc-m", GiB, requisite=["node-1"], parameters={"kind": "mirrored"}
    )

    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))

    assert (await capacity(csi, "node-1")).available_capacity == 10 * GiB - 4 * GiB


async def test_controller_expand_to_the_current_size_is_ok_and_changes_nothing(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-same", 2 * GiB, requisite=["node-1"])
    before = await capacity(csi, "node-1")

    response = await csi.controller.ControllerExpandVolume(
        expand_request(volume.volume_id, 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB
    assert await capacity(csi, "node-1") == before


async def test_controller_expand_to_a_smaller_size_is_ok_and_does_not_shrink(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-big", 2 * GiB)

    response = await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, GiB))

    assert response.capacity_bytes == 2 * GiB
    assert await size_of(csi, volume.volume_id) == 2 * GiB


async def test_controller_expand_repeated_is_ok_and_grows_only_once(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-twice", GiB, requisite=["node-1"])
    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))

    response = await csi.controller.ControllerExpandVolume(
        expand_request(volume.volume_id, 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB
    assert (await capacity(csi, "node-1")).available_capacity == 8 * GiB


async def test_controller_expand_beyond_the_pool_maximum_is_out_of_range(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-max", GiB, requisite=["node-1"])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 5 * GiB))

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "node-1", str(4 * GiB))
    assert await size_of(csi, volume.volume_id) == GiB


async def test_controller_expand_beyond_the_free_space_is_resource_exhausted(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-a", 3 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-b", 4 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-c", 3 * GiB, requisite=["node-1"])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 4 * GiB))

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "no room", volume.volume_id)


async def test_controller_expand_that_does_not_fit_keeps_the_volume_and_the_pool_as_they_were(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-a", 3 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-b", 4 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-c", 3 * GiB, requisite=["node-1"])
    before = await capacity(csi, "node-1")

    with pytest.raises(grpc.aio.AioRpcError):
        await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 4 * GiB))

    assert await size_of(csi, volume.volume_id) == 3 * GiB
    assert await capacity(csi, "node-1") == before


async def test_controller_expand_whose_commit_fails_keeps_the_volume_and_the_pool_as_they_were(
    start_driver: StartDriver,
) -> None:
    failing = FailingStore()
    csi = await start_driver(backend_store=failing.around)
    volume = await create_volume(csi, "pvc-a", GiB, requisite=["node-1"])
    before = await capacity(csi, "node-1")

    failing.fail("resize_volume")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))
    failing.heal()

    assert raised.value.code() is grpc.StatusCode.INTERNAL
    assert await size_of(csi, volume.volume_id) == GiB
    assert await capacity(csi, "node-1") == before
    # The space the failed expansion reserved was given back: a retry can take it.
    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))
    assert await size_of(csi, volume.volume_id) == 2 * GiB


async def test_controller_expand_in_a_contiguous_pool_moves_to_a_larger_extent(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(pools=[{"name": "lvm", "size": "10Gi", "allocation": "contiguous"}])
    first = await create_volume(csi, "pvc-1", 3 * GiB)
    await create_volume(csi, "pvc-2", 3 * GiB)

    await csi.controller.ControllerExpandVolume(expand_request(first.volume_id, 4 * GiB))

    report = await capacity(csi)
    assert report.available_capacity == 3 * GiB
    assert report.maximum_volume_size.value == 3 * GiB


async def test_controller_expand_with_required_above_limit_is_out_of_range(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-r", GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(
            expand_request(volume.volume_id, 3 * GiB, 2 * GiB)
        )

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "limit_bytes")


async def test_controller_expand_of_an_unknown_volume_is_not_found(csi: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand_request("vol-missing", 2 * GiB))

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_controller_expand_without_capacity_range_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-x")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(
            pb.ControllerExpandVolumeRequest(volume_id=volume.volume_id)
        )

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "capacity_range")


async def test_controller_expand_when_expansion_is_off_is_unimplemented(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"expansion": False})
    volume = await create_volume(csi, "pvc-x")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "expansion")


async def test_controller_expand_of_a_published_volume_is_ok(start_driver: StartDriver) -> None:
    # ONLINE expansion is advertised: published volumes MUST be expandable.
    csi = await start_driver(attach_required=True)
    volume = await create_volume(csi, "pvc-online", GiB)
    await csi.controller.ControllerPublishVolume(
        pb.ControllerPublishVolumeRequest(
            volume_id=volume.volume_id,
            node_id="node-1",
            volume_capability=mount_capability(),
        )
    )

    response = await csi.controller.ControllerExpandVolume(
        expand_request(volume.volume_id, 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB


async def test_controller_expand_of_a_block_volume_grows_its_backing_file(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, tmp_path / "staging", block_capability())

    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 8 * MiB))

    report = await stats(csi, volume.volume_id, tmp_path / "staging")
    assert usage(report, BYTES).total == 8 * MiB


# -- NodeExpandVolume -------------------------------------------------------------------


async def test_node_expand_of_a_staged_volume_reports_the_required_size(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")
    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))

    response = await csi.node.NodeExpandVolume(
        node_expand_request(volume.volume_id, tmp_path / "staging", 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB


async def test_node_expand_of_a_published_volume_reports_the_required_size(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")
    await publish(csi, volume.volume_id, tmp_path / "target", tmp_path / "staging")
    await csi.controller.ControllerExpandVolume(expand_request(volume.volume_id, 2 * GiB))

    response = await csi.node.NodeExpandVolume(
        node_expand_request(volume.volume_id, tmp_path / "target", 2 * GiB)
    )

    assert response.capacity_bytes == 2 * GiB


async def test_node_expand_twice_is_ok(csi: RunningDriver, tmp_path: Path) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")
    request = node_expand_request(volume.volume_id, tmp_path / "staging", 2 * GiB)
    await csi.node.NodeExpandVolume(request)

    response = await csi.node.NodeExpandVolume(request)

    assert response.capacity_bytes == 2 * GiB


async def test_node_expand_without_capacity_range_reports_the_block_volume_size(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, tmp_path / "staging", block_capability())

    response = await csi.node.NodeExpandVolume(
        pb.NodeExpandVolumeRequest(
            volume_id=volume.volume_id, volume_path=str(tmp_path / "staging")
        )
    )

    assert response.capacity_bytes == 4 * MiB


async def test_node_expand_of_a_block_volume_grows_its_device(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, tmp_path / "staging", block_capability())

    await csi.node.NodeExpandVolume(
        node_expand_request(volume.volume_id, tmp_path / "staging", 6 * MiB)
    )

    report = await stats(csi, volume.volume_id, tmp_path / "staging")
    assert usage(report, BYTES).total == 6 * MiB


async def test_node_expand_of_a_volume_not_on_this_node_is_not_found(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(
            node_expand_request(volume.volume_id, tmp_path / "staging", 2 * GiB)
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, volume.volume_id)


async def test_node_expand_at_a_path_where_the_volume_is_not_is_not_found(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(
            node_expand_request(volume.volume_id, tmp_path / "elsewhere", 2 * GiB)
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, str(tmp_path / "elsewhere"))


async def test_node_expand_with_required_above_limit_is_out_of_range(
    csi: RunningDriver, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(
            node_expand_request(volume.volume_id, tmp_path / "staging", 3 * GiB, 2 * GiB)
        )

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "limit_bytes")


async def test_node_expand_when_expansion_is_off_is_unimplemented(
    start_driver: StartDriver, tmp_path: Path
) -> None:
    # Spec (error scheme): an RPC "disabled in the Plugin's current mode of operation"
    # MUST return UNIMPLEMENTED; EXPAND_VOLUME is then not a node capability either.
    csi = await start_driver(controller={"expansion": False})
    volume = await create_volume(csi, "pvc-n", GiB)
    await stage(csi, volume.volume_id, tmp_path / "staging")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.node.NodeExpandVolume(
            node_expand_request(volume.volume_id, tmp_path / "staging", 2 * GiB)
        )

    assert_status(raised, grpc.StatusCode.UNIMPLEMENTED, "expansion")
