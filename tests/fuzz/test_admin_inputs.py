"""Every admin HTTP endpoint, fed generated bad (and some valid) requests.

Bodies: not JSON, not UTF-8, JSON that is not an object, deep nesting, known keys with
values of the wrong type, huge, negative, NaN and Infinity numbers (Python's json
accepts those literals), unknown keys, nested junk. Query strings: unknown keys, bad
values, repeated keys. Path parameters: empty-ish, over-long, control characters,
percent-encoded traversal. Properties, for every answer:

* never a 5xx;
* a 4xx has a JSON body with a non-empty "error", and when the request sent a JSON object
  or a query the "field" it names is one the request sent or the endpoint takes;
* a refused request changed nothing: pools, limits, fault rules and the frozen flag are
  exactly as before, and /healthz still says ready.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from csi_mock.proto import csi_pb2 as pb
from tests.fuzz.conftest import BackgroundDriver, Sandbox, fuzz_settings, start_background_driver

BASE = "http://csi-mock"


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    """With {name}, {id} or {volume} for a path parameter."""
    body: tuple[str, ...] = ()
    """The keys its JSON body takes; () for endpoints that read no body."""
    query: tuple[str, ...] = ()

    @property
    def reads_body(self) -> bool:
        return bool(self.body)


FAULT_KEYS = (
    "id",
    "method",
    "volume",
    "node",
    "parameters",
    "topology",
    "error",
    "delay",
    "hang",
    "override",
    "rescue",
    "where",
    "times",
    "skip",
    "probability",
    "seed",
)
SWITCHES = (
    "controller_expansion",
    "node_expansion",
    "node_expansion_required",
    "online_expansion",
    "volume_stats",
)
ENDPOINTS = [
    Endpoint("GET", "/healthz"),
    Endpoint("GET", "/metrics"),
    Endpoint("GET", "/v1/faults"),
    Endpoint("POST", "/v1/faults", body=FAULT_KEYS),
    Endpoint("DELETE", "/v1/faults"),
    Endpoint("GET", "/v1/faults/{id}"),
    Endpoint("DELETE", "/v1/faults/{id}"),
    Endpoint("GET", "/v1/pools"),
    Endpoint("GET", "/v1/pools/{name}"),
    Endpoint("POST", "/v1/pools/{name}/resize", body=("size",)),
    Endpoint("POST", "/v1/pools/{name}/consume", body=("bytes",)),
    Endpoint("POST", "/v1/pools/{name}/release", body=("bytes",)),
    Endpoint("GET", "/v1/capacity"),
    Endpoint("POST", "/v1/capacity/freeze"),
    Endpoint("POST", "/v1/capacity/unfreeze"),
    Endpoint("GET", "/v1/limits"),
    Endpoint("PATCH", "/v1/limits", body=("max_volumes_per_node", "attach_limit")),
    Endpoint("GET", "/v1/switches"),
    Endpoint("PATCH", "/v1/switches", body=SWITCHES),
    Endpoint("GET", "/v1/conditions"),
    Endpoint("GET", "/v1/volumes/{volume}/condition"),
    Endpoint("PUT", "/v1/volumes/{volume}/condition", body=("abnormal", "message")),
    Endpoint("DELETE", "/v1/volumes/{volume}/condition"),
    Endpoint("GET", "/v1/volumes", query=("limit", "after")),
    Endpoint("GET", "/v1/snapshots", query=("limit", "after")),
    Endpoint(
        "GET",
        "/v1/journal",
        query=("method", "code", "volume", "node", "since", "after", "limit", "where"),
    ),
    Endpoint("GET", "/v1/journal", query=("where", "where", "method")),
    Endpoint("POST", "/v1/journal/secret-hash", body=("value",)),
]
EXAMPLES = 60


# -- the driver of this module -----------------------------------------------------------


@dataclass
class AdminTarget:
    driver: BackgroundDriver
    http: httpx.Client
    baseline: dict[str, Any]


@pytest.fixture(scope="module")
def admin(sandbox: Sandbox) -> Iterator[AdminTarget]:
    driver = start_background_driver(sandbox, admin=True, attach_required=True)
    transport = httpx.HTTPTransport(uds=str(driver.admin_socket))
    http = httpx.Client(transport=transport, base_url=BASE, timeout=30)
    try:
        # One volume and one journal record, so that listings have something to page.
        capability = pb.VolumeCapability(
            mount=pb.VolumeCapability.MountVolume(),
            access_mode=pb.VolumeCapability.AccessMode(
                mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
            ),
        )
        driver.controller.CreateVolume(
            pb.CreateVolumeRequest(name="pvc-admin", volume_capabilities=[capability])
        )
        yield AdminTarget(driver, http, state(http))
    finally:
        http.close()
        driver.close()


def state(http: httpx.Client) -> dict[str, Any]:
    """Everything a refused request must leave as it was."""
    return {
        "pools": http.get("/v1/pools").json(),
        "limits": http.get("/v1/limits").json(),
        "switches": http.get("/v1/switches").json(),
        "conditions": http.get("/v1/conditions").json(),
        "faults": http.get("/v1/faults").json(),
        "capacity": http.get("/v1/capacity").json(),
    }


def restore(target: AdminTarget) -> None:
    """Undo accepted changes with valid requests, back to the module's baseline."""
    http, baseline = target.http, target.baseline
    assert http.delete("/v1/faults").status_code == 200
    assert http.post("/v1/capacity/unfreeze").status_code == 200
    assert http.patch("/v1/limits", json=baseline["limits"]).status_code == 200
    assert http.patch("/v1/switches", json=baseline["switches"]).status_code == 200
    for condition in http.get("/v1/conditions").json():
        path = f"/v1/volumes/{quote(condition['volume_id'], safe='')}/condition"
        assert http.delete(path).status_code == 200
    now = {pool["name"]: pool for pool in http.get("/v1/pools").json()["pools"]}
    for pool in baseline["pools"]["pools"]:
        current = now[pool["name"]]
        if current["external"] > pool["external"]:
            amount = current["external"] - pool["external"]
            response = http.post(f"/v1/pools/{pool['name']}/release", json={"bytes": amount})
            assert response.status_code == 200, response.text
        if current["total"] != pool["total"]:
            response = http.post(f"/v1/pools/{pool['name']}/resize", json={"size": pool["total"]})
            assert response.status_code == 200, response.text
    assert state(http) == baseline


