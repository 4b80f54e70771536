"""/v1/faults: the ordered fault rules and their counters."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import ApiError
from csi_mock.admin.inputs import json_object, validated
from csi_mock.control.faults import FaultEngine, FaultRule
from csi_mock.fault_rules import FaultRuleSpec

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class FaultRoutes:
    def __init__(self, driver: Driver) -> None:
        self._faults: FaultEngine = driver.faults

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/faults", self.list)
        router.add_post("/v1/faults", self.add)
        router.add_delete("/v1/faults", self.clear)
        router.add_get("/v1/faults/{id}", self.get)
        router.add_delete("/v1/faults/{id}", self.remove)

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response({"rules": [rule.describe() for rule in self._faults.rules()]})

    async def add(self, request: web.Request) -> web.Response:
        spec = validated(FaultRuleSpec, await json_object(request))
        try:
            rule = self._faults.add(spec)
        except KeyError as error:
            raise ApiError(HTTPStatus.CONFLICT, error.args[0], "id") from None
        return web.json_response(rule.describe(), status=HTTPStatus.CREATED)

    async def get(self, request: web.Request) -> web.Response:
        return web.json_response(self._rule(request, self._faults.get).describe())

    async def remove(self, request: web.Request) -> web.Response:
        """Remove a rule; the answer is the rule with its final counters."""
        return web.json_response(self._rule(request, self._faults.remove).describe())

    async def clear(self, request: web.Request) -> web.Response:
        return web.json_response({"removed": self._faults.clear()})

    @staticmethod
    def _rule(request: web.Request, lookup: Callable[[str], FaultRule]) -> FaultRule:
        try:
            return lookup(request.match_info["id"])
        except KeyError as error:
            raise ApiError(HTTPStatus.NOT_FOUND, error.args[0], "id") from None
