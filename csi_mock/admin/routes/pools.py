"""/v1/pools: live pool accounting and the knobs that change it.

Resizing persists the new size in the state store; consume/release model space taken
outside CSI (drift), also persisted. Each change is one synchronous step on the event
loop that serves the RPCs, so no CreateVolume ever sees half of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import blaming
from csi_mock.admin.inputs import AmountBody, ResizeBody, read_body
from csi_mock.admin.routes.running import controller_of
from csi_mock.admin.views import PoolView
from csi_mock.model.pool import Pool

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class PoolRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/pools", self.list)
        router.add_get("/v1/pools/{name}", self.get)
        router.add_post("/v1/pools/{name}/resize", self.resize)
        router.add_post("/v1/pools/{name}/consume", self.consume)
        router.add_post("/v1/pools/{name}/release", self.release)

    async def list(self, request: web.Request) -> web.Response:
        controller = self._driver.controller
        pools = controller.pools if controller is not None else []
        return web.json_response({"pools": [self._view(pool).to_json() for pool in pools]})

    async def get(self, request: web.Request) -> web.Response:
        return self._answer(self._pool(request))

    async def resize(self, request: web.Request) -> web.Response:
        name = self._pool(request).name
        body = await read_body(request, ResizeBody)
        with blaming("size"):
            pool = controller_of(self._driver).resize_pool(name, body.size)
        return self._answer(pool)

    async def consume(self, request: web.Request) -> web.Response:
        name = self._pool(request).name
        body = await read_body(request, AmountBody)
        with blaming("bytes"):
            pool = controller_of(self._driver).consume_external(name, body.bytes)
        return self._answer(pool)

    async def release(self, request: web.Request) -> web.Response:
        name = self._pool(request).name
        body = await read_body(request, AmountBody)
        with blaming("bytes"):
            pool = controller_of(self._driver).release_external(name, body.bytes)
        return self._answer(pool)

    def _pool(self, request: web.Request) -> Pool:
        with blaming("name"):
            return controller_of(self._driver, "name").pool(request.match_info["name"])

    def _view(self, pool: Pool) -> PoolView:
        return PoolView.of(pool, controller_of(self._driver).kinds.values())

    def _answer(self, pool: Pool) -> web.Response:
        return web.json_response(self._view(pool).to_json())
