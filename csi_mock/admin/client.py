"""A typed client for the admin API.

Every call is described once, as a value (method, path, body, how to read the answer);
`AsyncAdminClient` sends it with httpx.AsyncClient and `AdminClient` with httpx.Client,
so the two expose the same methods with the same behaviour. A refused request raises
AdminError carrying the HTTP status, the API's message and the field it names.

    async with AsyncAdminClient("/var/lib/csi-mock/admin.sock") as admin:
        rule = await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=1)
        await admin.resize_pool("node-1", "20Gi")

    with AdminClient(url="http://10.0.0.7:9809", token=token) as admin:
        print(admin.pools())
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Generic, Self, TypedDict, TypeVar, Unpack, cast
from urllib.parse import quote

import httpx

from csi_mock.admin.resources import (
    FaultRuleView,
    Health,
    Limits,
    PoolView,
    SnapshotPage,
    VolumePage,
    record_from_json,
)
from csi_mock.observe.calls import CallRecord

_T = TypeVar("_T")

DEFAULT_TIMEOUT = 30.0
AUTHORIZATION = "Authorization"
_UNIX_BASE_URL = "http://csi-mock"  # the host is ignored on a unix socket
QueryValue = str | int | float


@dataclass(frozen=True)
class FieldProblem:
    field: str | None
    message: str


class AdminError(Exception):
    """The admin API refused a request (or could not be reached: status 0)."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        problems: Sequence[FieldProblem] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.problems = tuple(problems)

    def __str__(self) -> str:
        return self.message


class AdminConnectionError(AdminError):
    """The admin API did not answer (no socket, connection refused, timeout)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


class FaultSpec(TypedDict, total=False):
    """The fields of a fault rule besides `method` (docs/admin-api.md); None = not given."""

    id: str | None
    code: str | None
    """Shorthand for error={"code": ...}; `message` completes it."""
    message: str | None
    error: Mapping[str, str] | None
    delay: float | None
    hang: bool | None
    override: Mapping[str, int | float | str | bool] | None
    volume: str | None
    node: str | None
    parameters: Mapping[str, str] | None
    topology: Mapping[str, str] | None
    times: int | None
    skip: int | None
    probability: float | None
    seed: int | None


class JournalFilter(TypedDict, total=False):
    """Which records GET /v1/journal returns; None = not given."""

    method: str | None
    code: str | None
    volume: str | None
    node: str | None
    since: float | None
    """Unix time: records at or after it."""
    after: int | None
    """A record's seq: records after it (a cursor for polling)."""
    limit: int | None
    """The last `limit` matching records."""


def fault_body(method: str, spec: FaultSpec) -> dict[str, Any]:
    """The POST /v1/faults body: the rule spec, with code/message folded into error."""
    body: dict[str, Any] = {"method": method}
    for key, value in spec.items():
        if value is not None:
            body[key] = dict(value) if isinstance(value, Mapping) else value
    shorthand = {key: body.pop(key) for key in ("code", "message") if key in body}
    if shorthand:
        if "error" in body:
            raise ValueError("give either error or code/message, not both")
        body["error"] = shorthand
    return body


# -- the calls, as values --------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    return response.json()


@dataclass(frozen=True)
class _Call(Generic[_T]):
    method: str
    path: str
    read: Callable[[httpx.Response], _T]
    params: Mapping[str, QueryValue] | None = None
    body: Mapping[str, Any] | None = None
    accept: frozenset[int] = field(default_factory=lambda: frozenset({200, 201}))

    def result(self, response: httpx.Response) -> _T:
        if response.status_code not in self.accept:
            raise _error_of(response)
        return self.read(response)


def _error_of(response: httpx.Response) -> AdminError:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict) or "error" not in data:
        reason = response.reason_phrase or HTTPStatus(response.status_code).phrase
        text = response.text.strip()[:200]
        return AdminError(response.status_code, f"HTTP {response.status_code} {reason}: {text}")
    problems = [
        FieldProblem(p.get("field"), str(p.get("message", "")))
        for p in data.get("errors", [])
        if isinstance(p, dict)
    ]
    return AdminError(response.status_code, str(data["error"]), data.get("field"), problems)


