"""GetCapacity: per segment, per kind, with fragmentation, and its refusals."""

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    NODE_KEY,
    GiB,
    assert_status,
    block_capability,
    capacity,
    create_volume,
    mount_capability,
    on_node,
)


async def test_capacity_of_a_segment_is_its_pool_size(csi: RunningDriver) -> None:
    node_1 = await capacity(csi, "node-1")
    node_2 = await capacity(csi, "node-2")

    assert node_1.available_capacity == 10 * GiB
    assert node_2.available_capacity == 20 * GiB


async def test_two_segments_report_their_own_maximum_volume_size(csi: RunningDriver) -> None:
    node_1 = await capacity(csi, "node-1")
    node_2 = await capacity(csi, "node-2")

    assert node_1.maximum_volume_size.value == 4 * GiB
    assert node_2.maximum_volume_size.value == 8 * GiB


async def test_capacity_without_topology_adds_up_every_pool(csi: RunningDriver) -> None:
    report = await capacity(csi)

    assert report.available_capacity == 30 * GiB
    assert report.maximum_volume_size.value == 8 * GiB


async def test_capacity_of_an_unknown_segment_is_zero(csi: RunningDriver) -> None:
    report = await capacity(csi, "node-9")

    assert report.available_capacity == 0
    assert report.maximum_volume_size.value == 0


async def test_capacity_of_a_location_with_more_labels_than_the_pool_counts_the_pool(
    csi: RunningDriver,
) -> None:
    request = pb.GetCapacityRequest(
        accessible_topology=pb.Topology(segments={NODE_KEY: "node-1", "zone": "z1"})
    )

    report = await csi.controller.GetCapacity(request)

    assert report.available_capacity == 10 * GiB


async def test_mirrored_kind_sees_half_the_capacity_of_striped(csi: RunningDriver) -> None:
    striped = await capacity(csi, "node-2", "striped")
    mirrored = await capacity(csi, "node-2", "mirrored")

    assert mirrored.available_capacity == striped.available_capacity // 2 == 10 * GiB


async def test_mirrored_kind_sees_half_the_largest_volume_of_an_unbounded_pool(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(pools=[{"name": "p", "size": "10Gi"}])

    striped = await capacity(csi, kind="striped")
    mirrored = await capacity(csi, kind="mirrored")

    assert striped.maximum_volume_size.value == 10 * GiB
    assert mirrored.maximum_volume_size.value == 5 * GiB


async def test_capacity_without_kind_is_that_of_the_default_kind(csi: RunningDriver) -> None:
    assert await capacity(csi, "node-1") == await capacity(csi, "node-1", "striped")


async def test_capacity_shrinks_by_what_a_volume_takes(csi: RunningDriver) -> None:
    await create_volume(csi, "pvc-a", 3 * GiB, requisite=["node-1"])

    report = await capacity(csi, "node-1")

    assert report.available_capacity == 7 * GiB


async def test_capacity_shrinks_by_twice_what_a_mirrored_volume_takes(csi: RunningDriver) -> None:
    await create_volume(
        csi, "pvc-m", 2 * GiB, requisite=["node-2"], parameters={"kind": "mirrored"}
    )

    striped = await capacity(csi, "node-2", "striped")
    mirrored = await capacity(csi, "node-2", "mirrored")

    assert striped.available_capacity == 16 * GiB
    assert mirrored.available_capacity == 8 * GiB


async def test_capacity_of_one_segment_is_unaffected_by_volumes_in_another(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-a", 3 * GiB, requisite=["node-1"])

    report = await capacity(csi, "node-2")

    assert report.available_capacity == 20 * GiB


async def test_maximum_volume_size_shrinks_to_the_free_space_of_a_nearly_full_pool(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-a", 4 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-b", 4 * GiB, requisite=["node-1"])

    report = await capacity(csi, "node-1")

    assert report.available_capacity == 2 * GiB
    assert report.maximum_volume_size.value == 2 * GiB


async def test_maximum_volume_size_is_not_reported_when_switched_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"report_maximum_volume_size": False})

    report = await capacity(csi, "node-1")

    assert not report.HasField("maximum_volume_size")
    assert report.available_capacity == 10 * GiB


async def test_capacity_is_the_same_for_block_and_mount_capabilities(csi: RunningDriver) -> None:
    reports = []
    for capability in (mount_capability(), block_capability()):
        request = pb.GetCapacityRequest(
            volume_capabilities=[capability], accessible_topology=on_node("node-1")
        )
        reports.append(await csi.controller.GetCapacity(request))

    assert reports[0] == reports[1]


# -- contiguous allocation ---------------------------------------------------------------


@pytest.fixture
async def contiguous(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(pools=[{"name": "lvm", "size": "10Gi", "allocation": "contiguous"}])


async def fragment(csi: RunningDriver) -> list[str]:
    """Allocate [0,3) [3,6) [6,9) Gi and free the middle: 4Gi free, largest extent 3Gi."""
    ids = [(await create_volume(csi, f"pvc-{i}", 3 * GiB)).volume_id for i in range(3)]
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=ids[1]))
    return ids


async def test_fragmented_contiguous_pool_reports_all_free_space_as_available(
    contiguous: RunningDriver,
) -> None:
    await fragment(contiguous)

    report = await capacity(contiguous)

    assert report.available_capacity == 4 * GiB


async def test_fragmented_contiguous_pool_limits_the_maximum_volume_to_the_largest_extent(
    contiguous: RunningDriver,
) -> None:
    await fragment(contiguous)

    report = await capacity(contiguous)

    assert report.maximum_volume_size.value == 3 * GiB


async def test_fragmented_contiguous_pool_refuses_a_volume_larger_than_the_largest_extent(
    contiguous: RunningDriver,
) -> None:
    await fragment(contiguous)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(contiguous, "pvc-4g", 4 * GiB)

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, str(3 * GiB))


async def test_fragmented_contiguous_pool_accepts_the_reported_maximum_volume_size(
    contiguous: RunningDriver,
) -> None:
    await fragment(contiguous)
    maximum = (await capacity(contiguous)).maximum_volume_size.value

    volume = await create_volume(contiguous, "pvc-max", maximum)

    assert volume.capacity_bytes == maximum


async def test_freeing_a_neighbour_coalesces_extents_into_a_larger_maximum(
    contiguous: RunningDriver,
) -> None:
    ids = await fragment(contiguous)
    await contiguous.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=ids[2]))

    report = await capacity(contiguous)

    assert report.maximum_volume_size.value == 7 * GiB


# -- refusals ----------------------------------------------------------------------------


async def test_capacity_with_an_unknown_parameter_is_invalid_argument_naming_it(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.GetCapacity(pb.GetCapacityRequest(parameters={"tier": "gold"}))

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "tier")


async def test_capacity_of_an_unknown_kind_is_invalid_argument_naming_it(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await capacity(csi, kind="raid6")

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "raid6")


async def test_capacity_accepts_the_co_metadata_parameters(csi: RunningDriver) -> None:
    report = await csi.controller.GetCapacity(
        pb.GetCapacityRequest(parameters={"csi.storage.k8s.io/pvc/name": "x"})
    )

    assert report.available_capacity == 30 * GiB


async def test_capacity_with_a_capability_without_access_type_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    capability = mount_capability()
    capability.ClearField("mount")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.GetCapacity(pb.GetCapacityRequest(volume_capabilities=[capability]))

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_capabilities[0]", "access_type")
