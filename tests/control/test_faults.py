"""The fault rule engine: which calls a rule matches, when it fires, what it counts."""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from csi_mock.admin import FaultRuleView, FaultSpec
from csi_mock.control.faults import FaultEngine, FaultRule
from csi_mock.fault_rules import STATUS_CODES, FaultRuleSpec

ERROR = {"code": "RESOURCE_EXHAUSTED"}


def rule(engine: FaultEngine, **spec: Any) -> FaultRule:
    spec.setdefault("method", "CreateVolume")
    if not {"error", "delay", "hang", "override"} & spec.keys():
        spec["error"] = ERROR
    return engine.add(FaultRuleSpec(**spec))


def firings(engine: FaultEngine, calls: int, method: str = "CreateVolume", **request: Any) -> str:
    """One character per call: 'x' when a rule fired, '.' when none did."""
    return "".join("x" if engine.select(method, request) is not None else "." for _ in range(calls))


# -- firing modes ------------------------------------------------------------------------


def test_a_rule_with_times_fires_for_the_first_n_matches_only() -> None:
    engine = FaultEngine()
    rule(engine, times=2)

    assert firings(engine, 5) == "xx..."


def test_skip_lets_the_first_k_matches_through_then_fires() -> None:
    engine = FaultEngine()
    rule(engine, skip=3)

    assert firings(engine, 6) == "...xxx"


def test_skip_and_times_fire_the_n_matches_after_the_first_k() -> None:
    engine = FaultEngine()
    rule(engine, skip=2, times=2)

    assert firings(engine, 7) == "..xx..."


def test_a_rule_without_times_fires_until_it_is_removed() -> None:
    engine = FaultEngine()
    added = rule(engine)

    assert firings(engine, 20) == "x" * 20
    engine.remove(added.id)
    assert firings(engine, 3) == "..."


def test_probability_under_a_seed_fires_the_same_calls_in_two_engines() -> None:
    first, second = FaultEngine(), FaultEngine()
    rule(first, probability=0.5, seed=42)
    rule(second, probability=0.5, seed=42)

    pattern = firings(first, 200)

    assert pattern == firings(second, 200)
    assert "x" in pattern and "." in pattern


def test_probability_under_different_seeds_fires_different_calls() -> None:
    first, second = FaultEngine(), FaultEngine()
    rule(first, probability=0.5, seed=1)
    rule(second, probability=0.5, seed=2)

    assert firings(first, 200) != firings(second, 200)


def test_probability_fires_about_that_share_of_the_calls() -> None:
    engine = FaultEngine()
    rule(engine, probability=0.25, seed=7)

    fired = firings(engine, 2000).count("x")

    assert 400 < fired < 600


def test_probability_applies_after_skip_and_within_times() -> None:
    engine = FaultEngine()
    rule(engine, probability=0.5, seed=3, skip=10, times=5)

    pattern = firings(engine, 200)

    assert pattern[:10] == "." * 10
    assert pattern.count("x") == 5


# -- the first firing rule decides ------------------------------------------------------


def test_the_first_rule_that_fires_decides_the_fault() -> None:
    engine = FaultEngine()
    first = rule(engine, error={"code": "INTERNAL"})
    rule(engine, error={"code": "UNAVAILABLE"})

    assert engine.select("CreateVolume", {}) is first


def test_a_rule_that_does_not_fire_leaves_the_call_to_the_next_rule() -> None:
    engine = FaultEngine()
    rule(engine, times=1, error={"code": "INTERNAL"})
    second = rule(engine, error={"code": "UNAVAILABLE"})

    engine.select("CreateVolume", {})

    assert engine.select("CreateVolume", {}) is second


def test_a_shadowed_rule_keeps_its_times_budget_for_later_calls() -> None:
    engine = FaultEngine()
    first = rule(engine, times=1, error={"code": "INTERNAL"})
    second = rule(engine, times=1, delay=0.1)

    chosen = [engine.select("CreateVolume", {}) for _ in range(3)]

    assert chosen == [first, second, None]
    assert (first.matched, first.fired) == (3, 1)
    assert (second.matched, second.fired) == (3, 1)


# -- predicates --------------------------------------------------------------------------


