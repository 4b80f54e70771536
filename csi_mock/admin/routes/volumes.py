"""/v1/volumes: the volumes in the state store, in creation order, with their users."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import VolumesQuery, read_query
from csi_mock.admin.resources import AttachmentView, VolumePage, VolumeView
from csi_mock.model.volume import Volume

if TYPE_CHECKING:
    from csi_mock.server import Driver


class VolumeRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/volumes", self.list)

    async def list(self, request: web.Request) -> web.Response:
        """A page of at most `limit` volumes with seq > `after` (keyset pagination)."""
        query = read_query(request, VolumesQuery)
        volumes = self._driver.store.volumes_after(query.after, query.limit + 1)
        more = len(volumes) > query.limit
        volumes = volumes[: query.limit]
        page = VolumePage(
            volumes=[self._view(volume) for volume in volumes],
            next_after=volumes[-1].seq if more else None,
        )
        return web.json_response(page.to_json())

    def _view(self, volume: Volume) -> VolumeView:
        store = self._driver.store
        staging = store.staging(volume.id)
        return VolumeView.of(
            volume,
            attachments=[
                AttachmentView(node_id=a.node_id, readonly=a.readonly)
                for a in store.attachments_of_volume(volume.id)
            ],
            staging_path=staging.staging_path if staging is not None else None,
            target_paths=sorted(p.target_path for p in store.publications_of_volume(volume.id)),
        )
