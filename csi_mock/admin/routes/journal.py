"""/v1/journal: the last calls, filtered (a JournalQuery); the hash of a secret value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.inputs import JournalParams, SecretHashBody, read_body, validated
from csi_mock.admin.views import record_to_json
from csi_mock.control.journal import JournalQuery

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class JournalRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/journal", self.query)
        router.add_post("/v1/journal/secret-hash", self.secret_hash)

    async def query(self, request: web.Request) -> web.Response:
        data: dict[str, object] = dict(request.query)
        if "where" in request.query:  # the one parameter that repeats
            data["where"] = request.query.getall("where")
        params = validated(JournalParams, data)
        journal = self._driver.journal
        records = journal.query(JournalQuery(**dict(params)))
        return web.json_response(
            {
                "records": [record_to_json(r) for r in records],
                "capacity": journal.capacity,
                "whole_capacity": journal.whole_capacity,
            }
        )

    async def secret_hash(self, request: web.Request) -> web.Response:
        """The clear value is in the body only, never in a URL or an answer."""
        body = await read_body(request, SecretHashBody)
        return web.json_response({"hash": self._driver.journal.secret_hash(body.value)})
