"""Loop devices: a block volume's backing file seen as a real block device node.

Container runtimes hand a pod's raw block volume over as a device node, and the
kubelet tears a block mapping down only when the published path is one, so a bind
mount of a plain file is not enough. The kernel's loop driver turns the file into
/dev/loopN; the node service publishes that node.

Loop devices outlive the process that set them up, so the kernel, not this process,
is the record of which file backs which device: `attached()` reads it from sysfs.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import time
from pathlib import Path
from typing import Protocol

from csi_mock.host.mount_table import MountTable

log = logging.getLogger(__name__)

# ioctl numbers from <linux/loop.h>.
LOOP_SET_FD = 0x4C00
LOOP_CLR_FD = 0x4C01
LOOP_SET_CAPACITY = 0x4C07
LOOP_CTL_GET_FREE = 0x4C82

LOOP_MAJOR = 7
_SYS_BLOCK = Path("/sys/block")
_FREE_DEVICE_ATTEMPTS = 8
"""Another process (losetup, the kubelet) may take the free device between
LOOP_CTL_GET_FREE and LOOP_SET_FD; then we ask again."""


class LoopDeviceError(OSError):
    """A loop device could not be set up or torn down."""


class LoopDevices(Protocol):
    """Which loop device backs which file, and setting them up and down."""

    def attach(self, backing: Path) -> str:
        """The device node of a loop device backed by `backing`; one is set up when
        none exists (idempotent)."""
        ...

    def detach(self, backing: Path) -> None:
        """Tear down every loop device backed by `backing` (idempotent). A device
        still open elsewhere is torn down by the kernel when its last user closes it.
        LoopDeviceError (EBUSY) when a mount still shows one of them: freed, its number
        would go to the next volume, and that mount would show the other volume."""
        ...

    def devices_of(self, backing: Path) -> list[str]:
        """Device nodes of the loop devices backed by `backing`."""
        ...

    def refresh_size(self, backing: Path) -> None:
        """Make loop devices backed by `backing` see the file's current size."""
        ...

    def attached(self) -> dict[str, Path]:
        """Every loop device in use: device node -> backing file."""
        ...


class KernelLoopDevices:
    """Loop devices of the running kernel, driven by ioctl (no losetup needed)."""

    def __init__(self, control: Path = Path("/dev/loop-control"), dev: Path = Path("/dev")):
        self.control = control
        self.dev = dev

    @staticmethod
    def available(control: Path = Path("/dev/loop-control")) -> bool:
        return os.access(control, os.R_OK | os.W_OK)

    def attach(self, backing: Path) -> str:
        existing = self.device_of(backing)
        if existing is not None:
            return existing
        backing_fd = os.open(backing, os.O_RDWR | os.O_CLOEXEC)
        try:
            for _ in range(_FREE_DEVICE_ATTEMPTS):
                device = self._free_device()
                try:
                    _device_ioctl(device, os.O_RDWR, LOOP_SET_FD, backing_fd)
                except OSError as error:
                    if error.errno == errno.EBUSY:
                        continue  # Taken by someone else since GET_FREE.
                    raise LoopDeviceError(
                        error.errno, f"attaching {backing} to {device}: {error.strerror}"
                    ) from None
                log.info("loop device %s attached to %s", device, backing)
                return device
        finally:
            os.close(backing_fd)
        raise LoopDeviceError(errno.EBUSY, f"no free loop device for {backing}")

    def detach(self, backing: Path) -> None:
        devices = self.devices_of(backing)
        if devices:
            table = MountTable.read()
            shown = {device: table.mounts_of_device(device) for device in devices}
            if any(shown.values()):
                raise LoopDeviceError(
                    errno.EBUSY,
                    f"{backing}'s loop device is still mounted: "
                    + "; ".join(f"{d} at {', '.join(p)}" for d, p in shown.items() if p),
                )
        for device in devices:
            try:
                _device_ioctl(device, os.O_RDONLY, LOOP_CLR_FD, 0)
            except FileNotFoundError:
                continue
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: already detached.
                    raise LoopDeviceError(
                        error.errno, f"detaching {device} from {backing}: {error.strerror}"
                    ) from None
            log.info("loop device %s detached from %s", device, backing)

    def refresh_size(self, backing: Path) -> None:
        for device in self.devices_of(backing):
            _device_ioctl(device, os.O_RDONLY, LOOP_SET_CAPACITY, 0)

    def attached(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for entry in _SYS_BLOCK.glob("loop*/loop/backing_file"):
            try:
                text = entry.read_text(encoding="utf-8", errors="surrogateescape").rstrip("\n")
            except OSError:
                continue  # Detached while we looked.
            name = entry.parent.parent.name
            found[str(self.dev / name)] = Path(text)
        return found

    def device_of(self, backing: Path) -> str | None:
        devices = self.devices_of(backing)
        return devices[0] if devices else None

    def devices_of(self, backing: Path) -> list[str]:
        wanted = os.path.realpath(backing)
        return sorted(device for device, path in self.attached().items() if str(path) == wanted)

    def _free_device(self) -> str:
        fd = os.open(self.control, os.O_RDWR | os.O_CLOEXEC)
        try:
            index = fcntl.ioctl(fd, LOOP_CTL_GET_FREE)
        except OSError as error:
            raise LoopDeviceError(
                error.errno, f"no free loop device ({self.control}): {error.strerror}"
            ) from None
        finally:
            os.close(fd)
        return self._device_node(index)

    def _device_node(self, index: int) -> str:
        """/dev/loop<index>, made when /dev is not a devtmpfs (a container's /dev is
        often a tmpfs filled once at start, so devices created later are missing)."""
        node = self.dev / f"loop{index}"
        wanted = _device_number(index)
        deadline = time.monotonic() + 1.0
        while True:
            try:
                if os.stat(node).st_rdev == wanted:
                    return str(node)
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)  # devtmpfs adds a new node asynchronously.
        try:
            os.mknod(node, 0o660 | stat.S_IFBLK, wanted)
        except FileExistsError:
            if os.stat(node).st_rdev != wanted:
                raise LoopDeviceError(
                    errno.EEXIST, f"{node} exists but is not loop device {index}"
                ) from None
        return str(node)


def _device_number(index: int) -> int:
    """loop<index>'s major:minor as sysfs states it (minors skip partitions when the
    loop module has max_part set)."""
    try:
        major, minor = (_SYS_BLOCK / f"loop{index}" / "dev").read_text().strip().split(":")
        return os.makedev(int(major), int(minor))
    except (OSError, ValueError):
        return os.makedev(LOOP_MAJOR, index)


def _device_ioctl(device: str, mode: int, request: int, argument: int) -> None:
    fd = os.open(device, mode | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, request, argument)
    finally:
        os.close(fd)
