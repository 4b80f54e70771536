"""Validation of paths and identifiers that reach the filesystem."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from csi_mock.model.errors import FailedPrecondition, InvalidArgument

_VOLUME_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")
PATH_MAX_BYTES = 4095
"""Linux's PATH_MAX (4096) less the terminating NUL: longer paths cannot be used."""
NAME_MAX_BYTES = 255
"""Linux's NAME_MAX: the longest name of one directory entry."""


def checked_path(path: str, field: str) -> str:
    """An absolute, normalised path from the CO, or InvalidArgument naming `field`.

    The root directory is refused: it cannot be a mount point, and a publication there
    would make unpublishing remove it.
    """
    if not path:
        raise InvalidArgument(f"{field} is required")
    if "\x00" in path:
        raise InvalidArgument(f"{field} contains a NUL byte")
    if len(path.encode()) > PATH_MAX_BYTES:
        raise InvalidArgument(f"{field} is longer than {PATH_MAX_BYTES} bytes")
    if not os.path.isabs(path):
        raise InvalidArgument(f"{field} {path!r} must be an absolute path")
    components = path.split("/")
    if ".." in components:
        raise InvalidArgument(f"{field} {path!r} must not contain '..'")
    if any(len(name.encode()) > NAME_MAX_BYTES for name in components):
        raise InvalidArgument(f"{field} has a name longer than {NAME_MAX_BYTES} bytes")
    normal = os.path.normpath(path)
    if not normal.strip("/"):
        raise InvalidArgument(f"{field} must not be the root directory")
    return normal


@dataclass(frozen=True)
class PathPolicy:
    """Where the CO may have the node service create and mount: within an allowed root
    (None: anywhere) and never within the driver's own directories, whose entries a
    later DeleteVolume or start-up would remove through the mount."""

    allowed_roots: tuple[str, ...] | None = None
    driver_dirs: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed_roots: Iterable[str] | None, driver_dirs: Iterable[str]) -> PathPolicy:
        return cls(
            tuple(_both_forms(allowed_roots)) if allowed_roots is not None else None,
            tuple(_both_forms(driver_dirs)),
        )

    def check(self, path: str, field: str) -> str:
        """`checked_path`, then InvalidArgument for a path outside the allowed roots or
        inside the driver's own directories."""
        normal = checked_path(path, field)
        for directory in self.driver_dirs:
            if _within(normal, directory):
                raise InvalidArgument(
                    f"{field} {normal!r} is inside the driver's own directory {directory}"
                )
        if self.root_of(normal) is None:
            assert self.allowed_roots is not None
            raise InvalidArgument(
                f"{field} {normal!r} is outside the allowed roots"
                f" ({', '.join(self.allowed_roots)}; node.allowed_roots)"
            )
        return normal

    def root_of(self, path: str) -> str | None:
        """The allowed root `path` is within (the longest), "/" when any path is
        allowed, None when it is outside every one."""
        if self.allowed_roots is None:
            return "/"
        roots = [root for root in self.allowed_roots if _within(path, root)]
        return max(roots, key=len) if roots else None


def _both_forms(paths: Iterable[str]) -> list[str]:
    """Each path as given (normalised) and with its symbolic links resolved."""
    forms: list[str] = []
    for path in paths:
        for form in (os.path.normpath(path), os.path.realpath(path)):
            if form not in forms:
                forms.append(form)
    return forms


def _within(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def make_mount_point(path: str, field: str, *, directory: bool, root: str = "/") -> None:
    """Create the CO's `path` (a directory, or a file for a block volume) if missing,
    without following a symbolic link anywhere below `root`.

    A link on the way is the caller's bad input (InvalidArgument naming `field`): the
    mount would land wherever it points, outside the area the CO manages. A path that
    cannot be created here (a file in the way, a read-only or virtual filesystem) is
    FailedPrecondition. The walk goes one component at a time from a descriptor, so a
    deep path costs no recursion.
    """
    relative = os.path.relpath(path, root)
    names = [] if relative == "." else relative.split("/")
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise FailedPrecondition(f"{field} {path!r}: {root}: {error.strerror}") from None
    try:
        for index, name in enumerate(names):
            is_last = index == len(names) - 1
            if is_last and not directory:
                _make_file(fd, name, path, field)
                break
            next_fd = _open_directory(fd, name, path, field, made_mode=0o750)
            os.close(fd)
            fd = next_fd
    except OSError as error:
        raise FailedPrecondition(
            f"{field} {path!r} cannot be created: {error.strerror or error}"
        ) from None
    finally:
        os.close(fd)


def _open_directory(parent: int, name: str, path: str, field: str, *, made_mode: int) -> int:
    try:
        _refuse_link_or_file(os.stat(name, dir_fd=parent, follow_symlinks=False), name, path, field)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):  # Made meanwhile: the open checks it.
            os.mkdir(name, made_mode, dir_fd=parent)
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    _refuse_link_or_file(os.fstat(fd), name, path, field, close=fd)
    return fd


def _make_file(parent: int, name: str, path: str, field: str) -> None:
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            os.close(os.open(name, flags, 0o640, dir_fd=parent))
            return
        except FileExistsError:
            found = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(found.st_mode):
        raise InvalidArgument(f"{field} {path!r} is a symbolic link")
    if stat.S_ISDIR(found.st_mode):
        raise FailedPrecondition(f"{field} {path!r} is a directory, not a file")


def _refuse_link_or_file(
    found: os.stat_result, name: str, path: str, field: str, *, close: int | None = None
) -> None:
    if stat.S_ISDIR(found.st_mode):
        return
    if close is not None:
        os.close(close)
    if stat.S_ISLNK(found.st_mode):
        raise InvalidArgument(
            f"{field} {path!r} passes through a symbolic link ({name!r}); links are not followed"
        )
    raise FailedPrecondition(f"{field} {path!r} cannot be created: {name!r} is not a directory")


def remove_mount_point(path: str) -> None:
    """Remove what NodePublish or NodeStage made at `path` once unmounted: an empty
    directory or an empty file. Anything else (a link, a file with data, a directory
    with entries) was not made by the driver and is left where it is."""
    try:
        found = os.lstat(path)
        if stat.S_ISDIR(found.st_mode):
            os.rmdir(path)
        elif stat.S_ISREG(found.st_mode) and found.st_size == 0:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EBUSY):
            raise


def is_driver_volume_id(volume_id: str) -> bool:
    """True for IDs of the form this driver generates (safe as a path component)."""
    return bool(_VOLUME_ID.match(volume_id))


def is_driver_snapshot_id(snapshot_id: str) -> bool:
    """True for snapshot IDs of the form this driver generates (`snap-` and a volume
    ID's characters: safe as a path component)."""
    return snapshot_id.startswith("snap-") and is_driver_volume_id(snapshot_id)


EPHEMERAL_PREFIX = "eph-"


def opaque_id_component(volume_id: str) -> str:
    """A safe directory name for an ID chosen by someone else (inline ephemeral)."""
    return EPHEMERAL_PREFIX + hashlib.sha256(volume_id.encode()).hexdigest()[:32]


def remove_stale_socket(path: os.PathLike[str] | str) -> None:
    """Remove a unix socket left by an earlier run (never a file of another kind)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
