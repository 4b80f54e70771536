"""Request input: bodies and query strings validated into typed models.

Every model forbids unknown keys, so a misspelt field is refused (and named) instead of
silently ignored. Reading the body is the only await in a handler, and it happens before
anything is changed.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from csi_mock.admin.errors import ApiError, invalid
from csi_mock.config import Quantity
from csi_mock.fault_rules import status_code_name

_M = TypeVar("_M", bound=BaseModel)

MAX_PAGE = 10_000


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object; an empty body is {}."""
    text = await request.text()
    if not text.strip():
        return {}
    try:
        body = json.loads(text)
    except json.JSONDecodeError as error:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"the body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    return body


def validated(model: type[_M], data: dict[str, Any]) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise invalid(error) from None


async def read_body(request: web.Request, model: type[_M]) -> _M:
    return validated(model, await json_object(request))


def read_query(request: web.Request, model: type[_M]) -> _M:
    return validated(model, dict(request.query))


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResizeBody(_Input):
    size: Quantity
    """New pool size: bytes or a quantity such as "10Gi"."""


class AmountBody(_Input):
    bytes: Quantity
    """Bytes (or a quantity) to consume or release outside CSI."""


class LimitsPatch(_Input):
    max_volumes_per_node: int | None = Field(None, ge=0, strict=True)
    attach_limit: int | None = Field(None, ge=0, strict=True)


def _status_code(value: object) -> object:
    return status_code_name(value, ok=True) if isinstance(value, str) else value


StatusCodeName = Annotated[str, BeforeValidator(_status_code)]


class VolumesQuery(_Input):
    limit: int = Field(1000, ge=1, le=MAX_PAGE)
    after: int = Field(0, ge=0)
    """Volume.seq of the last volume seen (keyset pagination)."""


class JournalParams(_Input):
    method: str | None = None
    code: StatusCodeName | None = None
    volume: str | None = None
    node: str | None = None
    since: float | None = None
    after: int | None = Field(None, ge=0)
    limit: int | None = Field(None, ge=0)
