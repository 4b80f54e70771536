"""A configured driver: its state store, backend, control surface and readiness.

Below the gRPC server (`csi_mock.server`) and the admin API (`csi_mock.admin`), which
both serve one; it knows neither.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

from csi_mock.backend.conditions import VolumeConditions
from csi_mock.backend.controller import Controller
from csi_mock.backend.health import ReportedHealth
from csi_mock.backend.inventory import Inventory
from csi_mock.backend.node import Node
from csi_mock.backend.switches import Switches
from csi_mock.config import (
    BlockDeviceMode,
    ConfigError,
    DriverConfig,
    JournalRequests,
    MountMode,
)
from csi_mock.control.faults import FaultEngine
from csi_mock.control.journal import Journal
from csi_mock.control.metrics import Metrics
from csi_mock.host.backing import BackingStore
from csi_mock.host.loop import KernelLoopDevices, LoopDevices
from csi_mock.host.mounts import BindMounter, DirectoryMounter, Mounter
from csi_mock.host.neighbours import Neighbours
from csi_mock.host.state_lock import StateLock
from csi_mock.model.errors import FailedPrecondition
from csi_mock.services.readiness import Readiness
from csi_mock.services.registration import KubeletRegistration
from csi_mock.startup import check_saved_pools, claim_state_dir, open_store, unreadable_store
from csi_mock.store.interface import Store
from csi_mock.store.sqlite import StateStore

log = logging.getLogger("csi_mock")


def choose_mounter(mode: MountMode) -> Mounter:
    if mode is MountMode.BIND or (mode is MountMode.AUTO and os.geteuid() == 0):
        return BindMounter()
    return DirectoryMounter()


def choose_loop_devices(mode: BlockDeviceMode, mounter: Mounter) -> LoopDevices | None:
    """Loop devices for raw block volumes, or None to publish their backing files."""
    if mode is BlockDeviceMode.FILE:
        return None
    if mode is BlockDeviceMode.LOOP:
        if not mounter.real:
            raise ConfigError("node.block_device: loop needs real mounts (node.mount: bind)")
        if not KernelLoopDevices.available():
            raise ConfigError(
                "node.block_device: loop needs read-write access to /dev/loop-control"
            )
        return KernelLoopDevices()
    return KernelLoopDevices() if mounter.real and KernelLoopDevices.available() else None


@dataclass
class Driver:
    """A configured driver: its state and behaviour, before or while it serves."""

    config: DriverConfig
    store: StateStore
    controller: Controller | None
    node: Node | None
    readiness: Readiness = field(default_factory=Readiness)
    faults: FaultEngine = field(default_factory=FaultEngine)
    journal: Journal = field(default_factory=Journal)
    metrics: Metrics = field(default_factory=Metrics)
    inventory: Inventory = field(init=False)
    """Read-only views of the stored volumes (admin API)."""
    switches: Switches = field(init=False)
    """Expansion and stats switches, from the configuration, changed by the admin API."""
    conditions: VolumeConditions = field(default_factory=VolumeConditions)
    """Volume conditions set through the admin API."""
    health: ReportedHealth = field(default_factory=ReportedHealth)
    """Volume and storage backend health set through the admin API."""
    registration: KubeletRegistration | None = None
    """Set when the driver registers itself with the kubelet (node.registration)."""
    state_lock: StateLock | None = None
    """The state directory's lock, held until close()."""
    neighbours: Neighbours = field(init=False)
    """The pod's other programs the admin API may pause (admin.neighbours)."""
    _closed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def open(
        cls,
        config: DriverConfig,
        mounter: Mounter | None = None,
        *,
        backend_store: Callable[[StateStore], Store] | None = None,
    ) -> Driver:
        """Lock the state directory, open the store and check it against the pools; a
        StartupError names the key, the path and the fix.

        `backend_store` makes what the controller and node see of the opened store (a
        test hands in one that fails chosen writes); by default, the store itself.
        """
        with ExitStack() as undo:
            lock = claim_state_dir(config)
            undo.callback(lock.release)
            loops = None
            if config.mode.node:
                mounter = mounter or choose_mounter(config.node.mount)
                loops = choose_loop_devices(config.node.block_device, mounter)
            elif KernelLoopDevices.available():
                # A controller alone sets no loop device up, but a node service in
                # another process may have one over a volume's file: DeleteVolume must
                # see it, and free it only once no mount shows it.
                loops = KernelLoopDevices()
            store = open_store(config)
            undo.callback(store.close)
            if config.mode.controller:
                try:
                    check_saved_pools(config, store)
                except sqlite3.DatabaseError as error:
                    raise unreadable_store(store.path, error) from None
            backing = BackingStore(config.volumes_dir, loops)
            seen: Store = backend_store(store) if backend_store is not None else store
            controller = Controller(config, seen, backing) if config.mode.controller else None
            node = None
            if config.mode.node:
                assert mounter is not None
                node = Node(config, seen, backing, mounter, loops)
            driver = cls(
                config=config,
                store=store,
                controller=controller,
                node=node,
                journal=Journal(
                    config.admin.journal_size,
                    whole=config.admin.journal_requests is JournalRequests.WHOLE,
                    whole_capacity=config.admin.journal_whole_size,
                ),
                metrics=Metrics(lambda: controller.pools if controller else ()),
                state_lock=lock,
            )
            if config.registration_socket_path is not None:
                driver.registration = KubeletRegistration(config.registration_socket_path)
            for spec in config.faults:
                driver.faults.add(spec)
            undo.pop_all()
        return driver

    def __post_init__(self) -> None:
        self.inventory = Inventory(self.store)
        self.switches = Switches.from_config(self.config)
        self.neighbours = Neighbours(self.config.admin.neighbours)

    def load(self) -> None:
        """Bring accounting and backing files in line with the store, then go ready."""
        try:
            if self.controller is not None:
                self.controller.load()
            if self.node is not None:
                for problem in self.node.load():
                    log.warning("block publication not restored: %s", problem)
        except Exception as error:
            self.readiness.failure = f"loading state failed: {error}"
            if isinstance(error, sqlite3.DatabaseError):
                raise unreadable_store(self.store.path, error) from None
            raise
        self.readiness.ready = True

    def reset(self) -> None:
        """Back to how it started, for the next user of a running driver: fault rules
        as configured, pools at their configured sizes without drift, capacity live,
        limits and switches as configured, no volume conditions or health, an empty
        journal, no paused neighbour.

        Only an empty driver is reset: a FailedPrecondition names what it still holds
        (volumes, snapshots, attachments, stagings, publications) and nothing changes.
        Volumes are never deleted here; they go through DeleteVolume as always.
        """
        left = self.store.leftovers()
        if left:
            held = ", ".join(f"{count} {kind}" for kind, count in left.items())
            raise FailedPrecondition(
                f"a reset needs a driver without volumes; this one holds {held}: delete "
                "them first (nothing was reset)"
            )
        if self.controller is not None:
            self.controller.reset()
        if self.node is not None:
            self.node.reset()
        self.switches.restore(self.config)
        self.conditions.clear_all()
        self.health.clear_all()
        self.faults.clear()
        for spec in self.config.faults:
            self.faults.add(spec)
        self.journal.clear()
        self.neighbours.resume_all()

    def close(self) -> None:
        """Close the store and release the state directory (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        # A paused neighbour then sees the SIGTERM its pod's end sent it.
        self.neighbours.resume_all()
        self.store.close()
        if self.state_lock is not None:
            self.state_lock.release()
