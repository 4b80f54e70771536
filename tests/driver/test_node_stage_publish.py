"""NodeStageVolume, NodePublishVolume, NodeUnpublishVolume and NodeUnstageVolume.

Directory mode (no mounts) first, including inline ephemeral volumes; then bind mode,
with real mounts checked through /proc/self/mountinfo (root only).
"""

import errno
from pathlib import Path

import grpc
import pytest

from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import BIND_NODE, RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    EPHEMERAL_KEY,
    MULTI_NODE_MULTI_WRITER,
    MULTI_NODE_READER_ONLY,
    SINGLE_NODE_MULTI_WRITER,
    SINGLE_NODE_SINGLE_WRITER,
    SINGLE_NODE_WRITER,
    MiB,
    assert_status,
    backing_entries,
    block_capability,
    create_volume,
    is_mount_point,
    mount_capability,
    mount_options,
    mount_points,
    publish,
    stage,
    staged_and_published,
    stats,
    unpublish,
    unstage,
    usage,
)
from tests.driver.failing_store import FailingStore

BYTES = pb.VolumeUsage.Unit.BYTES


# -- NodeStageVolume ---------------------------------------------------------------------


async def test_node_stage_creates_the_staging_directory(csi: RunningDriver, staging: Path) -> None:
    volume = await create_volume(csi, "pvc-s")

    await stage(csi, volume.volume_id, staging)

    assert staging.is_dir()


async def test_node_stage_twice_with_same_arguments_is_ok(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)

    await stage(csi, volume.volume_id, staging)


async def test_node_stage_at_a_second_path_is_already_exists(
    csi: RunningDriver, staging: Path, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, tmp_path / "other-staging")

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, str(staging))


async def test_node_stage_again_with_another_capability_is_already_exists(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging, mount_capability(SINGLE_NODE_WRITER))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging, mount_capability(MULTI_NODE_MULTI_WRITER))

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, "capability")


async def test_node_stage_of_an_unknown_volume_is_not_found(
    csi: RunningDriver, staging: Path
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, "vol-missing", staging)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_node_stage_of_a_deleted_volume_is_not_found(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-gone")
    await csi.controller.DeleteVolume(pb.DeleteVolumeRequest(volume_id=volume.volume_id))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, volume.volume_id)


async def test_node_stage_block_capability_for_a_mount_volume_is_failed_precondition(
    csi: RunningDriver, staging: Path
) -> None:
    # Spec (NodeStageVolume errors): "Exceeds capabilities" -> FAILED_PRECONDITION.
    volume = await create_volume(csi, "pvc-mnt", capabilities=[mount_capability()])

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging, block_capability())

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "block")


# -- NodeUnstageVolume -------------------------------------------------------------------


async def test_node_unstage_after_stage_allows_staging_again_elsewhere(
    csi: RunningDriver, staging: Path, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)

    await unstage(csi, volume.volume_id, staging)

    await stage(csi, volume.volume_id, tmp_path / "staging-2")


async def test_node_unstage_twice_is_ok(csi: RunningDriver, staging: Path) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)
    await unstage(csi, volume.volume_id, staging)

    await unstage(csi, volume.volume_id, staging)


async def test_node_unstage_of_a_never_staged_volume_is_ok(
    csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")

    await unstage(csi, volume.volume_id, staging)


async def test_node_unstage_at_a_path_where_the_volume_is_not_staged_is_ok(
    csi: RunningDriver, staging: Path, tmp_path: Path
) -> None:
    # Spec (NodeUnstageVolume): "If the volume corresponding to the volume_id is not
    # staged to the staging_target_path, the Plugin MUST reply 0 OK."
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)

    await unstage(csi, volume.volume_id, tmp_path / "never-staged-here")


async def test_node_unstage_while_published_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-s")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await unstage(csi, volume.volume_id, staging)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "published")


# -- NodePublishVolume -------------------------------------------------------------------


