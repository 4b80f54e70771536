"""/v1/journal: the last calls, filtered (a JournalQuery)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import JournalParams, read_query
from csi_mock.admin.resources import record_to_json
from csi_mock.control.journal import JournalQuery

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class JournalRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/journal", self.query)

    async def query(self, request: web.Request) -> web.Response:
        params = read_query(request, JournalParams)
        journal = self._driver.journal
        records = journal.query(JournalQuery(**params.model_dump()))
        return web.json_response(
            {"records": [record_to_json(r) for r in records], "capacity": journal.capacity}
        )
