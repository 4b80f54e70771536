"""/v1/neighbours: pause and resume the pod's other programs that admin.neighbours names
(csi_mock.host.neighbours), e.g. a sidecar a test stops for a while."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import blaming

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class NeighbourRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/neighbours", self.list)
        router.add_post("/v1/neighbours/{name}/pause", self.pause)
        router.add_post("/v1/neighbours/{name}/resume", self.resume)

    async def list(self, request: web.Request) -> web.Response:
        neighbours = self._driver.neighbours.list()
        return web.json_response({"neighbours": [n.to_json() for n in neighbours]})

    async def pause(self, request: web.Request) -> web.Response:
        """200 once every process of the program shows as stopped; 404 for a program
        admin.neighbours does not name, 409 when none of it runs here."""
        name = request.match_info["name"]
        with blaming("name"):
            # It waits (up to 2 s) for the processes to show as stopped: off the loop.
            paused = await asyncio.to_thread(self._driver.neighbours.pause, name)
        return web.json_response(paused.to_json())

    async def resume(self, request: web.Request) -> web.Response:
        with blaming("name"):
            resumed = self._driver.neighbours.resume(request.match_info["name"])
        return web.json_response(resumed.to_json())
