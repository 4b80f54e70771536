"""Backing storage of volumes: a directory per mount volume, a sparse file per block volume."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from csi_mock.host.loop import LoopDevices
from csi_mock.model.volume import AccessType


@dataclass(frozen=True)
class Usage:
    used_bytes: int
    used_inodes: int


class BackingStore:
    """Volume data under one root directory, one entry per volume ID.

    IDs are validated by the caller; this class never joins untrusted names.
    """

    def __init__(self, root: Path, loops: LoopDevices | None = None) -> None:
        self.root = root
        self.loops = loops
        """Loop devices over block volumes' files, kept in step on resize and removal."""
        root.mkdir(parents=True, exist_ok=True)

    def path(self, volume_id: str) -> Path:
        return self.root / volume_id

    def exists(self, volume_id: str) -> bool:
        return self.path(volume_id).exists()

    def create(self, volume_id: str, access_type: AccessType, size: int) -> Path:
        """Create (idempotently) the backing entry of a volume."""
        path = self.path(volume_id)
        if access_type is AccessType.BLOCK:
            with open(path, "ab") as handle:
                if os.fstat(handle.fileno()).st_size < size:
                    handle.truncate(size)
        else:
            path.mkdir(exist_ok=True)
        return path

    def resize(self, volume_id: str, size: int) -> None:
        path = self.path(volume_id)
        if path.is_file() and path.stat().st_size < size:
            os.truncate(path, size)
            if self.loops is not None:
                self.loops.refresh_size(path)

    def remove(self, volume_id: str) -> None:
        path = self.path(volume_id)
        if self.loops is not None and path.is_file():
            self.loops.detach(path)  # Else the kernel keeps the deleted file's blocks.
        remove_tree(path)

    def ids(self) -> set[str]:
        return {entry.name for entry in os.scandir(self.root)}


def remove_tree(path: Path) -> None:
    """Remove a file or directory tree; a missing path is fine (idempotent)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass


def usage_of(path: Path) -> Usage:
    """Bytes and inodes used below `path` (a file counts its allocated blocks).

    FileNotFoundError when `path` itself is missing; entries removed while the tree is
    walked (a workload deleting files) are skipped.
    """
    if path.is_file():
        stat = path.stat()
        return Usage(used_bytes=stat.st_blocks * 512, used_inodes=1)
    used_bytes, inodes = 0, 1
    with os.scandir(path) as top:
        entries = list(top)
    pending = [entries]
    while pending:
        for entry in pending.pop():
            try:
                if entry.is_dir(follow_symlinks=False):
                    with os.scandir(entry.path) as below:
                        pending.append(list(below))
                else:
                    used_bytes += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
            inodes += 1
    return Usage(used_bytes=used_bytes, used_inodes=inodes)
