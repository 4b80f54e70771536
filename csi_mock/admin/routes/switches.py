"""/v1/switches: expansion and stats switches, changed while the driver serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import SwitchesPatch, read_body
from csi_mock.admin.routes.running import controller_of, node_of
from csi_mock.admin.views import SwitchesView

if TYPE_CHECKING:
    from csi_mock.driver import Driver

_CONTROLLER_SWITCHES = ("controller_expansion", "node_expansion_required")
_NODE_SWITCHES = ("node_expansion", "volume_stats")


class SwitchRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/switches", self.get)
        router.add_patch("/v1/switches", self.patch)

    async def get(self, request: web.Request) -> web.Response:
        return self._answer()

    async def patch(self, request: web.Request) -> web.Response:
        """Set the given switches; all are checked before any changes. A switch of a
        service that does not run in this process is a 409 naming it."""
        patch = await read_body(request, SwitchesPatch)
        given = patch.model_dump(exclude_none=True)
        for name in given:
            if name in _CONTROLLER_SWITCHES:
                controller_of(self._driver, name)
            elif name in _NODE_SWITCHES:
                node_of(self._driver, name)
        for name, value in given.items():
            setattr(self._driver.switches, name, value)
        return self._answer()

    def _answer(self) -> web.Response:
        view = SwitchesView(**self._driver.switches.to_json())
        return web.json_response(view.to_json())
