"""Every admin API call as a value: what to send and how to read the answer.

The clients (`csi_mock.admin.client`) only send these; a refused request is read
into an AdminError carrying the HTTP status, the API's message and the field it names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Generic, TypedDict, TypeVar, cast
from urllib.parse import quote

import httpx

from csi_mock.admin.views import (
    ConditionView,
    FaultRuleView,
    Health,
    HealthView,
    Limits,
    PoolView,
    RegistrationView,
    SnapshotPage,
    SwitchesView,
    VolumePage,
    record_from_json,
)
from csi_mock.host.neighbours import Neighbour
from csi_mock.observe.calls import CallRecord

_T = TypeVar("_T")

QueryValue = str | int | float | list[str]


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
    """The fields of a fault rule besides `method` (docs/admin-api.md); None = not given.

    A typed copy, for callers' type checkers, of the fields `csi_mock.fault_rules.
    FaultRuleSpec` declares (error also as code/message); tests/control/test_faults.py
    holds the two together, and `csi-mock ctl fault add` takes its options from here.
    """

    id: str | None
    code: str | None
    """Shorthand for error={"code": ...}; `message` completes it."""
    message: str | None
    error: Mapping[str, str] | None
    delay: float | None
    hang: bool | None
    override: Mapping[str, Any] | None
    """Reply field path -> value, e.g. {"volume_condition.abnormal": True}."""
    rescue: Mapping[str, Any] | None
    """{"code": "NOT_FOUND", "reply": {...}}: that failure (any, without code) becomes OK."""
    volume: str | None
    node: str | None
    parameters: Mapping[str, str] | None
    topology: Mapping[str, str] | None
    where: Mapping[str, str | int | float | bool] | None
    """Request field path -> glob or comparison, e.g. {"capacity_range.required_bytes":
    ">1Gi"}."""
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
    where: Mapping[str, str] | None
    """Field path -> glob, all of which must match: e.g.
    {'volume_context["csi.storage.k8s.io/pod.name"]': "web-0"}."""


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


@dataclass(frozen=True)
class Call(Generic[_T]):
    """One request, and how to read its answer (a status outside `accept` is an AdminError)."""

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


class Api:
    """Every admin API call: what to send and how to read the answer."""

    @staticmethod
    def health() -> Call[Health]:
        return Call(
            "GET",
            "/healthz",
            lambda r: Health.from_json(r.json()),
            accept=frozenset({200, 503}),
        )

    @staticmethod
    def faults() -> Call[list[FaultRuleView]]:
        return Call(
            "GET", "/v1/faults", lambda r: [FaultRuleView.from_json(x) for x in r.json()["rules"]]
        )

    @staticmethod
    def fault(rule_id: str) -> Call[FaultRuleView]:
        return Call("GET", f"/v1/faults/{_segment(rule_id)}", _rule)

    @staticmethod
    def add_fault(method: str, spec: FaultSpec) -> Call[FaultRuleView]:
        return Call("POST", "/v1/faults", _rule, body=fault_body(method, spec))

    @staticmethod
    def remove_fault(rule_id: str) -> Call[FaultRuleView]:
        return Call("DELETE", f"/v1/faults/{_segment(rule_id)}", _rule)

    @staticmethod
    def clear_faults() -> Call[int]:
        return Call("DELETE", "/v1/faults", lambda r: int(r.json()["removed"]))

    @staticmethod
    def reset() -> Call[None]:
        return Call("POST", "/v1/reset", lambda r: None)

    @staticmethod
    def pools() -> Call[list[PoolView]]:
        return Call(
            "GET", "/v1/pools", lambda r: [PoolView.from_json(x) for x in r.json()["pools"]]
        )

    @staticmethod
    def pool(name: str) -> Call[PoolView]:
        return Call("GET", f"/v1/pools/{_segment(name)}", _pool)

    @staticmethod
    def pool_action(name: str, action: str, body: Mapping[str, Any]) -> Call[PoolView]:
        return Call("POST", f"/v1/pools/{_segment(name)}/{action}", _pool, body=body)

    @staticmethod
    def capacity(action: str | None) -> Call[bool]:
        path = f"/v1/capacity/{action}" if action else "/v1/capacity"
        return Call("POST" if action else "GET", path, lambda r: bool(r.json()["frozen"]))

    @staticmethod
    def limits(patch: Mapping[str, int | None] | None = None) -> Call[Limits]:
        if patch is None:
            return Call("GET", "/v1/limits", lambda r: Limits.from_json(r.json()))
        body = {k: v for k, v in patch.items() if v is not None}
        return Call("PATCH", "/v1/limits", lambda r: Limits.from_json(r.json()), body=body)

    @staticmethod
    def neighbours() -> Call[list[Neighbour]]:
        return Call(
            "GET",
            "/v1/neighbours",
            lambda r: [Neighbour.from_json(x) for x in r.json()["neighbours"]],
        )

    @staticmethod
    def neighbour_action(name: str, action: str) -> Call[Neighbour]:
        return Call(
            "POST",
            f"/v1/neighbours/{_segment(name)}/{action}",
            lambda r: Neighbour.from_json(r.json()),
        )

    @staticmethod
    def renew_registration() -> Call[RegistrationView]:
        return Call(
            "POST", "/v1/registration/renew", lambda r: RegistrationView.from_json(r.json())
        )

    @staticmethod
    def switches(patch: Mapping[str, bool | None] | None = None) -> Call[SwitchesView]:
        if patch is None:
            return Call("GET", "/v1/switches", lambda r: SwitchesView.from_json(r.json()))
        body = {k: v for k, v in patch.items() if v is not None}
        return Call("PATCH", "/v1/switches", lambda r: SwitchesView.from_json(r.json()), body=body)

    @staticmethod
    def condition(
        volume_id: str, method: str = "GET", body: Mapping[str, Any] | None = None
    ) -> Call[ConditionView]:
        path = f"/v1/volumes/{_segment(volume_id)}/condition"
        return Call(method, path, lambda r: ConditionView.from_json(r.json()), body=body)

    @staticmethod
    def volume_health(
        volume_id: str, method: str = "GET", body: Mapping[str, Any] | None = None
    ) -> Call[HealthView]:
        path = f"/v1/volumes/{_segment(volume_id)}/health"
        return Call(method, path, lambda r: HealthView.from_json(r.json()), body=body)

    @staticmethod
    def storage_health(
        method: str = "GET", body: Mapping[str, Any] | None = None
    ) -> Call[HealthView]:
        return Call(
            method, "/v1/storage-health", lambda r: HealthView.from_json(r.json()), body=body
        )

    @staticmethod
    def volumes(limit: int | None, after: int | None) -> Call[VolumePage]:
        return Call(
            "GET",
            "/v1/volumes",
            lambda r: VolumePage.from_json(r.json()),
            params=_query({"limit": limit, "after": after}),
        )

    @staticmethod
    def snapshots(limit: int | None, after: int | None) -> Call[SnapshotPage]:
        return Call(
            "GET",
            "/v1/snapshots",
            lambda r: SnapshotPage.from_json(r.json()),
            params=_query({"limit": limit, "after": after}),
        )

    @staticmethod
    def journal(query: JournalFilter) -> Call[list[CallRecord]]:
        values = dict(cast(Mapping[str, QueryValue | None], query))
        where = query.get("where")
        values["where"] = [f"{path}={glob}" for path, glob in where.items()] if where else None
        return Call(
            "GET",
            "/v1/journal",
            lambda r: [record_from_json(x) for x in r.json()["records"]],
            params=_query(values),
        )

    @staticmethod
    def secret_hash(value: str) -> Call[str]:
        body = {"value": value}
        return Call("POST", "/v1/journal/secret-hash", lambda r: r.json()["hash"], body=body)

    @staticmethod
    def metrics() -> Call[str]:
        return Call("GET", "/metrics", lambda r: r.text)


def _rule(response: httpx.Response) -> FaultRuleView:
    return FaultRuleView.from_json(response.json())


def _pool(response: httpx.Response) -> PoolView:
    return PoolView.from_json(response.json())


def _segment(value: str) -> str:
    return quote(value, safe="")
