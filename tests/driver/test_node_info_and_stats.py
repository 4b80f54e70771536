"""NodeGetInfo, NodeGetCapabilities and NodeGetVolumeStats."""

import shutil
from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    NODE_KEY,
    GiB,
    KiB,
    MiB,
    assert_status,
    block_capability,
    create_volume,
    publish,
    stage,
    staged_and_published,
    stats,
    unpublish,
    usage,
)

BYTES = pb.VolumeUsage.Unit.BYTES
INODES = pb.VolumeUsage.Unit.INODES
RPC = pb.NodeServiceCapability.RPC


# -- NodeGetInfo -----------------------------------------------------------------------


async def test_node_info_reports_the_configured_node_id(csi: RunningDriver) -> None:
    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert info.node_id == "node-1"


async def test_node_info_reports_the_configured_max_volumes_per_node(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(node={"id": "node-1", "mount": "directory", "max_volumes_per_node": 7})

    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert info.max_volumes_per_node == 7


async def test_node_info_reports_no_volume_limit_by_default(csi: RunningDriver) -> None:
    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert info.max_volumes_per_node == 0


async def test_node_info_reports_the_node_topology_segment(csi: RunningDriver) -> None:
    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert dict(info.accessible_topology.segments) == {NODE_KEY: "node-1"}


async def test_node_info_reports_a_configured_node_segment(start_driver: StartDriver) -> None:
    segment = {NODE_KEY: "node-2", "topology.csi-mock.example/zone": "z1"}
    csi = await start_driver(node={"id": "node-2", "mount": "directory", "segment": segment})

    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert info.node_id == "node-2"
    assert dict(info.accessible_topology.segments) == segment


async def test_node_info_reports_no_topology_when_topology_is_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(topology=False)

    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert not info.HasField("accessible_topology")


async def test_node_topology_reaches_the_volumes_created_for_it(csi: RunningDriver) -> None:
    info = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    volume = await create_volume(
        csi, "pvc-here", GiB, requisite=[info.accessible_topology.segments[NODE_KEY]]
    )

    assert [dict(t.segments) for t in volume.accessible_topology] == [
        dict(info.accessible_topology.segments)
    ]


# -- NodeGetCapabilities ----------------------------------------------------------------


async def node_rpcs(csi: RunningDriver) -> set[int]:
    response = await csi.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    return {c.rpc.type for c in response.capabilities}


async def test_node_capabilities_of_the_default_driver(csi: RunningDriver) -> None:
    assert await node_rpcs(csi) == {
        RPC.STAGE_UNSTAGE_VOLUME,
        RPC.GET_VOLUME_STATS,
        RPC.VOLUME_CONDITION,
        RPC.SINGLE_NODE_MULTI_WRITER,
        RPC.EXPAND_VOLUME,
    }


async def test_node_capabilities_omit_stage_unstage_when_it_is_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(node={"id": "node-1", "mount": "directory", "stage_unstage": False})

    assert RPC.STAGE_UNSTAGE_VOLUME not in await node_rpcs(csi)


async def test_node_capabilities_omit_expand_volume_when_expansion_is_off(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(controller={"expansion": False})

    assert RPC.EXPAND_VOLUME not in await node_rpcs(csi)


# -- NodeGetVolumeStats -----------------------------------------------------------------


async def test_stats_of_a_published_volume_report_bytes_inodes_and_a_healthy_condition(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-st", GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    report = await stats(csi, volume.volume_id, target)

    in_bytes = usage(report, BYTES)
    assert in_bytes.total == GiB
    assert in_bytes.available == in_bytes.total - in_bytes.used
    assert usage(report, INODES).total > 0
    assert report.volume_condition.abnormal is False


async def test_stats_at_the_staging_path_are_reported_too(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-st", GiB)
    await stage(csi, volume.volume_id, staging)

    report = await stats(csi, volume.volume_id, staging)

    assert usage(report, BYTES).total == GiB


async def test_stats_total_of_a_mount_volume_is_its_capacity(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    # Spec (VolumeUsage): `total` is the total capacity of the volume in the unit.
    volume = await create_volume(csi, "pvc-2g", 2 * GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    report = await stats(csi, volume.volume_id, target)

    assert usage(report, BYTES).total == 2 * GiB


async def test_stats_total_of_a_block_volume_is_its_capacity(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-blk", 3 * MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, staging, block_capability())
    await publish(csi, volume.volume_id, target, staging, block_capability())

    report = await stats(csi, volume.volume_id, target)

    assert usage(report, BYTES).total == 3 * MiB


async def test_stats_report_an_abnormal_condition_when_the_volume_data_is_gone(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-lost", GiB)
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    # Data lost behind the driver's back (a disk gone, a hand in the backend directory):
    # DeleteVolume itself refuses a volume in use.
    shutil.rmtree(csi.config.volumes_dir / volume.volume_id)

    report = await stats(csi, volume.volume_id, target)

    assert report.volume_condition.abnormal is True
    assert "missing" in report.volume_condition.message


async def test_stats_of_an_unknown_volume_is_not_found(csi: RunningDriver, target: Path) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, "vol-missing", target)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_stats_of_a_volume_not_on_this_node_is_not_found(
    csi: RunningDriver, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-away")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, volume.volume_id, target)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, volume.volume_id)


async def test_stats_at_a_path_where_the_volume_is_not_is_not_found(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-st")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, volume.volume_id, tmp_path / "elsewhere")

    assert_status(raised, grpc.StatusCode.NOT_FOUND, str(tmp_path / "elsewhere"))


async def test_stats_at_a_relative_path_is_not_found(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    # What csi-sanity checks ("some/path"): a path the volume was never published at.
    volume = await create_volume(csi, "pvc-st")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, volume.volume_id, "some/path")

    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_stats_after_unpublish_are_not_found_at_the_old_target(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-st")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    await unpublish(csi, volume.volume_id, target)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, volume.volume_id, target)

    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.root
async def test_stats_report_real_usage_after_writing_a_file_into_the_published_directory(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-usage", GiB)
    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        before = await stats(bind_csi, volume.volume_id, target)

        (target / "payload.bin").write_bytes(b"x" * (256 * KiB))
        after = await stats(bind_csi, volume.volume_id, target)

        assert usage(after, BYTES).used - usage(before, BYTES).used == 256 * KiB
        assert usage(after, BYTES).available == usage(before, BYTES).available - 256 * KiB
        assert usage(after, INODES).used == usage(before, INODES).used + 1


@pytest.mark.root
async def test_stats_at_the_staging_path_see_what_was_written_at_the_target(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-usage", GiB)
    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        (target / "payload.bin").write_bytes(b"x" * (64 * KiB))

        at_staging = await stats(bind_csi, volume.volume_id, staging)

        assert usage(at_staging, BYTES).used >= 64 * KiB
