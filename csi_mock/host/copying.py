"""Copying a volume's data: a directory tree, or a sparse file, to a new place.

Snapshots, restores and clones are real copies. Holes stay holes (SEEK_DATA/SEEK_HOLE),
so a mostly empty block volume copies in milliseconds, and symbolic links are copied as
links, never followed: a volume's content is untrusted and must not make the driver
read files outside it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from csi_mock.model.volume import AccessType

_CHUNK = 1 << 30
"""The most copy_file_range is asked for at once (it may do less)."""


def copy_data(source: Path, destination: Path, access_type: AccessType, size: int = 0) -> None:
    """Copy a volume's data from `source` to `destination`, which must not exist.

    A block volume's file is extended to `size` bytes when that is larger (a restore
    into a larger volume); a mount volume's tree is copied as it is.
    """
    if access_type is AccessType.BLOCK:
        copy_sparse_file(source, destination)
        if os.stat(destination).st_size < size:
            os.truncate(destination, size)
    else:
        copy_tree(source, destination)


def copy_tree(source: Path, destination: Path) -> None:
    """Copy the tree at `source` to `destination` (created; must not exist).

    Directories, regular files (sparse-aware), symbolic links (as links) and FIFOs are
    copied with their permission bits and times, and with their owners when running as
    root. Sockets and device nodes are left out: they are not data.
    """
    os.mkdir(destination)
    pending = [(source, destination)]
    directories = [(source, destination)]
    while pending:
        from_dir, to_dir = pending.pop()
        with os.scandir(from_dir) as entries:
            listed = list(entries)
        for entry in listed:
            target = to_dir / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                os.mkdir(target)
                pending.append((Path(entry.path), target))
                directories.append((Path(entry.path), target))
                continue
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(entry.path), target)
            elif stat.S_ISREG(mode):
                copy_sparse_file(Path(entry.path), target)
            elif stat.S_ISFIFO(mode):
                os.mkfifo(target)
            else:
                continue
            _copy_metadata(Path(entry.path), target)
    # Directories last: creating entries in them changes their times.
    for from_dir, to_dir in reversed(directories):
        _copy_metadata(from_dir, to_dir)


def copy_sparse_file(source: Path, destination: Path) -> None:
    """Copy a regular file's data regions only, so holes stay holes (`destination` is
    created; must not exist)."""
    # O_NONBLOCK: should a FIFO have taken the file's place, opening it must not wait
    # for a writer (it has no effect on a regular file).
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    with open(os.open(source, flags), "rb") as reader:
        info = os.fstat(reader.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(source))
        length = info.st_size
        with open(destination, "xb") as writer:
            for start, end in _data_regions(reader.fileno(), length):
                _copy_range(reader.fileno(), writer.fileno(), start, end)
            writer.truncate(length)
    shutil.copymode(source, destination, follow_symlinks=False)


def _data_regions(fd: int, length: int) -> list[tuple[int, int]]:
    """(start, end) of every region of `fd` holding data; the whole file where the
    filesystem cannot tell holes (no SEEK_DATA)."""
    regions = []
    offset = 0
    while offset < length:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no data after offset
                break
            return [(0, length)]  # EINVAL: SEEK_DATA unsupported here
        end = min(os.lseek(fd, start, os.SEEK_HOLE), length)
        regions.append((start, end))
        offset = end
    return regions


def _copy_range(reader: int, writer: int, start: int, end: int) -> None:
    position = start
    while position < end:
        try:
            copied = os.copy_file_range(
                reader, writer, min(end - position, _CHUNK), position, position
            )
        except OSError:
            copied = _copy_by_reading(reader, writer, position, end)
        if copied == 0:
            break  # The file shrank under us: what is gone is not data any more.
        position += copied


def _copy_by_reading(reader: int, writer: int, position: int, end: int) -> int:
    data = os.pread(reader, min(end - position, 1 << 20), position)
    if data:
        os.pwrite(writer, data, position)
    return len(data)


def _copy_metadata(source: Path, destination: Path) -> None:
    if os.geteuid() == 0:  # First: chown clears set-user-ID bits that copystat sets.
        info = os.lstat(source)
        os.chown(destination, info.st_uid, info.st_gid, follow_symlinks=False)
    shutil.copystat(source, destination, follow_symlinks=False)
