"""Fault rules naming request and reply fields by path (`where`, `override`, `rescue`):
what is refused when a rule is added, and which requests a `where` matches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import Message
from pydantic import ValidationError

from csi_mock.control.faults import FaultEngine
from csi_mock.csi_methods import ENUMS, MESSAGES, RESPONSE_TYPES
from csi_mock.fault_rules import FaultRuleSpec
from csi_mock.fault_schema import compile_override, wrapped_scalar
from csi_mock.proto import csi_pb2
from csi_mock.services.fault_replies import apply_overrides, response_class

GiB = 1 << 30
POD_NAME = 'volume_context["csi.storage.k8s.io/pod.name"]'


def problems(**spec: Any) -> dict[tuple[str | int, ...], str]:
    """Each bad field of the rule and its message; the rule must be refused."""
    with pytest.raises(ValidationError) as raised:
        FaultRuleSpec(**spec)
    return {tuple(p["loc"]): p["msg"] for p in raised.value.errors()}


def engine_with(**spec: Any) -> FaultEngine:
    spec.setdefault("method", "CreateVolume")
    spec.setdefault("delay", 0.1)
    engine = FaultEngine()
    engine.add(FaultRuleSpec(**spec))
    return engine


def fires(engine: FaultEngine, method: str = "CreateVolume", **request: Any) -> bool:
    """Whether a rule fires for a call whose whole request is `request`."""
    return engine.select(method, {}, lambda: request) is not None


# -- where: validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "where", "fragments"),
    [
        (
            "CreateVolume",
            {"capacity_rang.required_bytes": ">1Gi"},
            [
                "capacity_rang.required_bytes:",
                "CreateVolume requests have no field 'capacity_rang'",
            ],
        ),
        (
            "CreateVolume",
            {"capacity_range.required": ">1Gi"},
            ["capacity_range (CapacityRange) has no field 'required'", "required_bytes"],
        ),
        (
            "Node*Volume",
            {POD_NAME: "web-*"},
            ["NodeExpandVolume requests have no field 'volume_context'"],
        ),
        ("CreateVolume", {"name": ">5"}, ["> compares numbers", "name is a string"]),
        (
            "CreateVolume",
            {"capacity_range": "x"},
            ["capacity_range is a CapacityRange message", "required_bytes"],
        ),
        ("CreateVolume", {"parameters": "x"}, ["parameters is a map: name a key"]),
        ("CreateVolume", {"capacity_range.required_bytes": ">lots"}, ["'lots' is not a number"]),
        ("CreateVolume", {"name[": "x"}, ["field path 'name['"]),
        ("CreateVolume", {"name.first": "x"}, ["name is a string: it has no field 'first'"]),
    ],
)
def test_a_where_the_request_cannot_hold_is_refused_naming_where_and_the_field(
    method: str, where: dict[str, Any], fragments: list[str]
) -> None:
    message = problems(method=method, where=where, delay=1)[("where",)]

    for fragment in fragments:
        assert fragment in message


def test_a_where_is_checked_against_every_method_the_glob_matches() -> None:
    FaultRuleSpec(method="NodePublishVolume", where={POD_NAME: "web-*"}, delay=1)

    message = problems(method="Node*", where={POD_NAME: "web-*"}, delay=1)[("where",)]

    assert "requests have no field 'volume_context'" in message


def test_a_refused_where_adds_nothing_to_the_engine() -> None:
    engine = FaultEngine()

    with pytest.raises(ValidationError):
        engine.add(FaultRuleSpec(method="CreateVolume", where={"nope": "x"}, delay=1))

    assert engine.rules() == []


@pytest.mark.parametrize(
    "where",
    [
        {"capacity_range.required_bytes": ">1Gi"},
        {"capacity_range.required_bytes": "<= 1.5Gi"},
        {"capacity_range.limit_bytes": "==0"},
        {"capacity_range.limit_bytes": 0},
        {"volume_capabilities.access_mode.mode": "SINGLE_NODE_*"},
        {"volume_capabilities[0].mount.mount_flags": "ro"},
        {'parameters["kind"]': "mirror*"},
        {"accessibility_requirements.preferred.segments['zone']": "a"},
    ],
)
def test_a_where_on_fields_create_volume_requests_have_is_accepted(where: dict[str, Any]) -> None:
    assert FaultRuleSpec(method="CreateVolume", where=where, delay=1).where == where


# -- where: matching ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "required", "expected"),
    [
        (">1Gi", GiB, False),
        (">1Gi", GiB + 1, True),
        (">=1Gi", GiB, True),
        ("<1Gi", GiB - 1, True),
        ("<1Gi", GiB, False),
        ("<=1073741824", GiB, True),
        ("==1Gi", GiB, True),
        ("==1Gi", GiB + 1, False),
        (">1.5", 2, True),
        (">1.5", 1, False),
        (GiB, GiB, True),
        ("1073*", GiB, True),
        ("2*", GiB, False),
    ],
)
def test_a_numeric_or_glob_condition_on_required_bytes(
    condition: object, required: int, expected: bool
) -> None:
    engine = engine_with(where={"capacity_range.required_bytes": condition})

    assert fires(engine, capacity_range={"required_bytes": required}) is expected


def test_an_int64_written_as_a_string_is_compared_as_a_number() -> None:
    engine = engine_with(where={"capacity_range.required_bytes": ">1Ei"})

    assert fires(engine, capacity_range={"required_bytes": str(2**62 + 1)})
    assert not fires(engine, capacity_range={"required_bytes": str(2**60)})


def test_a_condition_on_a_field_the_request_lacks_does_not_hold() -> None:
    engine = engine_with(where={"capacity_range.required_bytes": "<1Gi"})

    assert not fires(engine, name="pvc-1")


def test_a_map_key_condition_matches_that_entry_only() -> None:
    engine = engine_with(method="NodePublishVolume", where={POD_NAME: "web-*"})

    context = {"csi.storage.k8s.io/pod.name": "web-0", "other": "db-0"}
    assert fires(engine, "NodePublishVolume", volume_context=context)
    context = {"csi.storage.k8s.io/pod.name": "db-0", "other": "web-0"}
    assert not fires(engine, "NodePublishVolume", volume_context=context)
    assert not fires(engine, "NodePublishVolume", volume_context={})


def test_every_where_condition_must_hold() -> None:
    engine = engine_with(where={"name": "pvc-*", "capacity_range.required_bytes": ">=1Gi"})

    assert fires(engine, name="pvc-1", capacity_range={"required_bytes": GiB})
    assert not fires(engine, name="db-1", capacity_range={"required_bytes": GiB})
    assert not fires(engine, name="pvc-1", capacity_range={"required_bytes": 1})


def test_a_condition_on_a_list_holds_when_one_element_matches() -> None:
    engine = engine_with(where={"volume_capabilities.access_mode.mode": "MULTI_*"})
    modes = [{"access_mode": {"mode": m}} for m in ("SINGLE_NODE_WRITER", "MULTI_NODE_READER_ONLY")]

    assert fires(engine, volume_capabilities=modes)
    assert not fires(engine, volume_capabilities=modes[:1])


def test_a_boolean_condition_is_the_glob_true_or_false() -> None:
    engine = engine_with(method="NodePublishVolume", where={"readonly": False})

    assert fires(engine, "NodePublishVolume", readonly=False)
    assert not fires(engine, "NodePublishVolume", readonly=True)


def test_the_whole_request_is_built_once_and_only_when_a_where_needs_it() -> None:
    engine = FaultEngine()
    engine.add(FaultRuleSpec(method="DeleteVolume", where={"volume_id": "v*"}, delay=1))
    engine.add(FaultRuleSpec(method="CreateVolume", where={"name": "x"}, delay=1))
    engine.add(FaultRuleSpec(method="CreateVolume", where={"name": "p*"}, delay=1))
    built: list[int] = []

    def whole() -> dict[str, Any]:
        built.append(1)
        return {"name": "pvc"}

    engine.select("GetCapacity", {}, whole)
    assert built == []
    assert engine.select("CreateVolume", {}, whole) is not None
    assert built == [1]


# -- override: paths into the reply ------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "override"),
    [
        ("CreateVolume", {"volume.capacity_bytes": 5 * GiB}),
        ("CreateVolume", {"volume.accessible_topology": [{"segments": {"zone": "b"}}]}),
        ("CreateVolume", {"volume.accessible_topology[0].segments['zone']": "b"}),
        ("CreateVolume", {'volume.volume_context["k"]': "v"}),
        ("CreateVolume", {"volume": {"volume_id": "v", "capacity_bytes": 1}}),
        ("NodeGetVolumeStats", {"volume_condition.abnormal": True}),
        ("NodeGetVolumeStats", {"volume_condition": {"abnormal": True, "message": "m"}}),
        ("NodeGetVolumeStats", {"usage": [{"unit": "BYTES", "total": 1}]}),
        ("ListVolumes", {"entries.status.volume_condition.abnormal": True}),
        ("GetCapacity", {"maximum_volume_size": 7}),
        ("GetCapacity", {"maximum_volume_size.value": 7}),
        ("NodeGetInfo", {"accessible_topology.segments": {"zone": "b"}}),
    ],
)
def test_an_override_path_into_the_reply_is_accepted(method: str, override: dict[str, Any]) -> None:
    assert FaultRuleSpec(method=method, override=override).override == override


@pytest.mark.parametrize(
    ("method", "override", "fragment"),
    [
        (
            "CreateVolume",
            {"volume.capacity": 1},
            "volume.capacity: CreateVolume responses' volume (Volume) has no field 'capacity'",
        ),
        ("CreateVolume", {"volume.capacity_bytes": 2**63}, "is not a valid int64"),
        ("CreateVolume", {"volume.capacity_bytes": "10Gi"}, "'10Gi' is not a valid int64"),
        ("CreateVolume", {"volume.capacity_bytes": None}, "None is not a valid int64"),
        (
            "CreateVolume",
            {"volume.accessible_topology": {"zone": "b"}},
            "is not a list of Topology",
        ),
        (
            "CreateVolume",
            {"volume.accessible_topology": [{"segment": {"zone": "b"}}]},
            "volume.accessible_topology[0]: Topology has no field 'segment'",
        ),
        (
            "CreateVolume",
            {"volume.accessible_topology": [{"segments": {"zone": 1}}]},
            "volume.accessible_topology[0].segments['zone']: 1 is not a valid string",
        ),
        (
            "CreateVolume",
            {"volume.content_source": {"snapshot": {}, "volume": {}}},
            "snapshot and volume are one of type",
        ),
        ("NodeGetVolumeStats", {"volume_condition.abnormal": "yes"}, "is not a valid bool"),
        ("NodeGetVolumeStats", {"usage[0].unit": "BYTE"}, "not one of UNKNOWN, BYTES, INODES"),
        ("CreateVolume", {"volume.capacity_bytes.x": 1}, "capacity_bytes is a int64"),
        ("CreateVolume", {"volume[0]": 1}, "volume is not a list"),
        ("CreateVolume", {"volume.": 1}, "field path 'volume.'"),
        (
            "Create*",
            {"volume.capacity_bytes": 1},
            "CreateSnapshot responses have no field 'volume'",
        ),
    ],
)
def test_an_override_the_reply_cannot_hold_is_refused_naming_override_and_the_field(
    method: str, override: dict[str, Any], fragment: str
) -> None:
    message = problems(method=method, override=override)[("override",)]

    assert fragment in message


def test_a_top_level_override_keeps_its_messages() -> None:
    assert (
        "GetCapacity responses have no field 'x' (fields: available_capacity"
        in (problems(method="GetCapacity", override={"x": 1})[("override",)])
    )
    assert (
        "volume is not a scalar an override can set"
        in (problems(method="CreateVolume", override={"volume": 1})[("override",)])
    )


# -- rescue ------------------------------------------------------------------------------


def test_a_rescue_names_a_status_code_or_none_for_any() -> None:
    rule = FaultRuleSpec(method="DeleteVolume", rescue={"code": "not_found"})
    assert rule.rescue is not None
    assert (rule.rescue.code, rule.rescue.reply) == ("NOT_FOUND", {})
    assert FaultRuleSpec(method="DeleteVolume", rescue={}).rescue is not None


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"rescue": {"code": "NOPE"}}, ("rescue", "code"), "not a gRPC status code"),
        ({"rescue": {"code": "OK"}}, ("rescue", "code"), "not a gRPC status code"),
        (
            {"rescue": {"reply": {"volume": {"capacity_bytes": 1.5}}}},
            ("rescue",),
            "reply.volume.capacity_bytes: 1.5 is not a valid int64 (a CreateVolume reply)",
        ),
        (
            {"rescue": {"reply": {"volumes": {}}}},
            ("rescue",),
            "CreateVolumeResponse has no field 'volumes'",
        ),
        (
            {"rescue": {}, "error": {"code": "INTERNAL"}},
            ("rescue",),
            "excludes error and hang",
        ),
        ({"rescue": {}, "hang": True}, ("rescue",), "excludes error and hang"),
        ({"rescue": {"cod": "X"}}, ("rescue", "cod"), "Extra inputs"),
    ],
)
def test_a_rescue_the_reply_cannot_hold_is_refused_naming_rescue(
    spec: dict[str, Any], field: tuple[str, ...], fragment: str
) -> None:
    found = problems(method="CreateVolume", **spec)

    assert field in found, found
    assert fragment in found[field]


def test_a_rescue_reply_is_checked_against_every_method_the_glob_matches() -> None:
    reply = {"volume": {"volume_id": "v"}}
    FaultRuleSpec(method="CreateVolume", rescue={"reply": reply})

    message = problems(method="Create*", rescue={"reply": reply})[("rescue",)]

    assert "(a CreateSnapshot reply)" in message


def test_a_rescue_is_an_action_on_its_own() -> None:
    assert FaultRuleSpec(method="DeleteVolume", rescue={}).delay == 0


def test_describe_shows_where_override_and_rescue_as_given() -> None:
    engine = FaultEngine()
    rule = engine.add(
        FaultRuleSpec(
            method="NodeGetVolumeStats",
            where={"volume_id": "vol-*"},
            override={"volume_condition.abnormal": True},
            rescue={"code": "NOT_FOUND"},
        )
    )

    described = rule.describe()

    assert described["where"] == {"volume_id": "vol-*"}
    assert described["override"] == {"volume_condition.abnormal": True}
    assert described["rescue"] == {"code": "NOT_FOUND"}


# -- what is accepted, protobuf holds ------------------------------------------------------

_EXTREMES: dict[str, list[Any]] = {
    "int64": [-(2**63), 2**63 - 1],
    "uint64": [0, 2**64 - 1],
    "int32": [-(2**31), 2**31 - 1],
    "uint32": [0, 2**32 - 1],
    "bool": [True, False],
    "string": ["", "s\u00e9"],
    "double": [-1.5, 1e308],
    "float": [0.5],
}


def _leaf_overrides(kind: str, prefix: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every path to a scalar, enum, list or map below message `kind`, each with values
    at the ends of its range."""
    for name, (label, field_kind, _) in MESSAGES[kind].items():
        path = f"{prefix}.{name}" if prefix else name
        scalar = wrapped_scalar(field_kind) if field_kind in MESSAGES else field_kind
        if field_kind in ENUMS:
            values: list[Any] = [ENUMS[field_kind][0], ENUMS[field_kind][-1]]
        elif scalar is not None:
            values = _EXTREMES[scalar]
        else:
            values = []
        if label == "map":
            yield from ((f'{path}["k"]', value) for value in values)
            yield path, {"k": values[-1]} if values else {}
        elif label == "repeated":
            yield path, [values[-1]] if values else [{}]
            if not values and depth < 4:
                yield from _leaf_overrides(field_kind, path, depth + 1)
        elif values:
            yield from ((path, value) for value in values)
        elif depth < 4:
            yield path, {}
            yield from _leaf_overrides(field_kind, path, depth + 1)


