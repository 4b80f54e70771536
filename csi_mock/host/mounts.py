"""Bind mounts through mount(2), and a directory-only stand-in for unprivileged runs."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from typing import Protocol

from csi_mock.host.mount_table import MountTable

MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8

# statx(2): <linux/stat.h> and <fcntl.h>.
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_NO_AUTOMOUNT = 0x800
STATX_BASIC_STATS = 0x7FF
STATX_ATTR_MOUNT_ROOT = 0x2000  # Linux 5.8
_STATX_SIZE = 256
_STATX_U64 = struct.Struct("=Q")
_STATX_ATTRIBUTES_OFFSET = 8  # stx_attributes
_STATX_ATTRIBUTES_MASK_OFFSET = 56  # stx_attributes_mask


class Mounter(Protocol):
    real: bool

    def bind(self, source: str, target: str, *, readonly: bool) -> None: ...

    def unmount(self, target: str) -> None: ...

    def is_mounted(self, target: str) -> bool: ...


class BindMounter:
    """Real bind mounts, made with the mount(2) system call (no subprocess per call)."""

    real = True

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._libc.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_void_p,
        ]
        self._libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self._statx = getattr(self._libc, "statx", None)  # glibc 2.28
        if self._statx is not None:
            self._statx.argtypes = [
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
                ctypes.c_uint,
                ctypes.c_void_p,
            ]

    def bind(self, source: str, target: str, *, readonly: bool) -> None:
        self._mount(source, target, MS_BIND)
        if readonly:
            try:
                self._mount(source, target, MS_BIND | MS_REMOUNT | MS_RDONLY)
            except OSError:
                self.unmount(target)
                raise

    def unmount(self, target: str) -> None:
        # Lazy detach, so a busy mount never wedges NodeUnpublish; never through a
        # symbolic link put in the target's place.
        while self.is_mounted(target):
            if self._libc.umount2(os.fsencode(target), MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"umount {target}: {os.strerror(error)}")

    def is_mounted(self, target: str) -> bool:
        """Whether a mount has its root at `target`: one statx(2) call, so the cost does
        not grow with the host's mounts (a kubelet node has hundreds); the mount table
        is read only on kernels before 5.8, which do not report the attribute."""
        answer = self._mount_root(target)
        if answer is None:
            return os.path.normpath(target) in mount_points()
        return answer

    def _mount_root(self, target: str) -> bool | None:
        if self._statx is None:
            return None
        buffer = ctypes.create_string_buffer(_STATX_SIZE)
        flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT
        if self._statx(AT_FDCWD, os.fsencode(target), flags, STATX_BASIC_STATS, buffer) != 0:
            error = ctypes.get_errno()
            if error in (errno.ENOENT, errno.ENOTDIR):
                return False
            return None
        (known,) = _STATX_U64.unpack_from(buffer, _STATX_ATTRIBUTES_MASK_OFFSET)
        if not known & STATX_ATTR_MOUNT_ROOT:
            return None
        (attributes,) = _STATX_U64.unpack_from(buffer, _STATX_ATTRIBUTES_OFFSET)
        return bool(attributes & STATX_ATTR_MOUNT_ROOT)

    def _mount(self, source: str, target: str, flags: int) -> None:
        if self._libc.mount(os.fsencode(source), os.fsencode(target), None, flags, None) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"mount --bind {source} {target}: {os.strerror(error)}")


class DirectoryMounter:
    """No mounts at all: the driver only creates and records paths."""

    real = False

    def bind(self, source: str, target: str, *, readonly: bool) -> None:
        return None

    def unmount(self, target: str) -> None:
        return None

    def is_mounted(self, target: str) -> bool:
        return False


def mount_points() -> set[str]:
    """Mount points of this process's mount namespace, from /proc/self/mountinfo."""
    return MountTable.read().points()
