"""/v1/volumes: the volumes in the state store, in creation order, with their users."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import VolumesQuery, read_query
from csi_mock.admin.views import AttachmentView, VolumePage, VolumeView
from csi_mock.backend.inventory import VolumeUse

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class VolumeRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/volumes", self.list)

    async def list(self, request: web.Request) -> web.Response:
        """A page of at most `limit` volumes with seq > `after` (keyset pagination)."""
        query = read_query(request, VolumesQuery)
        uses, next_after = self._driver.inventory.volume_uses(query.after, query.limit)
        page = VolumePage(volumes=[_view(use) for use in uses], next_after=next_after)
        return web.json_response(page.to_json())


def _view(use: VolumeUse) -> VolumeView:
    return VolumeView.of(
        use.volume,
        attachments=[
            AttachmentView(node_id=a.node_id, readonly=a.readonly) for a in use.attachments
        ],
        staging_path=use.staging_path,
        target_paths=list(use.target_paths),
    )
