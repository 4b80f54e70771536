"""Validation of paths and identifiers that reach the filesystem."""

from __future__ import annotations

import hashlib
import os
import re
import stat

from csi_mock.model.errors import InvalidArgument

_VOLUME_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")


def checked_path(path: str, field: str) -> str:
    """An absolute, normalised path from the CO, or InvalidArgument naming `field`."""
    if not path:
        raise InvalidArgument(f"{field} is required")
    if "\x00" in path:
        raise InvalidArgument(f"{field} contains a NUL byte")
    if not os.path.isabs(path):
        raise InvalidArgument(f"{field} {path!r} must be an absolute path")
    if ".." in path.split("/"):
        raise InvalidArgument(f"{field} {path!r} must not contain '..'")
    return os.path.normpath(path)


def is_driver_volume_id(volume_id: str) -> bool:
    """True for IDs of the form this driver generates (safe as a path component)."""
    return bool(_VOLUME_ID.match(volume_id))


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
