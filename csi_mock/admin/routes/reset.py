"""/v1/reset: the driver back to how it started, so that a running one can be handed to
the next test instead of a new one (``Driver.reset``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import blaming

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class ResetRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/reset", self.reset)

    async def reset(self, request: web.Request) -> web.Response:
        """200 once reset; 409 naming what the driver still holds, and nothing reset."""
        with blaming(None):
            self._driver.reset()
        return web.json_response({"reset": True})
