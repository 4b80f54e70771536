"""Assembling and running the driver: state, services and the gRPC server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
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
from csi_mock.observe.calls import JsonLogSink, RecordSink
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.proto import pluginregistration_pb2_grpc as reg_grpc
from csi_mock.services.controller import ControllerServicer
from csi_mock.services.identity import IdentityServicer
from csi_mock.services.interceptor import CallInterceptor
from csi_mock.services.node import NodeServicer
from csi_mock.services.readiness import Readiness
from csi_mock.services.registration import KubeletRegistration, RegistrationServicer
from csi_mock.store.sqlite import StateStore

log = logging.getLogger("csi_mock")
SHUTDOWN_GRACE_SECONDS = 10.0


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

    @classmethod
    def open(cls, config: DriverConfig, mounter: Mounter | None = None) -> Driver:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        loops = None
        if config.mode.node:
            mounter = mounter or choose_mounter(config.node.mount)
            loops = choose_loop_devices(config.node.block_device, mounter)
        store = StateStore(config.state_dir / "state.db")
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
        )
        if config.registration_socket_path is not None:
            driver.registration = KubeletRegistration(config.registration_socket_path)
        for spec in config.faults:
            driver.faults.add(spec)
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
            raise
        self.readiness.ready = True

    def close(self) -> None:
        self.store.close()


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
        self._listening = False

    async def start(self) -> None:
        """Listen; a RegistrationSocketError names the key at fault."""
        try:
            self.socket_path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_socket(self.socket_path)
            self._server.add_insecure_port(f"unix://{self.socket_path}")
            self._listening = True
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

    async def start(self) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_socket(self.socket_path)
        self._server.add_insecure_port(f"unix://{self.socket_path}")
        await self._server.start()
        # Serve Identity (Probe says not ready) while the state loads.
        await asyncio.to_thread(self.driver.load)
        # Only now: the kubelet calls NodeGetInfo as soon as it sees the socket.
        if self.registration is not None:
            try:
                await self.registration.start()
            except BaseException:
                await self.stop(grace=0)
                raise

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Deregister, finish in-flight calls (up to `grace` seconds), remove the socket."""
        if self.registration is not None:
            await self.registration.stop(grace)
        await self._server.stop(grace)
        remove_stale_socket(self.socket_path)
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
