"""ListVolumes (with pagination) and ControllerGetVolume."""

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver
from tests.driver.csi_helpers import GiB, MiB, assert_status, create_volume, list_all


async def make_volumes(csi: RunningDriver, count: int) -> list[str]:
    return [(await create_volume(csi, f"pvc-{i}", MiB)).volume_id for i in range(count)]


async def page(csi: RunningDriver, max_entries: int, token: str = "") -> pb.ListVolumesResponse:
    return await csi.controller.ListVolumes(
        pb.ListVolumesRequest(max_entries=max_entries, starting_token=token)
    )


# -- ListVolumes ---------------------------------------------------------------------------


async def test_list_volumes_of_a_fresh_driver_is_empty(csi: RunningDriver) -> None:
    response = await csi.controller.ListVolumes(pb.ListVolumesRequest())

    assert list(response.entries) == []
    assert response.next_token == ""


async def test_list_volumes_reports_every_volume_with_its_size_and_context(
    csi: RunningDriver,
) -> None:
    created = await create_volume(csi, "pvc-one", 2 * GiB, requisite=["node-2"])

    (entry,) = await list_all(csi)

    assert entry.volume == created


async def test_list_volumes_without_max_entries_returns_everything_in_one_page(
    csi: RunningDriver,
) -> None:
    ids = await make_volumes(csi, 5)

    response = await page(csi, 0)

    assert [e.volume.volume_id for e in response.entries] == ids
    assert response.next_token == ""


async def test_list_volumes_returns_at_most_max_entries_and_a_next_token(
    csi: RunningDriver,
) -> None:
    await make_volumes(csi, 5)

    response = await page(csi, 2)

    assert len(response.entries) == 2
    assert response.next_token != ""


async def test_list_volumes_pages_cover_every_volume_exactly_once(csi: RunningDriver) -> None:
    ids = await make_volumes(csi, 5)
    seen: list[str] = []
    sizes: list[int] = []
    token = ""

    while True:
        response = await page(csi, 2, token)
        seen += [e.volume.volume_id for e in response.entries]
        sizes.append(len(response.entries))
        token = response.next_token
        if not token:
            break

    assert seen == ids
    assert sizes == [2, 2, 1]


async def test_list_volumes_with_max_entries_equal_to_the_count_has_no_next_token(
    csi: RunningDriver,
) -> None:
    await make_volumes(csi, 3)

    response = await page(csi, 3)

    assert len(response.entries) == 3
    assert response.next_token == ""


async def test_list_volumes_next_token_survives_deleting_the_listed_volumes(
    csi: RunningDriver,
) -> None:
    ids = await make_volumes(csi, 4)
    first = await page(csi, 2)
    for volume_id in ids[:2]:
        await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume_id))

    rest = await page(csi, 2, first.next_token)

    assert [e.volume.volume_id for e in rest.entries] == ids[2:]


@pytest.mark.parametrize("token", ["not-a-token", "-1", "999", " 1"])
async def test_list_volumes_with_an_invalid_starting_token_is_aborted(
    csi: RunningDriver, token: str
) -> None:
    await make_volumes(csi, 2)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await page(csi, 1, token)

    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_list_volumes_with_a_superscript_digit_token_is_aborted(csi: RunningDriver) -> None:
    await make_volumes(csi, 2)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await page(csi, 1, "²")

    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_list_volumes_with_a_token_of_5000_digits_is_aborted(csi: RunningDriver) -> None:
    # Past Python's 4,300-digit int conversion limit, which once made this INTERNAL.
    await make_volumes(csi, 2)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await page(csi, 1, "1" * 5000)

    assert_status(raised, grpc.StatusCode.ABORTED, "starting_token")


async def test_list_volumes_next_token_survives_deleting_the_newest_volumes(
    csi: RunningDriver,
) -> None:
    # The token names the last volume of the first page; it and every newer one go.
    ids = await make_volumes(csi, 4)
    first = await page(csi, 2)
    for volume_id in ids[1:]:
        await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume_id))

    rest = await page(csi, 2, first.next_token)

    assert list(rest.entries) == []
    assert rest.next_token == ""


async def test_list_volumes_next_token_of_deleted_volumes_lists_the_newer_ones(
    csi: RunningDriver,
) -> None:
    ids = await make_volumes(csi, 3)
    first = await page(csi, 2)
    for volume_id in ids:
        await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume_id))
    later = (await create_volume(csi, "pvc-later", MiB)).volume_id

    rest = await page(csi, 2, first.next_token)

    assert [e.volume.volume_id for e in rest.entries] == [later]


async def test_list_volumes_with_negative_max_entries_is_invalid_argument(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await page(csi, -1)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "max_entries")


# -- ControllerGetVolume -----------------------------------------------------------------------


async def test_get_volume_returns_the_volume_as_created(csi: RunningDriver) -> None:
    created = await create_volume(csi, "pvc-get", 2 * GiB)

    response = await csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id=created.volume_id)
    )

    assert response.volume == created
    assert response.HasField("status")
    assert list(response.status.published_node_ids) == []


async def test_get_volume_of_an_unknown_volume_is_not_found(csi: RunningDriver) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerGetVolume(
            pb.ControllerGetVolumeRequest(volume_id="vol-missing")
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_get_volume_of_a_deleted_volume_is_not_found(csi: RunningDriver) -> None:
    created = await create_volume(csi, "pvc-gone")
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=created.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerGetVolume(
            pb.ControllerGetVolumeRequest(volume_id=created.volume_id)
        )

    assert_status(raised, grpc.StatusCode.NOT_FOUND, created.volume_id)


async def test_get_volume_with_an_id_the_driver_never_issues_is_not_found(
    csi: RunningDriver,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.ControllerGetVolume(
            pb.ControllerGetVolumeRequest(volume_id="../../etc/passwd")
        )

    assert raised.value.code() == grpc.StatusCode.NOT_FOUND
