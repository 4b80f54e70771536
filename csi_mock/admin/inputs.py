"""Request input: bodies and query strings validated into typed models.

Every model forbids unknown keys, so a misspelt field is refused (and named) instead of
silently ignored. Reading the body is the only await in a handler, and it happens before
anything is changed.
"""

from __future__ import annotations

import json
import math
from http import HTTPStatus
from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
)

from csi_mock.admin.errors import ApiError, invalid
from csi_mock.config import Quantity
from csi_mock.fault_rules import status_code_name
from csi_mock.model.quantity import INT64_MAX
from csi_mock.observe.field_path import FieldCondition, FieldPathError, parse_condition

_M = TypeVar("_M", bound=BaseModel)

MAX_PAGE = 10_000


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object; an empty body is {}."""
    raw = await request.read()
    try:
        text = raw.decode("utf-8")  # RFC 8259: JSON exchanged between systems is UTF-8
    except UnicodeDecodeError as error:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, f"the body is not UTF-8: {error.reason} at byte {error.start}"
        ) from None
    if not text.strip():
        return {}
    try:
        body = json.loads(text, parse_int=_int_or_infinity)
    except ValueError as error:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"the body is not valid JSON: {error}") from None
    except RecursionError:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, "the body is not valid JSON: nested too deeply"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
    return body


def _int_or_infinity(digits: str) -> int | float:
    """An integer too long for int() (over 4300 digits) is read as infinity, which every
    field refuses by name, instead of failing the whole body without naming the key."""
    try:
        return int(digits)
    except ValueError:
        return -math.inf if digits.startswith("-") else math.inf


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


class SwitchesPatch(_Input):
    """Expansion and stats switches to change; absent ones keep their values."""

    controller_expansion: bool | None = Field(None, strict=True)
    node_expansion: bool | None = Field(None, strict=True)
    node_expansion_required: bool | None = Field(None, strict=True)
    online_expansion: bool | None = Field(None, strict=True)
    volume_stats: bool | None = Field(None, strict=True)


class ConditionBody(_Input):
    """A volume's condition, as VolumeCondition carries it."""

    abnormal: bool = Field(strict=True)
    message: str = Field("", max_length=1024)


class HealthEntryBody(_Input):
    """One adverse condition: a status name, a CamelCase reason, a message."""

    status: str = Field(min_length=1, max_length=64)
    reason: str = Field(min_length=1, max_length=128)
    message: str = Field("", max_length=1024)


class HealthBody(_Input):
    """A volume's or the storage backend's adverse conditions; an empty list: healthy."""

    entries: list[HealthEntryBody]


def _status_code(value: object) -> object:
    return status_code_name(value, ok=True) if isinstance(value, str) else value


StatusCodeName = Annotated[str, BeforeValidator(_status_code)]


def _condition(value: object) -> FieldCondition:
    if not isinstance(value, str):
        raise ValueError("expected PATH=VALUE")
    try:
        return parse_condition(value)
    except FieldPathError as error:
        raise ValueError(str(error)) from None


FieldConditionInput = Annotated[FieldCondition, PlainValidator(_condition)]


class VolumesQuery(_Input):
    limit: int = Field(1000, ge=1, le=MAX_PAGE)
    after: int = Field(0, ge=0, le=INT64_MAX)
    """Volume.seq of the last volume seen (keyset pagination); SQLite's integers are int64."""


class SnapshotsQuery(VolumesQuery):
    """The same paging as volumes, by Snapshot.seq."""


class JournalParams(_Input):
    method: str | None = None
    code: StatusCodeName | None = None
    volume: str | None = None
    node: str | None = None
    since: float | None = None
    after: int | None = Field(None, ge=0)
    limit: int | None = Field(None, ge=0)
    where: tuple[FieldConditionInput, ...] = Field((), max_length=32)
    """PATH=GLOB conditions on request fields (the parameter repeated)."""


class SecretHashBody(_Input):
    value: str = Field(max_length=1 << 20)
    """A candidate secret value, hashed the way the journal hashes secrets."""