CASES = [
    (method, path, value)
    for method in sorted(RESPONSE_TYPES)
    for path, value in _leaf_overrides(RESPONSE_TYPES[method], "")
]


def test_every_reply_path_of_every_method_is_reached() -> None:
    assert len(CASES) > 200
    assert ("NodeGetVolumeStats", "volume_condition.abnormal", True) in CASES


@pytest.mark.parametrize(("method", "path", "value"), CASES)
def test_an_accepted_override_is_one_protobuf_holds(method: str, path: str, value: Any) -> None:
    spec = FaultRuleSpec(method=method, override={path: value})
    response = _response_of(method)

    reply = response()
    apply_overrides(reply, compile_override(spec.override))

    assert response.FromString(reply.SerializeToString()) == reply


def _response_of(method: str) -> type[Message]:
    for service in csi_pb2.DESCRIPTOR.services_by_name.values():
        if method in service.methods_by_name:
            found = response_class(f"/{service.full_name}/{method}")
            assert found is not None
            return found
    raise AssertionError(method)


OUT_OF_RANGE = [
    (method, path, value + (1 if value > 0 else -1))
    for method, path, value in CASES
    if type(value) is int and abs(value) >= 2**31 - 1
]


@pytest.mark.parametrize(("method", "path", "value"), OUT_OF_RANGE)
def test_one_past_the_end_of_an_integer_range_is_refused(
    method: str, path: str, value: int
) -> None:
    assert "is not a valid" in problems(method=method, override={path: value})[("override",)]