def _query(values: Mapping[str, QueryValue | None]) -> dict[str, QueryValue]:
    return {key: value for key, value in values.items() if value is not None}


class _Api:
    """Every admin API call: what to send and how to read the answer."""

    @staticmethod
    def health() -> _Call[Health]:
        return _Call(
            "GET",
            "/healthz",
            lambda r: Health.from_json(r.json()),
            accept=frozenset({200, 503}),
        )

    @staticmethod
    def faults() -> _Call[list[FaultRuleView]]:
        return _Call(
            "GET", "/v1/faults", lambda r: [FaultRuleView.from_json(x) for x in r.json()["rules"]]
        )

    @staticmethod
    def fault(rule_id: str) -> _Call[FaultRuleView]:
        return _Call("GET", f"/v1/faults/{_segment(rule_id)}", _rule)

    @staticmethod
    def add_fault(method: str, spec: FaultSpec) -> _Call[FaultRuleView]:
        return _Call("POST", "/v1/faults", _rule, body=fault_body(method, spec))

    @staticmethod
    def remove_fault(rule_id: str) -> _Call[FaultRuleView]:
        return _Call("DELETE", f"/v1/faults/{_segment(rule_id)}", _rule)

    @staticmethod
    def clear_faults() -> _Call[int]:
        return _Call("DELETE", "/v1/faults", lambda r: int(r.json()["removed"]))

    @staticmethod
    def pools() -> _Call[list[PoolView]]:
        return _Call(
            "GET", "/v1/pools", lambda r: [PoolView.from_json(x) for x in r.json()["pools"]]
        )

    @staticmethod
    def pool(name: str) -> _Call[PoolView]:
        return _Call("GET", f"/v1/pools/{_segment(name)}", _pool)

    @staticmethod
    def pool_action(name: str, action: str, body: Mapping[str, Any]) -> _Call[PoolView]:
        return _Call("POST", f"/v1/pools/{_segment(name)}/{action}", _pool, body=body)

    @staticmethod
    def capacity(action: str | None) -> _Call[bool]:
        path = f"/v1/capacity/{action}" if action else "/v1/capacity"
        return _Call("POST" if action else "GET", path, lambda r: bool(r.json()["frozen"]))

    @staticmethod
    def limits(patch: Mapping[str, int | None] | None = None) -> _Call[Limits]:
        if patch is None:
            return _Call("GET", "/v1/limits", lambda r: Limits.from_json(r.json()))
        body = {k: v for k, v in patch.items() if v is not None}
        return _Call("PATCH", "/v1/limits", lambda r: Limits.from_json(r.json()), body=body)

    @staticmethod
    def volumes(limit: int | None, after: int | None) -> _Call[VolumePage]:
        return _Call(
            "GET",
            "/v1/volumes",
            lambda r: VolumePage.from_json(r.json()),
            params=_query({"limit": limit, "after": after}),
        )

    @staticmethod
    def snapshots(limit: int | None, after: int | None) -> _Call[SnapshotPage]:
        return _Call(
            "GET",
            "/v1/snapshots",
            lambda r: SnapshotPage.from_json(r.json()),
            params=_query({"limit": limit, "after": after}),
        )

    @staticmethod
    def journal(query: JournalFilter) -> _Call[list[CallRecord]]:
        return _Call(
            "GET",
            "/v1/journal",
            lambda r: [record_from_json(x) for x in r.json()["records"]],
            params=_query(cast(Mapping[str, QueryValue | None], query)),
        )

    @staticmethod
    def metrics() -> _Call[str]:
        return _Call("GET", "/metrics", lambda r: r.text)


def _rule(response: httpx.Response) -> FaultRuleView:
    return FaultRuleView.from_json(response.json())


def _pool(response: httpx.Response) -> PoolView:
    return PoolView.from_json(response.json())


def _segment(value: str) -> str:
    return quote(value, safe="")


