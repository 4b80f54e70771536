"""Assembling and running the driver: state, services and the gRPC server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import grpc

from csi_mock.admin.server import AdminServer
from csi_mock.config import ConfigError, DriverConfig
from csi_mock.driver import Driver
from csi_mock.host.paths import remove_stale_socket
from csi_mock.host.sockets import SocketInUse, claim_socket_path
from csi_mock.observe.calls import JsonLogSink, RecordSink
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.proto import pluginregistration_pb2_grpc as reg_grpc
from csi_mock.services.controller import ControllerServicer
from csi_mock.services.identity import IdentityServicer
from csi_mock.services.interceptor import CallInterceptor
from csi_mock.services.node import NodeServicer, add_node_capabilities_to_server
from csi_mock.services.registration import KubeletRegistration, RegistrationServicer
from csi_mock.startup import StartupError

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


class RegistrationSocketError(ConfigError):
    """The registration socket cannot be created where node.registration says."""


class RegistrationServer:
    """The kubelet plugin registration service on its own socket in plugins_registry.

    The kubelet registers the driver when the socket appears and deregisters it when
    the socket disappears, so the socket exists only while the CSI socket serves.
    """

    def __init__(self, config: DriverConfig, registration: KubeletRegistration) -> None:
        self.socket_path = registration.socket
        self._servicer = RegistrationServicer(config, registration)
        self._server = self._new_server()
        self._kubelet_endpoint = config.kubelet_endpoint
        self._name = config.name
        self._listening = False
        registration.renewer = self.renew

    def _new_server(self) -> grpc.aio.Server:
        server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(self._servicer, server)
        return server

    async def renew(self) -> None:
        """Stop serving and remove the socket, then serve a new one at the same path
        (a gRPC server cannot start twice). The kubelet sees the socket go and come
        back and registers the driver again."""
        await self.stop(grace=0)
        self._server = self._new_server()
        await self.start()

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
            driver.readiness,
            [driver.journal, driver.metrics, *sinks],
            driver.faults,
            whole=driver.journal.whole_messages,
        )
        self._server = grpc.aio.server(interceptors=[self.interceptor])
        config = driver.config
        pb_grpc.add_IdentityServicer_to_server(
            IdentityServicer(config, driver.readiness, driver.switches), self._server
        )
        if driver.controller is not None:
            pb_grpc.add_ControllerServicer_to_server(
                ControllerServicer(
                    config, driver.controller, driver.switches, driver.conditions, driver.health
                ),
                self._server,
            )
        if driver.node is not None:
            pb_grpc.add_NodeServicer_to_server(
                NodeServicer(
                    config, driver.node, driver.switches, driver.conditions, driver.health
                ),
                self._server,
            )
        else:
            add_node_capabilities_to_server(config, driver.switches, self._server)
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
    """Run one driver until SIGTERM or SIGINT, then shut down gracefully."""
    await serve_many([config])


async def serve_many(configs: Sequence[DriverConfig]) -> None:
    """Run one instance per configuration in this process until SIGTERM or SIGINT,
    then shut them all down gracefully.

    Each instance is what ``serve`` runs alone: its own state directory and store,
    CSI socket, admin API and kubelet registration; they share the interpreter and
    the event loop. Each instance's admin API starts after its gRPC server (state is
    loaded by then) and stops before it. If one fails to start, those already
    started are stopped and its error is raised, naming the instance.
    """
    check_distinct(configs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    started: list[tuple[DriverServer, AdminServer]] = []
    try:
        for config in configs:
            started.append(await _start_instance(config, len(configs) > 1))
    except BaseException:
        await _stop_instances(started)
        raise
    await stop.wait()
    log.info("shutting down")
    for server, _ in started:
        # A paused neighbour sees the SIGTERM its pod's end sent it at once, not after
        # the graceful stops below.
        server.driver.neighbours.resume_all()
    await _stop_instances(started)


async def _start_instance(config: DriverConfig, named: bool) -> tuple[DriverServer, AdminServer]:
    try:
        driver = Driver.open(config)
        server = DriverServer(driver, sinks=[JsonLogSink(logging.getLogger("csi_mock.calls"))])
        admin = AdminServer(driver)
        await server.start()
    except ConfigError as error:
        if not named:
            raise
        raise type(error)(f"instance {_instance_name(config)}: {error}") from None
    try:
        await admin.start()
    except BaseException:
        await server.stop()
        raise
    log.info("serving %s (%s mode) on %s", config.name, config.mode.value, server.socket_path)
    return server, admin


async def _stop_instances(started: Sequence[tuple[DriverServer, AdminServer]]) -> None:
    for server, admin in reversed(started):
        await admin.stop()
        await server.stop()


def _instance_name(config: DriverConfig) -> str:
    """How an error names an instance: its node, else its socket."""
    return f"node {config.node.id}" if config.node.id else f"at {config.socket_path}"


def check_distinct(configs: Sequence[DriverConfig]) -> None:
    """Refuse two instances that would share a socket or a state directory (the
    second would find the first's lock or live socket; this says so before either
    starts). ConfigError names the key and both instances."""
    seen: dict[tuple[str, object], DriverConfig] = {}
    for config in configs:
        places: list[tuple[str, object]] = [
            ("endpoint", config.socket_path),
            ("state_dir", config.state_dir.resolve()),
        ]
        if config.admin.socket is not None:
            places.append(("admin.socket", config.admin.socket))
        for key, place in places:
            other = seen.setdefault((key, place), config)
            if other is not config:
                raise ConfigError(
                    f"{key}: instances {_instance_name(other)} and {_instance_name(config)}"
                    f" both use {place}; give each instance its own"
                )
