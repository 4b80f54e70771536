"""/v1/volumes/{id}/health and /v1/storage-health: the adverse conditions the CSI v1.13
health RPCs report (GET_VOLUME_HEALTH, LIST_VOLUME_HEALTH, GET_STORAGE_HEALTH)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import blaming
from csi_mock.admin.inputs import HealthBody, read_body
from csi_mock.admin.routes.conditions import known_volume_id
from csi_mock.admin.views import HealthView
from csi_mock.backend.health import HealthEntry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from csi_mock.driver import Driver


class VolumeHealthRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/volume-health", self.list)
        router.add_get("/v1/volumes/{id}/health", self.get)
        router.add_put("/v1/volumes/{id}/health", self.put)
        router.add_delete("/v1/volumes/{id}/health", self.delete)
        router.add_get("/v1/storage-health", self.get_storage)
        router.add_put("/v1/storage-health", self.put_storage)
        router.add_delete("/v1/storage-health", self.delete_storage)

    async def list(self, request: web.Request) -> web.Response:
        """The health set for each volume (volumes not listed report the default)."""
        volumes = self._driver.health.volumes()
        views = [_view(volume_id, entries, True) for volume_id, entries in sorted(volumes.items())]
        return web.json_response([view.to_json() for view in views])

    async def get(self, request: web.Request) -> web.Response:
        volume_id = known_volume_id(self._driver, request)
        entries = self._driver.health.of_volume(volume_id)
        return web.json_response(_view(volume_id, entries or (), entries is not None).to_json())

    async def put(self, request: web.Request) -> web.Response:
        """Set the volume's conditions, reported from the next health call on; an empty
        list reports it healthy whatever a node measures."""
        body = await read_body(request, HealthBody)
        volume_id = known_volume_id(self._driver, request)
        entries = _entries(body)
        with blaming("entries"):
            self._driver.health.set_volume(volume_id, entries)
        return web.json_response(_view(volume_id, entries, True).to_json())

    async def delete(self, request: web.Request) -> web.Response:
        """Forget what was set: the default again (nothing, or what a node measures)."""
        volume_id = known_volume_id(self._driver, request)
        self._driver.health.clear_volume(volume_id)
        return web.json_response(_view(volume_id, (), False).to_json())

    async def get_storage(self, request: web.Request) -> web.Response:
        entries = self._driver.health.storage()
        return web.json_response(_view("", entries, bool(entries)).to_json())

    async def put_storage(self, request: web.Request) -> web.Response:
        body = await read_body(request, HealthBody)
        entries = _entries(body)
        with blaming("entries"):
            self._driver.health.set_storage(entries)
        return web.json_response(_view("", entries, True).to_json())

    async def delete_storage(self, request: web.Request) -> web.Response:
        self._driver.health.set_storage(())
        return web.json_response(_view("", (), False).to_json())


def _entries(body: HealthBody) -> list[HealthEntry]:
    return [HealthEntry(e.status, e.reason, e.message) for e in body.entries]


def _view(volume_id: str, entries: Sequence[HealthEntry], set_: bool) -> HealthView:
    return HealthView(volume_id, tuple(entry.to_json() for entry in entries), set_)
