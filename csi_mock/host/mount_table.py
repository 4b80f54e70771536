"""This mount namespace's mounts, as /proc/self/mountinfo states them.

Used to ask what still shows a volume before its data or its loop device goes: a bind
mount of a directory appears with the directory's path within its filesystem as the
mount's root; a bind mount of a device node, with the node's name as its root.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Mount:
    device: int
    """st_dev of the mounted filesystem."""
    root: str
    """The path within that filesystem that the mount shows."""
    point: str


class MountTable:
    def __init__(self, mounts: list[Mount]) -> None:
        self.mounts = mounts

    @classmethod
    def read(cls, source: Path = MOUNTINFO) -> MountTable:
        return cls.parse(source.read_text(encoding="utf-8", errors="surrogateescape"))

    @classmethod
    def parse(cls, text: str) -> MountTable:
        mounts = []
        for line in text.splitlines():
            fields = line.split(" ")
            if len(fields) < 5 or ":" not in fields[2]:
                continue
            major, minor = fields[2].split(":", 1)
            mounts.append(
                Mount(
                    device=os.makedev(int(major), int(minor)),
                    root=unescape(fields[3]),
                    point=unescape(fields[4]),
                )
            )
        return cls(mounts)

    def points(self) -> set[str]:
        return {mount.point for mount in self.mounts}

    def mounts_showing(self, path: Path | str) -> list[str]:
        """Mount points whose mount shows `path` or something below it."""
        real = os.path.realpath(path)
        try:
            device = os.stat(real).st_dev
        except FileNotFoundError:
            return []
        inner = self._path_within_filesystem(real, device)
        if inner is None:
            return []
        below = inner.rstrip("/") + "/"
        return sorted(
            mount.point
            for mount in self.mounts
            if mount.device == device and (mount.root == inner or mount.root.startswith(below))
        )

    def mounts_of_device(self, node: str) -> list[str]:
        """Mount points that show the block device `node` (bind mounts of its node)."""
        try:
            wanted = os.stat(node).st_rdev
        except FileNotFoundError:
            return []
        name = os.path.basename(node)
        found = []
        for mount in self.mounts:
            if os.path.basename(mount.root) != name:
                continue  # Cheap filter: a bind mount of /dev/loopN has root /loopN.
            try:
                shown = os.stat(mount.point)
            except OSError:
                continue
            if stat.S_ISBLK(shown.st_mode) and shown.st_rdev == wanted:
                found.append(mount.point)
        return sorted(found)

    def _path_within_filesystem(self, real: str, device: int) -> str | None:
        """`real`'s path within its filesystem, through the mount that covers it."""
        covering = None  # The longest mount point that is `real` or above it; the last
        for mount in self.mounts:  # of equal ones is on top.
            point = mount.point.rstrip("/")
            covers = real == (point or "/") or real.startswith(point + "/")
            if covers and (covering is None or len(point) >= len(covering.point.rstrip("/"))):
                covering = mount
        if covering is None or covering.device != device:
            return None
        point = covering.point.rstrip("/")
        rest = real[len(point) :]
        return (covering.root.rstrip("/") + rest) or "/"


def unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo octal."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