def test_method_glob_matches_every_method_it_names() -> None:
    engine = FaultEngine()
    rule(engine, method="Node*Volume")

    assert firings(engine, 1, "NodeStageVolume") == "x"
    assert firings(engine, 1, "NodePublishVolume") == "x"
    assert firings(engine, 1, "NodeGetInfo") == "."
    assert firings(engine, 1, "CreateVolume") == "."


def test_volume_glob_matches_the_volume_id_or_the_name() -> None:
    engine = FaultEngine()
    rule(engine, method="*", volume="pvc-a*")

    assert firings(engine, 1, name="pvc-a1") == "x"
    assert firings(engine, 1, "DeleteVolume", volume_id="pvc-a2") == "x"
    assert firings(engine, 1, name="pvc-b1") == "."
    assert firings(engine, 1, "GetCapacity") == "."


def test_node_glob_matches_the_node_id() -> None:
    engine = FaultEngine()
    rule(engine, method="ControllerPublishVolume", node="node-2*")

    assert firings(engine, 1, "ControllerPublishVolume", node_id="node-21") == "x"
    assert firings(engine, 1, "ControllerPublishVolume", node_id="node-1") == "."


def test_parameters_must_all_be_in_the_request_with_those_values() -> None:
    engine = FaultEngine()
    rule(engine, parameters={"kind": "mirrored", "tier": "gold"})

    assert firings(engine, 1, parameters={"kind": "mirrored", "tier": "gold", "x": "y"}) == "x"
    assert firings(engine, 1, parameters={"kind": "mirrored"}) == "."
    assert firings(engine, 1, parameters={"kind": "striped", "tier": "gold"}) == "."
    assert firings(engine, 1) == "."


def test_topology_matches_get_capacity_segment_or_any_create_volume_segment() -> None:
    engine = FaultEngine()
    rule(engine, method="*", topology={"zone": "a"})

    assert firings(engine, 1, "GetCapacity", topology={"zone": "a", "rack": "1"}) == "x"
    assert firings(engine, 1, requisite=[{"zone": "b"}], preferred=[{"zone": "a"}]) == "x"
    assert firings(engine, 1, requisite=[{"zone": "b"}]) == "."
    assert firings(engine, 1, "GetCapacity") == "."


def test_calls_a_rule_does_not_match_count_nothing() -> None:
    engine = FaultEngine()
    added = rule(engine, volume="pvc-a")

    firings(engine, 4, name="pvc-b")

    assert (added.matched, added.fired) == (0, 0)


# -- counters and identity ---------------------------------------------------------------


def test_counters_count_every_match_and_every_firing() -> None:
    engine = FaultEngine()
    added = rule(engine, skip=1, times=2)

    firings(engine, 5)

    assert (added.matched, added.fired) == (5, 2)
    described = added.describe()
    assert described["matched"] == 5 and described["fired"] == 2
    assert described["skip"] == 1 and described["times"] == 2
    assert described["error"] == {"code": "RESOURCE_EXHAUSTED"}


def test_rules_get_distinct_generated_ids_unless_one_is_given() -> None:
    engine = FaultEngine()
    named = rule(engine, id="create-fails")
    first, second = rule(engine), rule(engine)

    assert named.id == "create-fails"
    assert len({named.id, first.id, second.id}) == 3


def test_a_taken_id_is_refused() -> None:
    engine = FaultEngine()
    rule(engine, id="r")

    with pytest.raises(KeyError, match="'r' already exists"):
        rule(engine, id="r")


def test_removing_or_getting_an_unknown_rule_names_it() -> None:
    engine = FaultEngine()

    with pytest.raises(KeyError, match="'nope'"):
        engine.remove("nope")
    with pytest.raises(KeyError, match="'nope'"):
        engine.get("nope")