# -- connection ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Endpoint:
    socket: str | None
    base_url: str
    headers: dict[str, str]

    @classmethod
    def of(
        cls,
        socket: str | os.PathLike[str] | None,
        url: str | None,
        token: str | None,
        token_header: str,
        headers: Mapping[str, str] | None,
    ) -> _Endpoint:
        if (socket is None) == (url is None):
            raise ValueError("give the admin API's unix socket or its url (with a token)")
        sent = dict(headers or {})
        if token:
            sent[token_header] = f"Bearer {token}" if token_header == AUTHORIZATION else token
        if socket is not None:
            return cls(os.fspath(socket), _UNIX_BASE_URL, sent)
        assert url is not None
        return cls(None, url, sent)

    def describe(self) -> str:
        return f"unix://{self.socket}" if self.socket else self.base_url


def _unreachable(endpoint: _Endpoint, error: httpx.TransportError) -> AdminConnectionError:
    return AdminConnectionError(
        f"cannot reach the admin API at {endpoint.describe()}: {error or type(error).__name__}"
    )


# -- the clients -----------------------------------------------------------------------


class AsyncAdminClient:
    """The admin API over httpx.AsyncClient: a unix socket, or a URL with a token."""

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        token_header: str = AUTHORIZATION,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        self.endpoint = _Endpoint.of(socket, url, token, token_header, headers)
        transport = (
            httpx.AsyncHTTPTransport(uds=self.endpoint.socket) if self.endpoint.socket else None
        )
        self._http = httpx.AsyncClient(
            base_url=self.endpoint.base_url,
            headers=self.endpoint.headers,
            timeout=timeout,
            transport=transport,
            verify=verify,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call[_T]) -> _T:
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, json=call.body
            )
        except httpx.TransportError as error:
            raise _unreachable(self.endpoint, error) from error
        return call.result(response)

    async def health(self) -> Health:
        """Readiness (never raises for a not-ready driver: look at .ready)."""
        return await self._send(_Api.health())

    async def faults(self) -> list[FaultRuleView]:
        return await self._send(_Api.faults())

    async def fault(self, rule_id: str) -> FaultRuleView:
        return await self._send(_Api.fault(rule_id))

    async def add_fault(self, method: str, **spec: Unpack[FaultSpec]) -> FaultRuleView:
        """Add a rule at the end of the list, e.g. add_fault("CreateVolume", code=..., times=1)."""
        return await self._send(_Api.add_fault(method, spec))

    async def remove_fault(self, rule_id: str) -> FaultRuleView:
        """Remove a rule; returns it with its final counters."""
        return await self._send(_Api.remove_fault(rule_id))

    async def clear_faults(self) -> int:
        """Remove every rule; returns how many there were."""
        return await self._send(_Api.clear_faults())

    async def pools(self) -> list[PoolView]:
        return await self._send(_Api.pools())

    async def pool(self, name: str) -> PoolView:
        return await self._send(_Api.pool(name))

    async def resize_pool(self, name: str, size: int | str) -> PoolView:
        """Set the pool's size (bytes or a quantity like "10Gi"); 409 below what is used."""
        return await self._send(_Api.pool_action(name, "resize", {"size": size}))

    async def consume(self, name: str, amount: int | str) -> PoolView:
        """Take space outside CSI (drift); 409 beyond what is free."""
        return await self._send(_Api.pool_action(name, "consume", {"bytes": amount}))

    async def release(self, name: str, amount: int | str) -> PoolView:
        """Give back space taken by consume(); 409 beyond what was consumed."""
        return await self._send(_Api.pool_action(name, "release", {"bytes": amount}))

    async def capacity_frozen(self) -> bool:
        return await self._send(_Api.capacity(None))

    async def freeze_capacity(self) -> bool:
        """Answer GetCapacity from a snapshot taken now, until unfrozen."""
        return await self._send(_Api.capacity("freeze"))

    async def unfreeze_capacity(self) -> bool:
        return await self._send(_Api.capacity("unfreeze"))

    async def limits(self) -> Limits:
        return await self._send(_Api.limits())

    async def set_limits(
        self, *, max_volumes_per_node: int | None = None, attach_limit: int | None = None
    ) -> Limits:
        """Change the given limits (both or neither: a 409 for either changes nothing)."""
        patch = {"max_volumes_per_node": max_volumes_per_node, "attach_limit": attach_limit}
        return await self._send(_Api.limits(patch))

    async def volumes(self, *, limit: int | None = None, after: int | None = None) -> VolumePage:
        return await self._send(_Api.volumes(limit, after))

    async def snapshots(
        self, *, limit: int | None = None, after: int | None = None
    ) -> SnapshotPage:
        """A page of snapshots in creation order, with the pool bytes each one takes."""
        return await self._send(_Api.snapshots(limit, after))

    async def journal(self, **query: Unpack[JournalFilter]) -> list[CallRecord]:
        """Call records, oldest first, e.g. journal(method="CreateVolume", code="OK")."""
        return await self._send(_Api.journal(query))

    async def metrics_text(self) -> str:
        """The Prometheus text exposition."""
        return await self._send(_Api.metrics())


