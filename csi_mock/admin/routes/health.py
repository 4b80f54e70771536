"""/healthz and /metrics: is the driver ready, and what has it done."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.views import Health, RegistrationView

if TYPE_CHECKING:
    from csi_mock.driver import Driver

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HealthRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/healthz", self.health)
        router.add_get("/metrics", self.metrics)

    async def health(self, request: web.Request) -> web.Response:
        """200 when the state is loaded and volume RPCs are served, else 503.

        The kubelet registration is shown but does not change the status: a driver the
        kubelet refused still serves, as the CSI socket may be used without the kubelet.
        """
        readiness = self._driver.readiness
        registration = self._driver.registration
        health = Health(
            ready=readiness.ready,
            failure=readiness.failure,
            registration=RegistrationView.of(registration) if registration else None,
        )
        status = HTTPStatus.OK if health.ready else HTTPStatus.SERVICE_UNAVAILABLE
        return web.json_response(health.to_json(), status=status)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._driver.metrics.exposition(),
            headers={"Content-Type": METRICS_CONTENT_TYPE},
        )
