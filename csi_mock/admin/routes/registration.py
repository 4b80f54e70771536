"""/v1/registration/renew: register with the kubelet again, so that what NodeGetInfo
now says (a ``max_volumes_per_node`` changed with ``PATCH /v1/limits``) reaches the
node's CSINode without restarting the driver."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from aiohttp import web

from csi_mock.admin.errors import ApiError
from csi_mock.admin.views import RegistrationView

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class RegistrationRoutes:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/registration/renew", self.renew)

    async def renew(self, request: web.Request) -> web.Response:
        """200 with the registration (its verdict null until the kubelet calls again);
        409 when this process does not register with the kubelet."""
        registration = self._driver.registration
        if registration is None or registration.renewer is None:
            raise ApiError(
                HTTPStatus.CONFLICT,
                "this driver does not register with the kubelet (node.registration is "
                "not configured): there is no registration to renew",
            )
        await registration.renew()
        return web.json_response(RegistrationView.of(registration).to_json())
