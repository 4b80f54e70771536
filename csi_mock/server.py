"""Assembling and running the driver: state, services and the gRPC server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import grpc

from csi_mock.admin.server import AdminServer
from csi_mock.backend.controller import Controller
from csi_mock.backend.inventory import Inventory
from csi_mock.backend.node import Node
from csi_mock.config import BlockDeviceMode, ConfigError, DriverConfig, MountMode
from csi_mock.control.faults import FaultEngine
from csi_mock.control.journal import Journal
from csi_mock.control.metrics import Metrics
from csi_mock.host.backing import BackingStore
from csi_mock.host.loop import KernelLoopDevices, LoopDevices
from csi_mock.host.mounts import BindMounter, DirectoryMounter, Mounter
from csi_mock.host.paths import remove_stale_socket
from csi_mock.host.sockets import SocketInUse, claim_socket_path
from csi_mock.host.state_lock import StateLock
from csi_mock.observe.calls import JsonLogSink, RecordSink
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.proto import pluginregistration_pb2_grpc as reg_grpc
from csi_mock.services.controller import ControllerServicer
from csi_mock.services.identity import IdentityServicer
from csi_mock.services.interceptor import CallInterceptor
from csi_mock.services.node import NodeServicer
from csi_mock.services.readiness import Readiness
from csi_mock.services.registration import KubeletRegistration, RegistrationServicer
from csi_mock.startup import (
    StartupError,
    check_saved_pools,
    claim_state_dir,
    open_store,
    unreadable_store,
)
from csi_mock.store.sqlite import StateStore

log = logging.getLogger("csi_mock")
SHUTDOWN_GRACE_SECONDS = 10.0
SOCKET_MODE = 0o600
"""Whoever connects to the CSI socket can mount onto any directory: only the driver's
user (root, as the kubelet and the sidecars) may."""


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    """A process-wide umask for a moment: only while nothing else creates files."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


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
    registration: KubeletRegistration | None = None
    """Set when the driver registers itself with the kubelet (node.registration)."""
    state_lock: StateLock | None = None
    """The state directory's lock, held until close()."""
    _closed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def open(cls, config: DriverConfig, mounter: Mounter | None = None) -> Driver:
        """Lock the state directory, open the store and check it against the pools; a
        StartupError names the key, the path and the fix."""
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
            store = open_store(config.state_dir / "state.db")
            undo.callback(store.close)
            if config.mode.controller:
                try:
                    check_saved_pools(config, store)
                except sqlite3.DatabaseError as error:
                    raise unreadable_store(store.path, error) from None
            backing = BackingStore(config.volumes_dir, loops)
            controller = Controller(config, store, backing) if config.mode.controller else None
            node = None
            if config.mode.node:
                assert mounter is not None
                node = Node(config, store, backing, mounter, loops)
            driver = cls(
                config=config,
                store=store,
                controller=controller,
                node=node,
                journal=Journal(config.admin.journal_size),
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

    def close(self) -> None:
        """Close the store and release the state directory (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self.store.close()
        if self.state_lock is not None:
            self.state_lock.release()


class RegistrationSocketError(ConfigError):
    """The registration socket cannot be created where node.registration says."""


class RegistrationServer:
    """The kubelet plugin registration service on its own socket in plugins_registry.

    The kubelet registers the driver when the socket appears and deregisters it when
    the socket disappears, so the socket exists only while the CSI socket serves.
    """

    def __init__(self, config: DriverConfig, registration: KubeletRegistration) -> None:
        self.socket_path = registration.socket
        self._server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(
            RegistrationServicer(config, registration), self._server
        )
        self._kubelet_endpoint = config.kubelet_endpoint
        self._name = config.name
        self._listening = False

    async def start(self) -> None:
        """Listen; a RegistrationSocketError names the key at fault."""
        try:
            self.socket_path.parent.mkdir(parents=True, exist_ok=True)
            claim_socket_path(self.socket_path)
            self._server.add_insecure_port(f"unix://{self.socket_path}")
            self._listening = True
            os.chmod(self.socket_path, SOCKET_MODE)
        except SocketInUse as error:
            raise RegistrationSocketError(
                f"node.registration.plugins_registry: {error}; is another csi-mock registered"
                f" as {self._name}? Stop it, or give this one another driver name"
            ) from None
        except (OSError, RuntimeError) as error:  # grpc reports a failed bind as RuntimeError
            reason = error.strerror if isinstance(error, OSError) else "bind failed"
            raise RegistrationSocketError(
                f"node.registration.plugins_registry: cannot listen on {self.socket_path}: {reason}"
            ) from None
        await self._server.start()
        log.info(
            "plugin registration on %s (kubelet endpoint %s)",
            self.socket_path,
            self._kubelet_endpoint,
        )

    async def stop(self, grace: float) -> None:
        await self._server.stop(grace)
        if self._listening:  # else the path may not even be reachable
            remove_stale_socket(self.socket_path)
            self._listening = False


class DriverServer:
    """The gRPC server of one driver on its unix socket (and its registration socket)."""

    def __init__(self, driver: Driver, sinks: Sequence[RecordSink] = ()) -> None:
        self.driver = driver
        self.interceptor = CallInterceptor(
            driver.readiness, [driver.journal, driver.metrics, *sinks], driver.faults
        )
        self._server = grpc.aio.server(interceptors=[self.interceptor])
        config = driver.config
        pb_grpc.add_IdentityServicer_to_server(
            IdentityServicer(config, driver.readiness), self._server
        )
        if driver.controller is not None:
            pb_grpc.add_ControllerServicer_to_server(
                ControllerServicer(config, driver.controller), self._server
            )
        if driver.node is not None:
            pb_grpc.add_NodeServicer_to_server(NodeServicer(config, driver.node), self._server)
        self.socket_path = config.socket_path
        self.registration: RegistrationServer | None = None
        if driver.registration is not None:
            self.registration = RegistrationServer(config, driver.registration)
        self._listening = False

    async def start(self) -> None:
        """Listen, load the state, register; on any failure nothing is left listening
        and the driver is closed. A StartupError names the key, the path and the fix."""
        self._listen()
        try:
            await self._server.start()
            # Serve Identity (Probe says not ready) while the state loads.
            await asyncio.to_thread(self.driver.load)
            # Only now: the kubelet calls NodeGetInfo as soon as it sees the socket.
            if self.registration is not None:
                await self.registration.start()
        except BaseException:
            await self.stop(grace=0)
            raise

    def _listen(self) -> None:
        """Bind the CSI socket with mode 0600 whatever the umask; a live socket at the
        path (another driver serving) is refused, a stale one replaced."""
        path = self.socket_path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            claim_socket_path(path)
            # Nothing else runs yet, so the umask can make the socket private from birth.
            with _umask(0o777 & ~SOCKET_MODE):
                self._server.add_insecure_port(f"unix://{path}")
            self._listening = True
            os.chmod(path, SOCKET_MODE)
        except SocketInUse as error:
            self.driver.close()
            raise StartupError(
                f"endpoint: {error}; stop the driver serving there, or give this one"
                " another endpoint (--endpoint)"
            ) from None
        except (OSError, RuntimeError) as error:  # grpc reports a failed bind as RuntimeError
            self.driver.close()
            reason = error.strerror if isinstance(error, OSError) else "bind failed"
            raise StartupError(
                f"endpoint: cannot listen on {path}: {reason}; run as root, or give a"
                " writable path (--endpoint, or endpoint in the config file)"
            ) from None

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Deregister, finish in-flight calls (up to `grace` seconds), remove the socket."""
        if self.registration is not None:
            await self.registration.stop(grace)
        await self._server.stop(grace)
        if self._listening:  # else the path may be another driver's live socket
            remove_stale_socket(self.socket_path)
            self._listening = False
        self.driver.close()

    async def wait(self) -> None:
        await self._server.wait_for_termination()


async def serve(config: DriverConfig) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully.

    The admin API starts after the gRPC server (state is loaded by then) and stops
    before it, each letting in-flight requests finish.
    """
    driver = Driver.open(config)
    server = DriverServer(driver, sinks=[JsonLogSink(logging.getLogger("csi_mock.calls"))])
    admin = AdminServer(driver)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await server.start()
    try:
        await admin.start()
    except BaseException:
        await server.stop()
        raise
    log.info("serving %s (%s mode) on %s", config.name, config.mode.value, server.socket_path)
    await stop.wait()
    log.info("shutting down")
    await admin.stop()
    await server.stop()
