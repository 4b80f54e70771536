"""/v1/capacity: freeze GetCapacity at a snapshot (stale capacity), or unfreeze it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.routes.running import controller_of

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class CapacityRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/capacity", self.status)
        router.add_post("/v1/capacity/freeze", self.freeze)
        router.add_post("/v1/capacity/unfreeze", self.unfreeze)

    async def status(self, request: web.Request) -> web.Response:
        return self._answer()

    async def freeze(self, request: web.Request) -> web.Response:
        controller_of(self._driver).freeze_capacity()
        return self._answer()

    async def unfreeze(self, request: web.Request) -> web.Response:
        controller_of(self._driver).unfreeze_capacity()
        return self._answer()

    def _answer(self) -> web.Response:
        return web.json_response({"frozen": controller_of(self._driver).capacity_frozen})
