"""CreateVolume and DeleteVolume: sizes, placement, idempotency and their refusals."""

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    NODE_KEY,
    GiB,
    MiB,
    assert_status,
    block_capability,
    capacity,
    create_request,
    create_volume,
    list_all,
    mount_capability,
)

# -- creating --------------------------------------------------------------------------


async def test_create_volume_returns_an_id_and_the_requested_size(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-a", 2 * GiB)

    assert volume.volume_id
    assert volume.capacity_bytes == 2 * GiB


async def test_create_volume_without_capacity_range_gets_the_default_size(
    csi: RunningDriver,
) -> None:
    request = create_request("pvc-default")
    request.ClearField("capacity_range")

    response = await csi.controller.CreateVolume(request)

    assert response.volume.capacity_bytes == GiB


async def test_create_volume_without_capacity_range_fits_a_pools_smaller_maximum(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(pools=[{"name": "p", "size": "10Gi", "max_volume_size": "100Mi"}])
    advertised = (await capacity(csi)).maximum_volume_size.value
    request = create_request("pvc-default")
    request.ClearField("capacity_range")

    response = await csi.controller.CreateVolume(request)

    assert response.volume.capacity_bytes == advertised == 100 * MiB


async def test_create_volume_without_capacity_range_fits_a_pool_smaller_than_the_default(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(pools=[{"name": "p", "size": "512Mi"}])
    request = create_request("pvc-default")
    request.ClearField("capacity_range")

    response = await csi.controller.CreateVolume(request)

    assert response.volume.capacity_bytes == 512 * MiB
    assert (await capacity(csi)).available_capacity == 0


async def test_create_volume_with_only_a_limit_below_the_default_gets_the_limit(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-limited", 0, limit=100 * MiB)

    assert volume.capacity_bytes == 100 * MiB


async def test_create_volume_with_an_exact_size_gets_exactly_that_size(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-exact", 3 * MiB, limit=3 * MiB)

    assert volume.capacity_bytes == 3 * MiB


async def test_create_volume_reports_its_pool_segment_as_accessible_topology(
    csi: RunningDriver,
) -> None:
    volume = await create_volume(csi, "pvc-topo", GiB, requisite=["node-2"])

    assert [dict(t.segments) for t in volume.accessible_topology] == [{NODE_KEY: "node-2"}]


async def test_create_volume_reports_no_accessible_topology_when_topology_is_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(topology=False)

    volume = await create_volume(csi, "pvc-flat")

    assert list(volume.accessible_topology) == []


async def test_create_volume_is_placed_in_a_requisite_segment(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-req", GiB, requisite=["node-2"])

    assert volume.volume_context["csi-mock/pool"] == "node-2"


async def test_create_volume_tries_preferred_segments_first(csi: RunningDriver) -> None:
    volume = await create_volume(
        csi, "pvc-pref", GiB, requisite=["node-1", "node-2"], preferred=["node-2", "node-1"]
    )

    assert volume.volume_context["csi-mock/pool"] == "node-2"


async def test_create_volume_falls_back_to_another_requisite_segment_when_preferred_is_full(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-fill-1", 4 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-fill-2", 4 * GiB, requisite=["node-1"])

    volume = await create_volume(
        csi, "pvc-spill", 4 * GiB, requisite=["node-1", "node-2"], preferred=["node-1"]
    )

    assert volume.volume_context["csi-mock/pool"] == "node-2"


async def test_create_block_volume_records_its_access_type(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-block", GiB, capabilities=[block_capability()])

    assert volume.volume_context["csi-mock/access-type"] == "block"


async def test_create_volume_of_the_mirrored_kind_consumes_twice_its_size(
    csi: RunningDriver,
) -> None:
    await create_volume(
        csi, "pvc-mirror", GiB, requisite=["node-1"], parameters={"kind": "mirrored"}
    )

    report = await capacity(csi, "node-1", "striped")

    assert report.available_capacity == 10 * GiB - 2 * GiB


async def test_create_volume_accepts_the_co_metadata_parameters(csi: RunningDriver) -> None:
    volume = await create_volume(
        csi,
        "pvc-meta",
        GiB,
        parameters={"csi.storage.k8s.io/pvc/name": "data", "csi.storage.k8s.io/pvc/namespace": "x"},
    )

    assert volume.volume_id


# -- idempotency -------------------------------------------------------------------------


async def test_create_volume_with_same_name_and_same_arguments_returns_the_same_volume(
    csi: RunningDriver,
) -> None:
    first = await create_volume(csi, "pvc-same", GiB)
    second = await create_volume(csi, "pvc-same", GiB)

    assert second == first


async def test_create_volume_with_same_name_does_not_consume_capacity_twice(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-once", GiB, requisite=["node-1"])
    before = await capacity(csi, "node-1")

    await create_volume(csi, "pvc-once", GiB, requisite=["node-1"])

    assert await capacity(csi, "node-1") == before
    assert len(await list_all(csi)) == 1


async def test_create_volume_with_same_name_and_a_range_the_volume_fits_is_the_same_volume(
    csi: RunningDriver,
) -> None:
    first = await create_volume(csi, "pvc-range", 2 * GiB)

    second = await create_volume(csi, "pvc-range", GiB, limit=3 * GiB)

    assert second.volume_id == first.volume_id


async def test_create_volume_with_same_name_and_different_co_metadata_is_the_same_volume(
    csi: RunningDriver,
) -> None:
    first = await create_volume(csi, "pvc-md", GiB, parameters={"csi.storage.k8s.io/pvc/name": "a"})

    second = await create_volume(
        csi, "pvc-md", GiB, parameters={"csi.storage.k8s.io/pvc/name": "b"}
    )

    assert second.volume_id == first.volume_id


async def test_create_volume_with_same_name_and_different_size_is_already_exists(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-size", GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-size", 2 * GiB)

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "pvc-size", "required_bytes")


async def test_create_volume_with_same_name_and_a_smaller_limit_is_already_exists(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-lim", 2 * GiB)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-lim", GiB, limit=GiB)

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "limit_bytes")


async def test_create_volume_with_same_name_and_different_access_type_is_already_exists(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-type", GiB, capabilities=[mount_capability()])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-type", GiB, capabilities=[block_capability()])

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "access type")


async def test_create_volume_with_same_name_and_different_kind_is_already_exists(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-kind", GiB, parameters={"kind": "striped"})

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-kind", GiB, parameters={"kind": "mirrored"})

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "parameters")


async def test_create_volume_with_same_name_and_an_unreachable_requisite_is_already_exists(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-where", GiB, requisite=["node-1"])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-where", GiB, requisite=["node-2"])

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "requisite")


async def test_create_volume_after_delete_with_same_name_makes_a_new_volume(
    csi: RunningDriver,
) -> None:
    first = await create_volume(csi, "pvc-again", GiB)
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=first.volume_id))

    second = await create_volume(csi, "pvc-again", GiB)

    assert second.volume_id != first.volume_id


# -- refusals ----------------------------------------------------------------------------


async def test_create_volume_larger_than_every_pool_allows_is_out_of_range(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-huge", 9 * GiB)

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, str(9 * GiB))


async def test_create_volume_larger_than_the_requisite_pool_allows_is_out_of_range(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-big", 5 * GiB, requisite=["node-1"])

    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "node-1")


async def test_create_volume_in_an_unknown_segment_is_resource_exhausted(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-nowhere", GiB, requisite=["node-9"])

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "node-9")


async def test_create_volume_when_the_pool_is_full_is_resource_exhausted(
    csi: RunningDriver,
) -> None:
    await create_volume(csi, "pvc-f1", 4 * GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-f2", 4 * GiB, requisite=["node-1"])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-f3", 4 * GiB, requisite=["node-1"])

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "no allowed pool has room")


async def test_create_volume_with_mixed_block_and_mount_capabilities_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(
            csi, "pvc-mixed", GiB, capabilities=[mount_capability(), block_capability()]
        )

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "block and mount")


