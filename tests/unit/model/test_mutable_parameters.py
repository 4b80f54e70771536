import pytest

from csi_mock.model.errors import InvalidArgument
from csi_mock.model.mutable_parameters import (
    MutableParameterRules,
    modified_parameters,
    satisfies,
)

RULES = MutableParameterRules({"iops": (), "tier": ("gold", "silver", "bronze")})


def test_a_configured_name_with_an_allowed_value_passes() -> None:
    RULES.check({"tier": "silver", "iops": "3000"})


def test_an_empty_list_of_values_allows_any_value() -> None:
    RULES.check({"iops": "any text at all"})


def test_an_unknown_name_is_refused_naming_it_and_the_mutable_names() -> None:
    with pytest.raises(InvalidArgument) as refused:
        RULES.check({"XXX_FakeKey": "XXX_FakeValue"})

    assert str(refused.value) == (
        "mutable_parameters: 'XXX_FakeKey' is not a mutable parameter (mutable: 'iops', 'tier')"
    )


def test_a_disallowed_value_is_refused_naming_the_allowed_values_in_configured_order() -> None:
    with pytest.raises(InvalidArgument) as refused:
        RULES.check({"tier": "platinum"})

    assert str(refused.value) == (
        "mutable_parameters: tier='platinum' is not allowed (allowed: 'gold', 'silver', 'bronze')"
    )


def test_the_first_bad_parameter_in_name_order_is_the_one_named() -> None:
    with pytest.raises(InvalidArgument, match="'b'"):
        RULES.check({"tier": "gold", "b": "1", "c": "2"})


def test_no_mutable_names_refuses_every_parameter() -> None:
    with pytest.raises(InvalidArgument, match=r"\(mutable: none\)"):
        MutableParameterRules({}).check({"tier": "gold"})


def test_rules_without_names_allow_any_name_and_value() -> None:
    MutableParameterRules(None).check({"XXX_FakeKey": "XXX_FakeValue", "": ""})


def test_a_modification_merges_the_requested_keys_into_the_current_ones() -> None:
    current = {"tier": "gold", "iops": "1000"}

    assert modified_parameters(current, {"tier": "silver"}, RULES) == {
        "tier": "silver",
        "iops": "1000",
    }


def test_a_modification_adds_a_key_the_volume_did_not_have() -> None:
    assert modified_parameters({}, {"iops": "5"}, RULES) == {"iops": "5"}


def test_a_modification_to_what_the_volume_holds_changes_nothing() -> None:
    current = {"tier": "gold"}

    assert modified_parameters(current, {"tier": "gold"}, RULES) == current


def test_a_modification_needs_at_least_one_parameter() -> None:
    with pytest.raises(InvalidArgument, match=r"^mutable_parameters is required"):
        modified_parameters({"tier": "gold"}, {}, RULES)


def test_a_refused_modification_names_the_parameter_and_applies_nothing() -> None:
    current = {"tier": "gold"}

    with pytest.raises(InvalidArgument, match="'XXX_FakeKey'"):
        modified_parameters(current, {"tier": "silver", "XXX_FakeKey": "x"}, RULES)
    assert current == {"tier": "gold"}


def test_a_repeated_create_is_satisfied_when_each_requested_value_is_held() -> None:
    assert satisfies({"tier": "gold", "iops": "10"}, {"tier": "gold"})
    assert satisfies({"tier": "gold"}, {})


def test_a_repeated_create_is_not_satisfied_by_another_or_a_missing_value() -> None:
    assert not satisfies({"tier": "silver"}, {"tier": "gold"})
    assert not satisfies({}, {"tier": "gold"})
