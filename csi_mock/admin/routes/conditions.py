"""/v1/volumes/{id}/condition: the condition a volume reports (VOLUME_CONDITION)."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import ApiError
from csi_mock.admin.inputs import ConditionBody, read_body
from csi_mock.admin.views import ConditionView
from csi_mock.backend.conditions import HEALTHY, VolumeCondition

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class ConditionRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/conditions", self.list)
        router.add_get("/v1/volumes/{id}/condition", self.get)
        router.add_put("/v1/volumes/{id}/condition", self.put)
        router.add_delete("/v1/volumes/{id}/condition", self.delete)

    async def list(self, request: web.Request) -> web.Response:
        """Every condition set, by volume ID (volumes not listed are healthy)."""
        conditions = self._driver.conditions.all()
        return web.json_response(
            [_view(volume_id, c).to_json() for volume_id, c in sorted(conditions.items())]
        )

    async def get(self, request: web.Request) -> web.Response:
        volume_id = self._volume_id(request)
        condition = self._driver.conditions.of(volume_id) or HEALTHY
        return web.json_response(_view(volume_id, condition).to_json())

    async def put(self, request: web.Request) -> web.Response:
        """Set the volume's condition, reported from the next ListVolumes,
        ControllerGetVolume or NodeGetVolumeStats on."""
        body = await read_body(request, ConditionBody)
        volume_id = self._volume_id(request)
        condition = VolumeCondition(body.abnormal, body.message)
        self._driver.conditions.set(volume_id, condition)
        return web.json_response(_view(volume_id, condition).to_json())

    async def delete(self, request: web.Request) -> web.Response:
        """Forget the volume's condition: it is healthy again."""
        volume_id = self._volume_id(request)
        self._driver.conditions.clear(volume_id)
        return web.json_response(_view(volume_id, HEALTHY).to_json())

    def _volume_id(self, request: web.Request) -> str:
        return known_volume_id(self._driver, request)


def known_volume_id(driver: Driver, request: web.Request) -> str:
    """The path's volume ID; a volume the controller here does not know is a 404. A
    node-only process keeps no volume list, so it takes any ID."""
    volume_id = request.match_info["id"]
    if driver.controller is not None and not driver.inventory.has_volume(volume_id):
        raise ApiError(HTTPStatus.NOT_FOUND, f"volume {volume_id!r} does not exist", "volume_id")
    return volume_id


def _view(volume_id: str, condition: VolumeCondition) -> ConditionView:
    return ConditionView(volume_id, condition.abnormal, condition.message)
