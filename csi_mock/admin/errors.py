"""Admin API errors: every refusal is a JSON body naming the bad field.

    {"error": "pool 'nosuch' does not exist", "field": "name"}

Domain errors map to HTTP statuses in one table; pydantic validation errors become a 400
listing every bad field. A handler that refuses has changed nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from pydantic import ValidationError

from csi_mock.model import errors as domain

log = logging.getLogger("csi_mock.admin")

STATUS_OF_DOMAIN_ERROR: dict[type[domain.DomainError], HTTPStatus] = {
    domain.InvalidArgument: HTTPStatus.BAD_REQUEST,
    domain.OutOfRange: HTTPStatus.BAD_REQUEST,
    domain.NotFound: HTTPStatus.NOT_FOUND,
    domain.AlreadyExistsIncompatible: HTTPStatus.CONFLICT,
    domain.FailedPrecondition: HTTPStatus.CONFLICT,
    domain.CapacityExhausted: HTTPStatus.CONFLICT,
    domain.Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
}


@dataclass(frozen=True)
class FieldProblem:
    field: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "message": self.message}


class ApiError(Exception):
    """A refused request: HTTP status, message and the field at fault (if one is)."""

    def __init__(
        self,
        status: HTTPStatus,
        message: str,
        field: str | None = None,
        *,
        problems: tuple[FieldProblem, ...] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.problems = problems
        self.headers = dict(headers or {})

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.message, "field": self.field}
        if self.problems:
            body["errors"] = [problem.to_json() for problem in self.problems]
        return body

    def response(self) -> web.Response:
        return web.json_response(self.to_json(), status=self.status, headers=self.headers)


def field_name(location: tuple[int | str, ...], prefix: str = "") -> str | None:
    """A pydantic error location as a dotted field name, e.g. 'error.code'."""
    parts = [prefix] if prefix else []
    parts.extend(str(part) for part in location)
    return ".".join(parts) if parts else None  # "" for a body key that is "" itself


def invalid(error: ValidationError, prefix: str = "") -> ApiError:
    """A 400 naming every field pydantic refused; `field` is the first of them."""
    problems = []
    for problem in error.errors(include_url=False):
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown field"
        problems.append(FieldProblem(field_name(problem["loc"], prefix), message))
    summary = "; ".join(_labelled(problem) for problem in problems)
    first = next((p.field for p in problems if p.field is not None), None)
    return ApiError(HTTPStatus.BAD_REQUEST, summary, first, problems=tuple(problems))


def _labelled(problem: FieldProblem) -> str:
    if problem.field is None:
        return problem.message
    label = repr(problem.field) if problem.field == "" else problem.field
    return f"{label}: {problem.message}"


def from_domain(error: domain.DomainError, field: str | None) -> ApiError:
    for kind in type(error).__mro__:
        status = STATUS_OF_DOMAIN_ERROR.get(kind)
        if status is not None:
            return ApiError(status, str(error), field)
    return ApiError(HTTPStatus.INTERNAL_SERVER_ERROR, str(error), field)


@contextmanager
def blaming(field: str | None) -> Iterator[None]:
    """Report a domain error raised inside as an ApiError naming `field`."""
    try:
        yield
    except domain.DomainError as error:
        raise from_domain(error, field) from None


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as JSON; every change (non-GET) logged with its outcome."""
    try:
        response = await handler(request)
    except ApiError as error:
        response = error.response()
    except web.HTTPException as error:  # no such route, method not allowed
        if error.status < 400:
            raise
        allowed = error.headers.get("Allow")
        if error.status == HTTPStatus.NOT_FOUND:
            message = f"no endpoint {request.path}"
        elif allowed is not None:
            message = f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
        else:
            message = error.reason
        headers = {"Allow": allowed} if allowed is not None else {}
        response = ApiError(HTTPStatus(error.status), message, headers=headers).response()
    except Exception as error:
        log.exception("admin: %s %s failed", request.method, request.path)
        response = ApiError(
            HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(error).__name__}: {error}"
        ).response()
    if request.method not in ("GET", "HEAD"):
        log.info("admin: %s %s -> %d", request.method, request.path_qs, response.status)
    return response
