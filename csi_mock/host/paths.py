"""Validation of paths and identifiers that reach the filesystem."""

from __future__ import annotations

import hashlib
import os
import re
import stat

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


def make_mount_point(path: str, field: str, *, directory: bool) -> None:
    """Create the CO's `path` (a directory, or a file for a block volume) if missing.

    A path that cannot be created here (a file in the way, a read-only or virtual
    filesystem) is the caller's problem: FailedPrecondition naming `field`. Parents are
    created one by one rather than by os.makedirs, which recurses once per missing
    parent and would exhaust Python's stack on a deep path.
    """
    try:
        parent = os.path.dirname(path) if not directory else path
        missing = []
        while not os.path.isdir(parent):
            if os.path.lexists(parent):
                raise FailedPrecondition(
                    f"{field} {path!r} cannot be created: {parent!r} is not a directory"
                )
            missing.append(parent)
            parent = os.path.dirname(parent)
        for name in reversed(missing):
            os.mkdir(name)
        if not directory and not os.path.lexists(path):
            open(path, "a").close()
    except OSError as error:
        raise FailedPrecondition(
            f"{field} {path!r} cannot be created: {error.strerror or error}"
        ) from None


def is_driver_volume_id(volume_id: str) -> bool:
    """True for IDs of the form this driver generates (safe as a path component)."""
    return bool(_VOLUME_ID.match(volume_id))


def is_driver_snapshot_id(snapshot_id: str) -> bool:
    """True for snapshot IDs of the form this driver generates (`snap-` and a volume
    ID's characters: safe as a path component)."""
    return snapshot_id.startswith("snap-") and is_driver_volume_id(snapshot_id)


def opaque_id_component(volume_id: str) -> str:
    """A safe directory name for an ID chosen by someone else (inline ephemeral)."""
    return "eph-" + hashlib.sha256(volume_id.encode()).hexdigest()[:32]


def remove_stale_socket(path: os.PathLike[str] | str) -> None:
    """Remove a unix socket left by an earlier run (never a file of another kind)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