def test_clear_removes_every_rule_and_says_how_many() -> None:
    engine = FaultEngine()
    rule(engine)
    rule(engine)

    assert engine.clear() == 2
    assert engine.rules() == []


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({"method": "Nope", "delay": 1}, ("method",), "matches no CSI method"),
        ({"method": "", "delay": 1}, ("method",), "at least 1"),
        ({"error": {"code": "NOPE"}}, ("error", "code"), "not a gRPC status code"),
        ({"error": {"message": "m"}}, ("error", "code"), "required"),
        ({"method": "GetCapacity", "override": {"x": 1}}, ("override",), "no field 'x'"),
        (
            {"method": "GetCapacity", "error": ERROR, "override": {"available_capacity": 1}},
            ("override",),
            "exclude each other",
        ),
        ({"error": ERROR, "times": 0}, ("times",), "greater than or equal to 1"),
        ({"error": ERROR, "skip": -1}, ("skip",), "greater than or equal to 0"),
        ({"error": ERROR, "probability": 0}, ("probability",), "greater than 0"),
        ({"error": ERROR, "probability": 1.5}, ("probability",), "less than or equal to 1"),
        ({"delay": -1}, ("delay",), "greater than or equal to 0"),
        ({"delay": "-2s"}, ("delay",), "greater than or equal to 0"),
        ({"delay": "2 seconds"}, ("delay",), "not a duration (e.g. 300ms"),
        ({"delay": "2h"}, ("delay",), "less than or equal to 3600"),
        ({"delay": True}, ("delay",), "True is not a duration"),
        ({"error": ERROR, "id": "bad id!"}, ("id",), "pattern"),
        ({"error": ERROR, "color": "red"}, ("color",), "Extra inputs"),
    ],
)
def test_an_invalid_rule_is_refused_naming_the_field(
    spec: dict[str, Any], field: tuple[str, ...], fragment: str
) -> None:
    spec = {"method": "CreateVolume", **spec}

    with pytest.raises(ValidationError) as raised:
        FaultRuleSpec(**spec)

    problems = {tuple(p["loc"]): p["msg"] for p in raised.value.errors()}
    assert field in problems, problems
    assert fragment in problems[field]


def test_a_rule_without_an_action_is_refused() -> None:
    with pytest.raises(
        ValidationError, match="needs an action: error, delay, hang, override or rescue"
    ):
        FaultRuleSpec(method="CreateVolume", times=1)


def test_an_override_is_checked_against_every_method_the_glob_matches() -> None:
    with pytest.raises(ValidationError, match="no field 'available_capacity'"):
        FaultRuleSpec(method="*Capa*", override={"available_capacity": 0})


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"available_capacity": float("inf")}, "inf is not a valid int64"),
        ({"available_capacity": 2**63}, "is not a valid int64"),
        ({"available_capacity": 1.5}, "1.5 is not a valid int64"),
        ({"available_capacity": "10Gi"}, "'10Gi' is not a valid int64"),
        ({"available_capacity": True}, "True is not a valid int64"),
        ({"maximum_volume_size": -1.0}, "is not a valid int64"),
    ],
)
def test_an_override_value_the_field_cannot_hold_is_refused_naming_override(
    override: dict[str, Any], fragment: str
) -> None:
    # Found while fuzzing the admin API: such a rule was accepted, and every matching
    # call then failed with INTERNAL when protobuf refused the value.
    with pytest.raises(ValidationError) as raised:
        FaultRuleSpec(method="GetCapacity", override=override)

    problems = {tuple(p["loc"]): p["msg"] for p in raised.value.errors()}
    assert fragment in problems[("override",)]


def test_an_override_of_a_message_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="volume is not a scalar an override can set"):
        FaultRuleSpec(method="CreateVolume", override={"volume": 1})


@pytest.mark.parametrize(
    ("delay", "seconds"), [("300ms", 0.3), ("2s", 2.0), ("1m", 60.0), (1.5, 1.5)]
)
def test_a_delay_is_seconds_or_a_go_duration(delay: object, seconds: float) -> None:
    assert FaultRuleSpec(method="CreateVolume", delay=delay).delay == seconds


def test_the_status_codes_a_rule_may_name_are_grpcs_except_ok() -> None:
    assert set(STATUS_CODES) == {c.name for c in grpc.StatusCode} - {"OK"}


def test_the_clients_spec_and_view_have_every_rule_field_and_no_other() -> None:
    """FaultRuleSpec declares the fields; the client's FaultSpec (its add_fault
    arguments) and FaultRuleView are typed copies, held to it here."""
    fields = set(FaultRuleSpec.model_fields)

    assert set(FaultSpec.__optional_keys__) == fields - {"method"} | {"code", "message"}
    assert {f.name for f in dataclasses.fields(FaultRuleView)} == fields | {"matched", "fired"}
