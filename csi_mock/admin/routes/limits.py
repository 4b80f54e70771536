"""/v1/limits: NodeGetInfo's max_volumes_per_node and the controller's attach limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import LimitsPatch, read_body
from csi_mock.admin.routes.running import controller_of, node_of
from csi_mock.admin.views import Limits

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class LimitsRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/limits", self.get)
        router.add_patch("/v1/limits", self.patch)

    async def get(self, request: web.Request) -> web.Response:
        return self._answer()

    async def patch(self, request: web.Request) -> web.Response:
        """Set the given limits; both are checked before either changes.

        As the start-up --attach-limit does (hostpathplugin's rule), an attach limit
        above 0 is also NodeGetInfo's max_volumes_per_node when the node service runs
        here, unless the same patch gives max_volumes_per_node itself: the kubelet then
        schedules no more volumes to the node than the controller attaches.
        """
        patch = await read_body(request, LimitsPatch)
        if (
            patch.attach_limit
            and patch.max_volumes_per_node is None
            and self._driver.node is not None
        ):
            patch = patch.model_copy(update={"max_volumes_per_node": patch.attach_limit})
        # Look up both services first: a 409 for either must leave both limits as they were.
        node = (
            node_of(self._driver, "max_volumes_per_node")
            if patch.max_volumes_per_node is not None
            else None
        )
        controller = (
            controller_of(self._driver, "attach_limit") if patch.attach_limit is not None else None
        )
        if node is not None and patch.max_volumes_per_node is not None:
            node.set_max_volumes_per_node(patch.max_volumes_per_node)
        if controller is not None and patch.attach_limit is not None:
            controller.set_attach_limit(patch.attach_limit)
        return self._answer()

    def _answer(self) -> web.Response:
        driver = self._driver
        limits = Limits(
            max_volumes_per_node=driver.node.max_volumes_per_node if driver.node else None,
            attach_limit=driver.controller.attach_limit if driver.controller else None,
        )
        return web.json_response(limits.to_json())
