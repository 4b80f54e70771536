"""/v1/snapshots: the snapshots in the state store, in creation order, with their charges."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import SnapshotsQuery, read_query
from csi_mock.admin.views import SnapshotPage, SnapshotView

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class SnapshotRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/snapshots", self.list)

    async def list(self, request: web.Request) -> web.Response:
        """A page of at most `limit` snapshots with seq > `after` (keyset pagination).
        Empty when snapshots were never taken (or the controller does not run here)."""
        query = read_query(request, SnapshotsQuery)
        snapshots, next_after = self._driver.inventory.snapshots(query.after, query.limit)
        now = time.time()
        page = SnapshotPage(
            snapshots=[SnapshotView.of(snapshot, now) for snapshot in snapshots],
            next_after=next_after,
        )
        return web.json_response(page.to_json())
