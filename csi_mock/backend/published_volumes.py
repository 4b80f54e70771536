"""What a node does with a volume it has staged or published besides mounting it: its
usage (NodeGetVolumeStats), growing it (NodeExpandVolume) and giving its data to a
mount group (VOLUME_MOUNT_GROUP)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from csi_mock.backend.node_records import lookup_path, record_at, recorded_path, size_of
from csi_mock.host.backing import Usage, usage_of
from csi_mock.host.loop import LoopDevices
from csi_mock.model.errors import InvalidArgument, NotFound, OutOfRange
from csi_mock.model.volume import AccessType
from csi_mock.store.interface import Store

# The node service's logger, as before these operations had a module of their own.
log = logging.getLogger("csi_mock.backend.node")


@dataclass(frozen=True)
class VolumeStats:
    total_bytes: int
    used_bytes: int
    available_bytes: int
    used_inodes: int
    total_inodes: int
    abnormal: str | None
    """Why the volume is unhealthy, or None."""
    block: bool = False
    """A raw block volume: inode counts mean nothing for it."""


async def volume_stats(
    store: Store, volume_id: str, volume_path: str, *, default_size: int
) -> VolumeStats:
    """Usage of a published or staged volume; the walk of its tree runs off the loop.

    A mount volume is a directory of a shared backend filesystem, so statvfs cannot
    tell its usage: its bytes and inodes are counted. A block volume reports the
    blocks its file has allocated.
    """
    if not volume_id:
        raise InvalidArgument("volume_id is required")
    record = record_at(store, volume_id, lookup_path(volume_path))
    if not os.path.exists(recorded_path(record)):
        raise NotFound(f"volume_path {volume_path} does not exist")
    total = size_of(record, default_size)
    block = record.capability.access_type is AccessType.BLOCK
    measured = await asyncio.to_thread(measure, Path(record.data_path))
    if measured is None:
        missing = f"backing data {record.data_path} is missing"
        return VolumeStats(total, 0, total, 0, 0, missing, block=block)
    usage, total_inodes = measured
    return VolumeStats(
        total_bytes=total,
        used_bytes=usage.used_bytes,
        available_bytes=max(0, total - usage.used_bytes),
        used_inodes=usage.used_inodes,
        total_inodes=total_inodes,
        abnormal=None,
        block=block,
    )


def expand(
    store: Store,
    loops: LoopDevices | None,
    volume_id: str,
    volume_path: str,
    required: int,
    limit: int,
    *,
    max_expansion_size: int | None,
    default_size: int,
) -> int:
    """NodeExpandVolume: grow a block volume's file (and its loop device) to
    ``required`` bytes and record the size; the size the volume has afterwards."""
    if not volume_id:
        raise InvalidArgument("volume_id is required")
    volume_path = lookup_path(volume_path)
    if required < 0 or limit < 0:
        raise InvalidArgument("capacity_range must not be negative")
    if limit and required > limit:
        raise OutOfRange(f"required_bytes {required} exceeds limit_bytes {limit}")
    cap = max_expansion_size
    if cap is not None and required > cap:
        raise OutOfRange(
            f"capacity_range.required_bytes {required} exceeds node.max_expansion_size {cap}"
        )
    record = record_at(store, volume_id, volume_path)
    if not required:
        return size_of(record, default_size)
    if record.capability.access_type is AccessType.BLOCK:
        path = Path(record.data_path)
        if path.is_file() and path.stat().st_size < required:
            try:
                os.truncate(path, required)
            except OSError as error:  # EFBIG: beyond the host filesystem's file size
                raise OutOfRange(
                    f"capacity_range.required_bytes {required}: {error.strerror}"
                ) from None
            if loops is not None:
                loops.refresh_size(path)
    if required > size_of(record, default_size):
        with store.transaction():
            store.set_node_volume_size(volume_id, required)
    return max(required, size_of(record, default_size))


def apply_mount_group(store: Store, volume_id: str, path: str, group: int) -> bool:
    """Make the data of the volume staged or published at path the group's
    (VOLUME_MOUNT_GROUP): its group, group read-write, and setgid so that new entries
    inherit the group. A bind mount takes no gid= option, so the data itself carries
    it. False when the host refuses (a driver without the privilege to chown)."""
    record = record_at(store, volume_id, lookup_path(path))
    data = Path(record.data_path)
    if record.capability.access_type is AccessType.BLOCK or not data.is_dir():
        return False
    try:
        os.chown(data, -1, group)
        mode = data.stat().st_mode
        data.chmod(stat.S_IMODE(mode) | stat.S_IRWXG | stat.S_ISGID)
    except PermissionError as error:
        log.info("volume %s: mount group %d not applied: %s", volume_id, group, error)
        return False
    return True


def measure(data_path: Path) -> tuple[Usage, int] | None:
    """A volume's usage and its filesystem's inode count; None when the data is gone."""
    try:
        return usage_of(data_path), os.statvfs(data_path).f_files
    except FileNotFoundError:
        return None
