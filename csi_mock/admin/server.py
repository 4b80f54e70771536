"""The admin API server: HTTP/JSON on a unix socket, optionally on TCP with a token.

It runs on the event loop of the gRPC server and every handler changes the driver in
one synchronous step, so a change is atomic with respect to the RPCs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.auth import bearer_auth, configured_token
from csi_mock.admin.errors import json_errors
from csi_mock.admin.routes import all_routes
from csi_mock.config import ConfigError
from csi_mock.host.paths import remove_stale_socket
from csi_mock.host.sockets import SocketInUse, claim_socket_path

if TYPE_CHECKING:
    from csi_mock.driver import Driver

log = logging.getLogger("csi_mock.admin")

MAX_BODY_BYTES = 1 << 20
SOCKET_MODE = 0o600
"""The unix socket needs no token, so only the driver's own user may connect."""
SHUTDOWN_GRACE_SECONDS = 10.0


class ListenError(ConfigError):
    """The admin API cannot listen where configured (path too long, port in use...)."""


@contextmanager
def _listening(key: str, where: str) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        raise ListenError(f"{key}: cannot listen on {where}: {error.strerror or error}") from None


def create_app(driver: Driver, *, token: str | None = None) -> web.Application:
    """The admin API of `driver`; with a token, every request must present it."""
    middlewares = [json_errors] if token is None else [json_errors, bearer_auth(token)]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    for routes in all_routes(driver):
        routes.register(app.router)
    return app


class AdminServer:
    """The admin API of one driver: its unix socket, and TCP when admin.tcp is set."""

    def __init__(self, driver: Driver, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        self.driver = driver
        self.socket_path: Path = driver.config.admin_socket_path
        self.tcp: str | None = driver.config.admin.tcp
        self._grace = grace
        self._runners: list[web.AppRunner] = []
        self._listening = False

    async def start(self) -> None:
        """Listen; a TokenError or ListenError (both ConfigErrors) names the key at fault."""
        token = configured_token(self.driver.config.admin) if self.tcp else None
        try:
            with _listening("admin.socket", str(self.socket_path)):
                self.socket_path.parent.mkdir(parents=True, exist_ok=True)
            try:
                claim_socket_path(self.socket_path)
            except SocketInUse as error:
                raise ListenError(
                    f"admin.socket: {error}; stop the driver serving there, or give this one"
                    " another admin.socket"
                ) from None
            unix = await self._runner(create_app(self.driver))
            with _listening("admin.socket", str(self.socket_path)):
                await web.UnixSite(unix, str(self.socket_path)).start()
            self._listening = True
            os.chmod(self.socket_path, SOCKET_MODE)
            if self.tcp is not None:
                assert token is not None  # AdminConfig refuses tcp without a token
                host, _, port = self.tcp.rpartition(":")
                tcp = await self._runner(create_app(self.driver, token=token))
                with _listening("admin.tcp", self.tcp):
                    await web.TCPSite(tcp, host, int(port)).start()
        except BaseException:
            await self.stop()
            raise
        log.info("admin API on unix://%s", self.socket_path)
        if self.tcp_address is not None:
            log.info("admin API on http://%s:%d (bearer token)", *self.tcp_address)

    async def stop(self) -> None:
        """Stop listening, let in-flight requests finish (up to the grace), remove the socket."""
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()
        if self._listening:  # else the path may be another driver's live socket
            remove_stale_socket(self.socket_path)
            self._listening = False

    @property
    def tcp_address(self) -> tuple[str, int] | None:
        """The bound TCP (host, port), e.g. to learn the port when admin.tcp asks for 0."""
        if len(self._runners) < 2:
            return None
        address = self._runners[1].addresses[0]
        return str(address[0]), int(address[1])

    async def _runner(self, app: web.Application) -> web.AppRunner:
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self._grace)
        await runner.setup()
        self._runners.append(runner)
        return runner
