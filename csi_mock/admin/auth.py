"""Bearer-token authentication for the admin API on TCP (the unix socket needs none).

The token travels as `Authorization: Bearer <token>`, or as `X-CSI-Mock-Token: <token>`
for callers going through the Kubernetes API server's pod proxy, which consumes the
Authorization header for its own authentication and does not forward it.
"""

from __future__ import annotations

import hmac
from http import HTTPStatus

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from csi_mock.admin.errors import ApiError
from csi_mock.admin.views import TOKEN_HEADER
from csi_mock.config import AdminConfig, ConfigError


class TokenError(ConfigError):
    """The configured token cannot be used (found at start-up); the message names the key."""


def configured_token(config: AdminConfig) -> str | None:
    """admin.token, or the content of admin.token_file (read once, at start-up)."""
    if config.token:
        return config.token
    if config.token_file is None:
        return None
    try:
        token = config.token_file.read_text().strip()
    except OSError as error:
        raise TokenError(
            f"admin.token_file: cannot read {config.token_file}: {error.strerror}"
        ) from None
    if len(token) < 16:
        raise TokenError(f"admin.token_file: {config.token_file} holds fewer than 16 characters")
    return token


def presented_token(request: web.Request) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.headers.get(TOKEN_HEADER)


def bearer_auth(token: str) -> Middleware:
    """A middleware refusing (401, JSON) any request without exactly `token`."""
    expected = token.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        presented = presented_token(request)
        if presented is None:
            raise ApiError(
                HTTPStatus.UNAUTHORIZED,
                f"a bearer token is required (Authorization: Bearer <token> or {TOKEN_HEADER})",
                "Authorization",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(presented.encode(), expected):
            raise ApiError(
                HTTPStatus.UNAUTHORIZED,
                "the bearer token is not valid",
                "Authorization",
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return await handler(request)

    return check