# -- values --------------------------------------------------------------------------------

NASTY_TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "\n",
            "../../etc",
            "%2e%2e%2f",
            "NaN",
            "Infinity",
            "-Infinity",
            "-1",
            "1e309",
            "0x10",
            "10Gi",
            "-10Gi",
            "1.5",
            "9223372036854775808",
            "*",
            "CreateVolume",
            "ok",
            "internal",
            "\u202e",
        ]
    ),
    st.text(max_size=16),
    st.builds(lambda n: "a" * n, st.sampled_from([129, 2000])),
)
HUGE_TEXT = st.builds(lambda n: "a" * n, st.sampled_from([100_000, 600_000]))
"""Only in bodies: aiohttp answers a request line above 8190 bytes itself, with a plain
text 400, before the application sees it (docs/fuzzing.md)."""
NUMBERS = st.one_of(
    st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63), 10**30, -(10**30), 1 << 30, 0.5, 1e308]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
SPECIALS = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" * 5000])
"""Raw JSON number literals: json.loads reads NaN and Infinity, 1e400 as inf."""
JUNK: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, NASTY_TEXT, HUGE_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(NASTY_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)
GOOD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "size": st.sampled_from(["10Gi", "20Gi", 16 << 30, "30Gi"]),
    "bytes": st.sampled_from([1, "1Gi", 4096, "1Mi"]),
    "max_volumes_per_node": st.integers(0, 10),
    "attach_limit": st.integers(0, 10),
    "method": st.sampled_from(["CreateVolume", "Node*", "GetCapacity"]),
    "error": st.sampled_from([{"code": "RESOURCE_EXHAUSTED"}, {"code": "internal"}]),
    "delay": st.sampled_from([0, 0.5]),
    "times": st.integers(1, 3),
    "id": st.sampled_from(["r1", "rule.2"]),
    "volume": st.sampled_from(["pvc-*", "vol-1"]),
    "probability": st.sampled_from([0.5, 1]),
    "where": st.sampled_from(
        [
            {"capacity_range.required_bytes": ">1Gi"},
            {'parameters["kind"]': "fast*"},
            {"volume_capabilities.access_mode.mode": "==5"},
        ]
    ),
    "rescue": st.sampled_from([{}, {"code": "NOT_FOUND", "reply": {}}, {"reply": {"x": 1}}]),
    **{switch: st.booleans() for switch in SWITCHES},
    "abnormal": st.booleans(),
    "message": st.sampled_from(["", "disk on fire"]),
}


@dataclass
class Request:
    method: str
    path: str
    content: bytes | None
    query: list[tuple[str, str]]
    sent_keys: set[str]
    """Top-level body keys and query keys the request sent."""
    object_body: bool
    """The body was a JSON object (or absent), so a refusal can name a field."""