async def test_node_publish_creates_the_target_directory(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-p")
    await stage(csi, volume.volume_id, staging)

    await publish(csi, volume.volume_id, target, staging)

    assert target.is_dir()


async def test_node_publish_twice_with_same_arguments_is_ok(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-p")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    await publish(csi, volume.volume_id, target, staging)


async def test_node_publish_again_with_different_readonly_is_already_exists(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-p")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, staging, readonly=True)

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, str(target))


async def test_node_publish_again_with_different_capability_at_the_same_target_is_already_exists(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    capability = mount_capability(MULTI_NODE_MULTI_WRITER)
    volume = await create_volume(csi, "pvc-p", capabilities=[capability])
    await stage(csi, volume.volume_id, staging, capability)
    await publish(csi, volume.volume_id, target, staging, capability)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(
            csi, volume.volume_id, target, staging, mount_capability(MULTI_NODE_READER_ONLY)
        )

    assert_status(raised, grpc.StatusCode.ALREADY_EXISTS, str(target))


async def test_node_publish_of_an_unstaged_volume_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-p")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, staging)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "not staged")


async def test_node_publish_from_a_path_where_the_volume_is_not_staged_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    volume = await create_volume(csi, "pvc-p")
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, tmp_path / "elsewhere")

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "not staged")


async def test_node_publish_without_staging_target_path_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    # Spec (NodePublishVolume errors): "Staging target path not set" (STAGE_UNSTAGE_VOLUME
    # is advertised but no staging_target_path was set) -> FAILED_PRECONDITION.
    volume = await create_volume(csi, "pvc-p")
    await stage(csi, volume.volume_id, staging)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, None)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "staging_target_path")


async def test_node_publish_single_node_single_writer_at_a_second_target_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    capability = mount_capability(SINGLE_NODE_SINGLE_WRITER)
    volume = await create_volume(csi, "pvc-p", capabilities=[capability])
    await stage(csi, volume.volume_id, staging, capability)
    await publish(csi, volume.volume_id, target, staging, capability)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, tmp_path / "second", staging, capability)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, str(target))


async def test_node_publish_single_node_writer_at_a_second_target_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    # Spec (NodePublishVolume, second table): "Non MULTI_NODE_..." modes, which include
    # SINGLE_NODE_WRITER, at T1 != T2 -> FAILED_PRECONDITION.
    capability = mount_capability(SINGLE_NODE_WRITER)
    volume = await create_volume(csi, "pvc-p", capabilities=[capability])
    await stage(csi, volume.volume_id, staging, capability)
    await publish(csi, volume.volume_id, target, staging, capability)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, tmp_path / "second", staging, capability)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, str(target))


@pytest.mark.parametrize(
    "mode", [SINGLE_NODE_MULTI_WRITER, MULTI_NODE_MULTI_WRITER], ids=["snmw", "mnmw"]
)
async def test_node_publish_of_a_multi_writer_volume_at_a_second_target_is_ok(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path, mode: int
) -> None:
    capability = mount_capability(mode)
    volume = await create_volume(csi, "pvc-p", capabilities=[capability])
    await stage(csi, volume.volume_id, staging, capability)
    await publish(csi, volume.volume_id, target, staging, capability)

    await publish(csi, volume.volume_id, tmp_path / "second", staging, capability)

    assert (tmp_path / "second").is_dir()


