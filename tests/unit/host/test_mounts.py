"""BindMounter.is_mounted: statx's mount-root attribute, checked against the mount table."""

import os
from pathlib import Path

import pytest

from csi_mock.host.mounts import BindMounter, mount_points

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root"),
]


def test_the_kernel_answers_without_the_mount_table(tmp_path: Path) -> None:
    # Linux 5.8+ reports STATX_ATTR_MOUNT_ROOT; below that the fallback is the table.
    assert BindMounter()._mount_root(str(tmp_path)) is False


@pytest.fixture
def mounter() -> BindMounter:
    return BindMounter()


def test_a_bind_mounted_directory_is_mounted(mounter: BindMounter, tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    mounter.bind(str(source), str(target), readonly=False)
    try:
        assert mounter.is_mounted(str(target))
        assert str(target) in mount_points()
    finally:
        mounter.unmount(str(target))

    assert not mounter.is_mounted(str(target))
    assert str(target) not in mount_points()


def test_a_bind_mounted_file_is_mounted(mounter: BindMounter, tmp_path: Path) -> None:
    source, target = tmp_path / "device", tmp_path / "target"
    source.write_bytes(b"")
    target.touch()
    mounter.bind(str(source), str(target), readonly=True)
    try:
        assert mounter.is_mounted(str(target))
    finally:
        mounter.unmount(str(target))
    assert not mounter.is_mounted(str(target))


def test_a_directory_below_a_mount_is_not_a_mount(mounter: BindMounter, tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "inner").mkdir(parents=True)
    target.mkdir()
    mounter.bind(str(source), str(target), readonly=False)
    try:
        assert not mounter.is_mounted(str(target / "inner"))
    finally:
        mounter.unmount(str(target))


def test_plain_and_missing_paths_are_not_mounted(mounter: BindMounter, tmp_path: Path) -> None:
    assert not mounter.is_mounted(str(tmp_path))
    assert not mounter.is_mounted(str(tmp_path / "missing"))
    assert not mounter.is_mounted(str(tmp_path / "missing" / "deeper"))


def test_a_symlink_to_a_mount_is_not_a_mount_itself(mounter: BindMounter, tmp_path: Path) -> None:
    source, target, link = tmp_path / "source", tmp_path / "target", tmp_path / "link"
    source.mkdir()
    target.mkdir()
    link.symlink_to(target)
    mounter.bind(str(source), str(target), readonly=False)
    try:
        assert mounter.is_mounted(str(target))
        assert not mounter.is_mounted(str(link))  # As in the mount table.
        assert str(link) not in mount_points()
    finally:
        mounter.unmount(str(target))


def test_the_answer_agrees_with_the_mount_table_for_every_mount(mounter: BindMounter) -> None:
    for point in sorted(mount_points())[:200]:
        if Path(point).is_symlink():
            continue
        assert mounter.is_mounted(point), point