@st.composite
def requests(draw: st.DrawFn, target_rules: list[str], volumes: list[str]) -> Request:
    endpoint = draw(st.sampled_from(ENDPOINTS))
    method = endpoint.method
    if draw(st.integers(0, 9)) == 0:  # a method the endpoint does not take
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]))
    path = endpoint.path
    if "{name}" in path:
        name = draw(st.one_of(st.sampled_from(["node-1", "node-2"]), NASTY_TEXT))
        path = path.replace("{name}", quote(name, safe="") or "%20")
    if "{id}" in path:
        rule = draw(st.one_of(st.sampled_from([*target_rules, "r1"]), NASTY_TEXT))
        path = path.replace("{id}", quote(rule, safe="") or "%20")
    if "{volume}" in path:
        volume = draw(st.one_of(st.sampled_from(volumes), NASTY_TEXT))
        path = path.replace("{volume}", quote(volume, safe="") or "%20")

    query: list[tuple[str, str]] = []
    if endpoint.query or draw(st.integers(0, 4)) == 0:
        keys = st.one_of(st.sampled_from(endpoint.query or ("x",)), NASTY_TEXT)
        query = draw(st.lists(st.tuples(keys, st.one_of(NASTY_TEXT, NUMBERS.map(str))), max_size=3))

    content, sent, object_body = draw(bodies(endpoint))
    return Request(method, path, content, query, sent | {k for k, _ in query}, object_body)


@st.composite
def bodies(draw: st.DrawFn, endpoint: Endpoint) -> tuple[bytes | None, set[str], bool]:
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return None, set(), True
    if shape == 1:
        raw = draw(
            st.one_of(
                st.binary(max_size=64),
                st.sampled_from(
                    [
                        b"",
                        b"   ",
                        b"{",
                        b"not json",
                        b"\xff\xfe{}",
                        b"null",
                        b"[]",
                        b"1",
                        b'"s"',
                        b"[" * 100_000 + b"]" * 100_000,
                        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
                        b"{}" + b" " * 100,
                        b'{"size": 1}{"size": 2}',
                    ]
                ),
            )
        )
        return raw, set(), False
    # A JSON object: known keys with good or bad values, and unknown keys.
    keys = list(endpoint.body) or ["x"]
    chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    values: dict[str, str] = {}
    for key in chosen:
        kind = draw(st.integers(0, 3))
        if kind == 0 and key in GOOD_VALUES:
            value = json.dumps(draw(GOOD_VALUES[key]))
        elif kind == 1:
            value = draw(SPECIALS)
        else:
            value = json.dumps(draw(JUNK))
        values[key] = value
    extra = draw(st.dictionaries(NASTY_TEXT, JUNK.map(json.dumps), max_size=2))
    values.update(extra)
    text = "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in values.items()) + "}"
    return text.encode(), set(values), True


# -- properties --------------------------------------------------------------------------


def check_refusal(request: Request, endpoint_keys: set[str], response: httpx.Response) -> None:
    shown = (
        f"{request.method} {request.path[:200]} query={str(request.query)[:200]}"
        f" body={(request.content or b'')[:300]!r} -> {response.status_code} {response.text[:300]}"
    )
    assert response.status_code < 500, shown
    if response.status_code < 400:
        return
    assert response.headers.get("content-type", "").startswith("application/json"), shown
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str), shown
    assert body["error"].strip(), shown
    assert "field" in body, shown
    if response.status_code == 400 and request.object_body and body["field"] is not None:
        named = str(body["field"])  # a dotted path into the body, e.g. error.code
        allowed = request.sent_keys | endpoint_keys
        assert any(named == key or named.startswith(key + ".") for key in allowed), (
            f"names {named!r}, not a key of the request: {shown}"
        )
    # docs/admin-api.md: "The one error without a field is a fault rule with no action".
    if (
        response.status_code == 400
        and request.object_body
        and not body["error"].startswith("a rule needs an action")
    ):
        assert body["field"] is not None, f"names no field: {shown}"


def endpoint_keys(request: Request) -> set[str]:
    keys = {"name", "id", "volume_id"}
    for endpoint in ENDPOINTS:
        keys |= set(endpoint.body) | set(endpoint.query)
    return keys


@pytest.mark.slow
@fuzz_settings(EXAMPLES * 4)
@given(data=st.data())
def test_any_admin_request_is_answered_without_5xx_and_refusals_change_nothing(
    admin: AdminTarget, data: st.DataObject
) -> None:
    rules = [rule["id"] for rule in admin.http.get("/v1/faults").json()["rules"]]
    volumes = [v["id"] for v in admin.http.get("/v1/volumes").json()["volumes"]]
    request = data.draw(requests(rules, volumes))
    # aiohttp refuses a request line above 8190 bytes before the application sees it.
    assume(len(str(httpx.URL(request.path, params=request.query))) < 8000)
    before = state(admin.http)
    try:
        response = admin.http.request(
            request.method,
            request.path,
            params=tuple(request.query),
            content=request.content,
        )
        check_refusal(request, endpoint_keys(request), response)
        if response.status_code >= 400:
            assert state(admin.http) == before, (
                f"refused {request.method} {request.path} changed state"
            )
        health = admin.http.get("/healthz")
        assert health.status_code == 200 and health.json()["ready"], health.text
    finally:
        restore(admin)


def test_nan_and_infinity_literals_are_read_as_floats() -> None:
    """The fuzzing above relies on json.loads accepting these (it does, unlike JSON)."""
    assert math.isnan(json.loads('{"a": NaN}')["a"])
    assert json.loads("1e400") == math.inf