async def test_node_publish_at_a_second_target_with_another_capability_is_failed_precondition(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    # Spec (NodePublishVolume): "COs SHOULD NOT call NodePublishVolume a second time with
    # a different volume_capability. If this happens, the Plugin SHOULD return
    # FAILED_PRECONDITION."
    volume = await create_volume(
        csi, "pvc-p", capabilities=[mount_capability(MULTI_NODE_MULTI_WRITER)]
    )
    await stage(csi, volume.volume_id, staging, mount_capability(MULTI_NODE_MULTI_WRITER))
    await publish(csi, volume.volume_id, target, staging, mount_capability(MULTI_NODE_MULTI_WRITER))

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(
            csi,
            volume.volume_id,
            tmp_path / "second",
            staging,
            mount_capability(MULTI_NODE_READER_ONLY),
            readonly=True,
        )

    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_node_publish_block_volume_creates_a_target_file(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-b", MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, staging, block_capability())

    await publish(csi, volume.volume_id, target, staging, block_capability())

    assert target.is_file()


# -- NodeUnpublishVolume -----------------------------------------------------------------


async def test_node_unpublish_removes_the_target_directory(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-u")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)

    await unpublish(csi, volume.volume_id, target)

    assert not target.exists()


async def test_node_unpublish_block_volume_removes_the_target_file(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-b", MiB, capabilities=[block_capability()])
    await stage(csi, volume.volume_id, staging, block_capability())
    await publish(csi, volume.volume_id, target, staging, block_capability())

    await unpublish(csi, volume.volume_id, target)

    assert not target.exists()


async def test_node_unpublish_twice_is_ok(csi: RunningDriver, staging: Path, target: Path) -> None:
    volume = await create_volume(csi, "pvc-u")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    await unpublish(csi, volume.volume_id, target)

    await unpublish(csi, volume.volume_id, target)


async def test_node_unpublish_of_a_never_published_target_is_ok(
    csi: RunningDriver, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-u")

    await unpublish(csi, volume.volume_id, target)


async def test_node_unpublish_of_one_target_keeps_the_other(
    csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    capability = mount_capability(MULTI_NODE_MULTI_WRITER)
    volume = await create_volume(csi, "pvc-u", capabilities=[capability])
    await stage(csi, volume.volume_id, staging, capability)
    await publish(csi, volume.volume_id, target, staging, capability)
    await publish(csi, volume.volume_id, tmp_path / "second", staging, capability)

    await unpublish(csi, volume.volume_id, target)

    assert (tmp_path / "second").is_dir()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await unstage(csi, volume.volume_id, staging)
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_node_unstage_after_every_unpublish_is_ok(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-u")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    await unpublish(csi, volume.volume_id, target)

    await unstage(csi, volume.volume_id, staging)


# -- without STAGE_UNSTAGE_VOLUME ----------------------------------------------------------


@pytest.fixture
async def no_stage(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(node={"id": "node-1", "mount": "directory", "stage_unstage": False})


async def test_node_publish_needs_no_staging_when_stage_unstage_is_off(
    no_stage: RunningDriver, target: Path
) -> None:
    volume = await create_volume(no_stage, "pvc-ns")

    await publish(no_stage, volume.volume_id, target, None)

    assert target.is_dir()


async def test_node_publish_of_an_unknown_volume_is_not_found_when_stage_unstage_is_off(
    no_stage: RunningDriver, target: Path
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(no_stage, "vol-missing", target, None)

    assert_status(raised, grpc.StatusCode.NOT_FOUND, "vol-missing")


async def test_node_stage_is_unimplemented_when_stage_unstage_is_off(
    no_stage: RunningDriver, staging: Path
) -> None:
    # Spec (error scheme): an RPC "disabled in the Plugin's current mode of operation"
    # MUST return UNIMPLEMENTED.
    volume = await create_volume(no_stage, "pvc-ns")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(no_stage, volume.volume_id, staging)

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- attach on: the node needs ControllerPublishVolume's publish_context -----------------


async def test_node_stage_refuses_a_volume_not_controller_published_when_attach_is_on(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(attach_required=True)
    volume = await create_volume(csi, "pvc-att")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(csi, volume.volume_id, staging)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "ControllerPublishVolume")


async def test_node_stage_accepts_the_publish_context_of_controller_publish(
    start_driver: StartDriver, staging: Path
) -> None:
    csi = await start_driver(attach_required=True)
    volume = await create_volume(csi, "pvc-att")
    published = await csi.controller.ControllerPublishVolume(
        pb.ControllerPublishVolumeRequest(
            volume_id=volume.volume_id, node_id="node-1", volume_capability=mount_capability()
        )
    )

    await stage(csi, volume.volume_id, staging, publish_context=published.publish_context)

    assert staging.is_dir()


async def test_node_publish_refuses_a_volume_not_controller_published_without_staging(
    start_driver: StartDriver, target: Path
) -> None:
    csi = await start_driver(
        attach_required=True, node={"id": "node-1", "mount": "directory", "stage_unstage": False}
    )
    volume = await create_volume(csi, "pvc-att")

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, volume.volume_id, target, None)

    assert_status(raised, grpc.StatusCode.FAILED_PRECONDITION, "ControllerPublishVolume")


# -- inline ephemeral volumes --------------------------------------------------------------

EPHEMERAL = {EPHEMERAL_KEY: "true", "size": "1Mi"}


def ephemeral_storage(csi: RunningDriver) -> list[str]:
    return sorted(backing_entries(csi.config.state_dir / "ephemeral"))


async def test_inline_ephemeral_volume_is_created_on_publish_without_staging(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    assert target.is_dir()
    assert len(ephemeral_storage(csi)) == 1


async def test_inline_ephemeral_volume_has_the_size_from_its_volume_context(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    report = await stats(csi, "csi-eph-1", target)

    assert usage(report, BYTES).total == MiB


async def test_inline_ephemeral_volume_is_not_a_controller_volume(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    listed = await csi.controller.ListVolumes(pb.ListVolumesRequest())

    assert list(listed.entries) == []


async def test_inline_ephemeral_volume_is_removed_on_unpublish(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    await unpublish(csi, "csi-eph-1", target)

    assert not target.exists()
    assert ephemeral_storage(csi) == []
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, "csi-eph-1", target)
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_inline_ephemeral_data_left_by_an_interrupted_unpublish_is_removed_at_start(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)
    await publish(csi, "csi-eph-2", target.with_name("other"), None, volume_context=EPHEMERAL)
    node = csi.driver.node
    assert node is not None
    # A crash between the unpublish's commit and the removal of the data it moved aside:
    (publication,) = csi.driver.store.publications_of_volume("csi-eph-1")
    node.ephemeral.retire(Path(publication.data_path).name)
    with csi.driver.store.transaction():
        csi.driver.store.remove_publication("csi-eph-1", str(target))

    node.load()

    assert len(ephemeral_storage(csi)) == 1
    report = await stats(csi, "csi-eph-2", target.with_name("other"))
    assert usage(report, BYTES).total == MiB


async def test_inline_ephemeral_data_without_a_row_is_moved_aside_not_deleted(
    csi: RunningDriver, target: Path
) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)
    node = csi.driver.node
    assert node is not None
    (publication,) = csi.driver.store.publications_of_volume("csi-eph-1")
    (Path(publication.data_path) / "kept").write_text("data")
    with csi.driver.store.transaction():  # A database that lost the row.
        csi.driver.store.remove_publication("csi-eph-1", str(target))

    node.load()

    (parked,) = [e for e in ephemeral_storage(csi)]
    assert parked.startswith("lost+found/" + Path(publication.data_path).name)
    assert (node.ephemeral.root / parked / "kept").read_text() == "data"


async def test_inline_ephemeral_publish_twice_is_ok(csi: RunningDriver, target: Path) -> None:
    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    await publish(csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)

    assert len(ephemeral_storage(csi)) == 1


async def test_inline_ephemeral_block_volume_is_invalid_argument(
    csi: RunningDriver, target: Path
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, "csi-eph-1", target, None, block_capability(), volume_context=EPHEMERAL)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "mount access type")


async def test_inline_ephemeral_volume_with_a_bad_size_is_invalid_argument(
    csi: RunningDriver, target: Path
) -> None:
    context = {EPHEMERAL_KEY: "true", "size": "lots"}

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(csi, "csi-eph-1", target, None, volume_context=context)

    assert_status(raised, grpc.StatusCode.INVALID_ARGUMENT, "size", "lots")
    assert ephemeral_storage(csi) == []


# -- bind mode: real mounts -----------------------------------------------------------------


@pytest.mark.root
async def test_bind_stage_mounts_the_volume_at_the_staging_path(
    bind_csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")
    await stage(bind_csi, volume.volume_id, staging)
    try:
        assert is_mount_point(staging)
    finally:
        await unstage(bind_csi, volume.volume_id, staging)


@pytest.mark.root
async def test_bind_unstage_unmounts_the_staging_path(
    bind_csi: RunningDriver, staging: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")
    await stage(bind_csi, volume.volume_id, staging)

    await unstage(bind_csi, volume.volume_id, staging)

    assert not is_mount_point(staging)


@pytest.mark.root
async def test_bind_stage_whose_commit_fails_leaves_nothing_mounted(
    start_driver: StartDriver, staging: Path
) -> None:
    failing = FailingStore()
    bind_csi = await start_driver(node=BIND_NODE, backend_store=failing.around)
    volume = await create_volume(bind_csi, "pvc-bind")

    failing.fail("add_staging")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stage(bind_csi, volume.volume_id, staging)

    assert raised.value.code() == grpc.StatusCode.INTERNAL
    assert not is_mount_point(staging)


@pytest.mark.root
async def test_bind_publish_whose_commit_fails_leaves_nothing_mounted(
    start_driver: StartDriver, staging: Path, target: Path
) -> None:
    failing = FailingStore()
    bind_csi = await start_driver(node=BIND_NODE, backend_store=failing.around)
    volume = await create_volume(bind_csi, "pvc-bind")
    await stage(bind_csi, volume.volume_id, staging)

    failing.fail("add_publication")
    try:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await publish(bind_csi, volume.volume_id, target, staging)
        assert raised.value.code() == grpc.StatusCode.INTERNAL
        assert not is_mount_point(target)
    finally:
        failing.heal()
        await unstage(bind_csi, volume.volume_id, staging)


@pytest.mark.root
async def test_bind_publish_mounts_the_volume_at_the_target(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")

    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        assert is_mount_point(target)
        assert "rw" in mount_options(target)


@pytest.mark.root
async def test_bind_unpublish_unmounts_and_removes_the_target(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")
    await stage(bind_csi, volume.volume_id, staging)
    await publish(bind_csi, volume.volume_id, target, staging)

    await unpublish(bind_csi, volume.volume_id, target)
    await unstage(bind_csi, volume.volume_id, staging)

    assert not is_mount_point(target)
    assert not target.exists()
    assert not is_mount_point(staging)


@pytest.mark.root
async def test_bind_stage_and_publish_twice_do_not_stack_mounts(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")
    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        await stage(bind_csi, volume.volume_id, staging)
        await publish(bind_csi, volume.volume_id, target, staging)

        points = mount_points()
        assert points.count(str(staging)) == 1
        assert points.count(str(target)) == 1


@pytest.mark.root
async def test_bind_files_written_at_the_target_are_in_the_staged_volume(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")

    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        (target / "hello.txt").write_text("hello")

        assert (staging / "hello.txt").read_text() == "hello"


@pytest.mark.root
async def test_bind_data_survives_unpublish_and_unstage(
    bind_csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-bind")
    async with staged_and_published(bind_csi, volume.volume_id, staging, target):
        (target / "keep.txt").write_text("kept")

    again = tmp_path / "pods" / "again"
    async with staged_and_published(bind_csi, volume.volume_id, staging, again):
        assert (again / "keep.txt").read_text() == "kept"


@pytest.mark.root
async def test_bind_volumes_do_not_share_data(bind_csi: RunningDriver, tmp_path: Path) -> None:
    first = await create_volume(bind_csi, "pvc-1")
    second = await create_volume(bind_csi, "pvc-2")
    t1, t2 = tmp_path / "t1", tmp_path / "t2"

    async with (
        staged_and_published(bind_csi, first.volume_id, tmp_path / "s1", t1),
        staged_and_published(bind_csi, second.volume_id, tmp_path / "s2", t2),
    ):
        (t1 / "only-in-first").write_text("x")

        assert not (t2 / "only-in-first").exists()


@pytest.mark.root
async def test_bind_readonly_publish_refuses_writes(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-ro")

    async with staged_and_published(bind_csi, volume.volume_id, staging, target, readonly=True):
        with pytest.raises(OSError) as raised:
            (target / "nope.txt").write_text("x")

        assert raised.value.errno == errno.EROFS
        assert "ro" in mount_options(target)


@pytest.mark.root
async def test_bind_readonly_publish_still_shows_the_data(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-ro")
    await stage(bind_csi, volume.volume_id, staging)
    try:
        (staging / "data.txt").write_text("visible")
        await publish(bind_csi, volume.volume_id, target, staging, readonly=True)
        try:
            assert (target / "data.txt").read_text() == "visible"
        finally:
            await unpublish(bind_csi, volume.volume_id, target)
    finally:
        await unstage(bind_csi, volume.volume_id, staging)


@pytest.mark.root
async def test_bind_block_volume_in_file_mode_is_published_as_a_file_of_the_volume_size(
    start_driver: StartDriver, staging: Path, target: Path
) -> None:
    csi = await start_driver(node={"id": "node-1", "mount": "bind", "block_device": "file"})
    volume = await create_volume(csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])

    async with staged_and_published(csi, volume.volume_id, staging, target, block_capability()):
        assert is_mount_point(target)
        assert target.is_file()
        assert target.stat().st_size == 4 * MiB


@pytest.mark.root
async def test_bind_block_volume_keeps_bytes_written_through_the_target(
    bind_csi: RunningDriver, staging: Path, target: Path, tmp_path: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-blk", 4 * MiB, capabilities=[block_capability()])
    async with staged_and_published(
        bind_csi, volume.volume_id, staging, target, block_capability()
    ):
        with open(target, "r+b") as device:
            device.seek(MiB)
            device.write(b"block-data")

    again = tmp_path / "pods" / "again"
    async with staged_and_published(bind_csi, volume.volume_id, staging, again, block_capability()):
        with open(again, "rb") as device:
            device.seek(MiB)
            assert device.read(10) == b"block-data"


@pytest.mark.root
async def test_bind_block_unpublish_unmounts_and_removes_the_target_file(
    bind_csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(bind_csi, "pvc-blk", MiB, capabilities=[block_capability()])
    await stage(bind_csi, volume.volume_id, staging, block_capability())
    await publish(bind_csi, volume.volume_id, target, staging, block_capability())

    await unpublish(bind_csi, volume.volume_id, target)
    await unstage(bind_csi, volume.volume_id, staging)

    assert not is_mount_point(target)
    assert not target.exists()


@pytest.mark.root
async def test_bind_inline_ephemeral_volume_is_mounted_at_the_target(
    bind_csi: RunningDriver, target: Path
) -> None:
    await publish(bind_csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)
    try:
        assert is_mount_point(target)
    finally:
        await unpublish(bind_csi, "csi-eph-1", target)


@pytest.mark.root
async def test_bind_inline_ephemeral_volume_data_is_gone_after_unpublish(
    bind_csi: RunningDriver, target: Path
) -> None:
    await publish(bind_csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)
    try:
        (target / "scratch.txt").write_text("temporary")
    finally:
        await unpublish(bind_csi, "csi-eph-1", target)
    assert not is_mount_point(target)

    await publish(bind_csi, "csi-eph-1", target, None, volume_context=EPHEMERAL)
    try:
        assert list(target.iterdir()) == []
    finally:
        await unpublish(bind_csi, "csi-eph-1", target)
