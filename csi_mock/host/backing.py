"""Backing storage of volumes: a directory per mount volume, a sparse file per block volume.

Every entry the driver writes moves through three places under one root, so that a
record missing from the database is never a reason to delete data:

- ``.pending/<id>``: written before its row commits (CreateVolume, a copy);
- ``<id>``: live, its row committed;
- ``.retired/<id>``: moved aside before its row is deleted, removed after.

At start-up ``reconcile()`` finishes what a crash cut short, in the direction the
database decides, and an entry no row explains is moved to ``lost+found/``, never
removed. The names cannot collide with IDs, which start with a letter or digit.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from csi_mock.host.loop import LoopDeviceError, LoopDevices
from csi_mock.host.mount_table import MountTable
from csi_mock.model.volume import AccessType

log = logging.getLogger(__name__)

PENDING_DIR = ".pending"
RETIRED_DIR = ".retired"
LOST_DIR = "lost+found"


@dataclass(frozen=True)
class Usage:
    used_bytes: int
    used_inodes: int


@dataclass
class Reconciliation:
    """What start-up did to the backing entries."""

    promoted: list[str] = field(default_factory=list)
    """Written and committed, not yet moved into place: moved now."""
    restored: list[str] = field(default_factory=list)
    """Moved aside for a delete that never committed: moved back."""
    discarded: list[str] = field(default_factory=list)
    """The driver's own unfinished writes and finished deletes: removed."""
    parked: list[str] = field(default_factory=list)
    """Live entries without a row: moved to lost+found (their paths there)."""


class BackingStore:
    """Volume data under one root directory, one entry per volume ID.

    IDs are validated by the caller; this class never joins untrusted names.
    """

    def __init__(self, root: Path, loops: LoopDevices | None = None) -> None:
        self.root = root
        self.loops = loops
        """Loop devices over block volumes' files, kept in step on resize and removal."""
        root.mkdir(parents=True, exist_ok=True)
        self._pending = root / PENDING_DIR
        self._retired = root / RETIRED_DIR
        self.lost_and_found = root / LOST_DIR
        for directory in (self._pending, self._retired):
            directory.mkdir(exist_ok=True)

    def path(self, volume_id: str) -> Path:
        return self.root / volume_id

    def pending_path(self, volume_id: str) -> Path:
        return self._pending / volume_id

    def exists(self, volume_id: str) -> bool:
        return os.path.lexists(self.path(volume_id))

    def create(
        self, volume_id: str, access_type: AccessType, size: int, *, pending: bool = False
    ) -> Path:
        """Create (idempotently) the backing entry of a volume: live, or pending until
        `promote()` when its row is yet to commit."""
        path = self.pending_path(volume_id) if pending else self.path(volume_id)
        if access_type is AccessType.BLOCK:
            with open(path, "ab") as handle:
                if os.fstat(handle.fileno()).st_size < size:
                    handle.truncate(size)
        else:
            path.mkdir(exist_ok=True)
        return path

    def promote(self, volume_id: str) -> None:
        """Move a pending entry into place, once its row has committed."""
        os.rename(self.pending_path(volume_id), self.path(volume_id))

    def retire(self, volume_id: str) -> Path | None:
        """Move a live entry aside before its row is deleted; from now on the node
        finds no such volume. Returns where it went (None: there was none)."""
        retired = self._retired / volume_id
        try:
            os.rename(self.path(volume_id), retired)
        except FileNotFoundError:
            return None
        return retired

    def unretire(self, volume_id: str) -> None:
        """Undo `retire()` (the row's deletion did not commit)."""
        os.rename(self._retired / volume_id, self.path(volume_id))

    def discard(self, path: Path) -> None:
        """Remove a retired or pending entry (idempotent). A block volume's loop
        device is detached first; when a mount still shows that device, the entry stays
        (start-up's reconcile tries again), since freeing the device would let the next
        block volume take its number and the old mount would show the new volume."""
        if self.loops is not None and path.is_file() and not path.is_symlink():
            try:
                self.loops.detach(path)
            except LoopDeviceError as error:
                log.warning("%s kept: %s", path, error)
                return
        remove_tree(path)

    def resize(self, volume_id: str, size: int) -> None:
        path = self.path(volume_id)
        if path.is_file() and path.stat().st_size < size:
            os.truncate(path, size)
            if self.loops is not None:
                self.loops.refresh_size(path)

    def users(self, volume_id: str) -> list[str]:
        """Mounts on this host that show the volume's data: a bind mount of its
        directory (or anything below it), or a mount of a loop device over its file."""
        path = self.path(volume_id)
        if not os.path.lexists(path):
            return []
        table = MountTable.read()
        users = [f"mounted at {point}" for point in table.mounts_showing(path)]
        if self.loops is not None and path.is_file():
            for device in self.loops.devices_of(path):
                users += [
                    f"{device} mounted at {point}" for point in table.mounts_of_device(device)
                ]
        return users

    def ids(self) -> set[str]:
        """IDs of the live entries."""
        return {
            entry.name
            for entry in os.scandir(self.root)
            if entry.name not in (PENDING_DIR, RETIRED_DIR, LOST_DIR)
        }

    def reconcile(self, known: Iterable[str], owns: Callable[[str], bool]) -> Reconciliation:
        """Make the entries agree with the rows in `known` after a crash.

        Pending entries with a row are promoted, without one discarded (the driver's
        own unfinished write). Retired entries with a row are restored (their delete
        never committed), without one discarded. Live entries named like the driver's
        IDs (`owns`) without a row are moved to lost+found and reported: a database
        that lost rows must not cost the data.
        """
        rows = set(known)
        done = Reconciliation()
        for entry in _names(self._pending):
            if entry in rows and not os.path.lexists(self.path(entry)):
                self.promote(entry)
                done.promoted.append(entry)
            else:
                self.discard(self._pending / entry)
                done.discarded.append(entry)
        for entry in _names(self._retired):
            if entry in rows and not os.path.lexists(self.path(entry)):
                self.unretire(entry)
                done.restored.append(entry)
            else:
                self.discard(self._retired / entry)
                done.discarded.append(entry)
        for entry in sorted(self.ids() - rows):
            if owns(entry):
                done.parked.append(str(self._park(entry)))
        return done

    def _park(self, volume_id: str) -> Path:
        self.lost_and_found.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        place = self.lost_and_found / f"{volume_id}.{stamp}"
        suffix = 0
        while os.path.lexists(place):
            suffix += 1
            place = self.lost_and_found / f"{volume_id}.{stamp}.{suffix}"
        os.rename(self.path(volume_id), place)
        log.warning(
            "backing entry %s has no row in the state database: moved to %s (not deleted)",
            self.path(volume_id),
            place,
        )
        return place


def _names(directory: Path) -> list[str]:
    try:
        return sorted(entry.name for entry in os.scandir(directory))
    except FileNotFoundError:
        return []


def remove_tree(path: Path) -> None:
    """Remove a file or directory tree; a missing path is fine (idempotent)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
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
        stat_ = path.stat()
        return Usage(used_bytes=stat_.st_blocks * 512, used_inodes=1)
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