async def test_create_volume_from_a_content_source_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    request = create_request("pvc-clone")
    request.volume_content_source.volume.volume_id = "vol-0"

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.CreateVolume(request)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "volume_content_source")


async def test_create_volume_of_an_unknown_kind_is_invalid_argument_listing_the_kinds(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-raid", GiB, parameters={"kind": "raid5"})

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "raid5", "mirrored", "striped")


async def test_create_volume_with_an_unknown_parameter_is_invalid_argument_naming_it(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-param", GiB, parameters={"speed": "fast"})

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "speed")


async def test_create_volume_with_mutable_parameters_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    # Spec: mutable_parameters SHALL NOT be specified unless the SP has MODIFY_VOLUME;
    # an unsupported field is INVALID_ARGUMENT (general error table).
    request = create_request("pvc-mutable")
    request.mutable_parameters["iops"] = "1000"

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.CreateVolume(request)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "mutable_parameters")


# -- deleting ----------------------------------------------------------------------------


async def test_delete_volume_removes_it_from_the_list(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-del")

    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert await list_all(csi) == []


async def test_delete_volume_returns_its_capacity_to_the_pool(csi: RunningDriver) -> None:
    before = await capacity(csi, "node-1")
    volume = await create_volume(csi, "pvc-back", 3 * GiB, requisite=["node-1"])

    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    assert await capacity(csi, "node-1") == before


async def test_delete_volume_twice_is_ok(csi: RunningDriver) -> None:
    volume = await create_volume(csi, "pvc-twice")
    request = pb.DeleteVolumeRequest(volume_id=volume.volume_id)
    await csi.controller.DeleteVolume(request)

    await csi.controller.DeleteVolume(request)

    assert await list_all(csi) == []


async def test_delete_unknown_volume_is_ok(csi: RunningDriver) -> None:
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id="vol-doesnotexist"))


async def test_delete_volume_with_an_id_the_driver_never_issues_is_ok(csi: RunningDriver) -> None:
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id="../Not A Volume"))


async def test_delete_volume_leaves_other_volumes_alone(csi: RunningDriver) -> None:
    keep = await create_volume(csi, "pvc-keep")
    drop = await create_volume(csi, "pvc-drop")

    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=drop.volume_id))

    assert [e.volume.volume_id for e in await list_all(csi)] == [keep.volume_id]