class AdminClient:
    """The same API, synchronous (httpx.Client)."""

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        token_header: str = AUTHORIZATION,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        self.endpoint = _Endpoint.of(socket, url, token, token_header, headers)
        transport = httpx.HTTPTransport(uds=self.endpoint.socket) if self.endpoint.socket else None
        self._http = httpx.Client(
            base_url=self.endpoint.base_url,
            headers=self.endpoint.headers,
            timeout=timeout,
            transport=transport,
            verify=verify,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call[_T]) -> _T:
        try:
            response = self._http.request(
                call.method, call.path, params=call.params, json=call.body
            )
        except httpx.TransportError as error:
            raise _unreachable(self.endpoint, error) from error
        return call.result(response)

    def health(self) -> Health:
        return self._send(_Api.health())

    def faults(self) -> list[FaultRuleView]:
        return self._send(_Api.faults())

    def fault(self, rule_id: str) -> FaultRuleView:
        return self._send(_Api.fault(rule_id))

    def add_fault(self, method: str, **spec: Unpack[FaultSpec]) -> FaultRuleView:
        return self._send(_Api.add_fault(method, spec))

    def remove_fault(self, rule_id: str) -> FaultRuleView:
        return self._send(_Api.remove_fault(rule_id))

    def clear_faults(self) -> int:
        return self._send(_Api.clear_faults())

    def pools(self) -> list[PoolView]:
        return self._send(_Api.pools())

    def pool(self, name: str) -> PoolView:
        return self._send(_Api.pool(name))

    def resize_pool(self, name: str, size: int | str) -> PoolView:
        return self._send(_Api.pool_action(name, "resize", {"size": size}))

    def consume(self, name: str, amount: int | str) -> PoolView:
        return self._send(_Api.pool_action(name, "consume", {"bytes": amount}))

    def release(self, name: str, amount: int | str) -> PoolView:
        return self._send(_Api.pool_action(name, "release", {"bytes": amount}))

    def capacity_frozen(self) -> bool:
        return self._send(_Api.capacity(None))

    def freeze_capacity(self) -> bool:
        return self._send(_Api.capacity("freeze"))

    def unfreeze_capacity(self) -> bool:
        return self._send(_Api.capacity("unfreeze"))

    def limits(self) -> Limits:
        return self._send(_Api.limits())

    def set_limits(
        self, *, max_volumes_per_node: int | None = None, attach_limit: int | None = None
    ) -> Limits:
        patch = {"max_volumes_per_node": max_volumes_per_node, "attach_limit": attach_limit}
        return self._send(_Api.limits(patch))

    def volumes(self, *, limit: int | None = None, after: int | None = None) -> VolumePage:
        return self._send(_Api.volumes(limit, after))

    def snapshots(self, *, limit: int | None = None, after: int | None = None) -> SnapshotPage:
        return self._send(_Api.snapshots(limit, after))

    def journal(self, **query: Unpack[JournalFilter]) -> list[CallRecord]:
        return self._send(_Api.journal(query))

    def metrics_text(self) -> str:
        return self._send(_Api.metrics())
