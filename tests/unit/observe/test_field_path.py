"""Field paths and conditions on recorded requests (csi_mock/observe/field_path.py)."""

from __future__ import annotations

import pytest

from csi_mock.observe.field_path import FieldPathError, parse_condition, parse_path

REQUEST = {
    "volume_id": "vol-1",
    "volume_context": {"csi.storage.k8s.io/pod.name": "web-0", 'odd"]=key': "x"},
    "volume_capability": {"mount": {"mount_flags": ["ro", "noatime"]}},
    "volume_capabilities": [
        {"mount": {"fs_type": "ext4"}},
        {"mount": {"fs_type": "xfs"}},
    ],
    "readonly": True,
    "capacity_range": {"required_bytes": "1073741824"},
}


def test_a_path_is_field_names_keys_and_indexes() -> None:
    path = parse_path("volume_capabilities[1].mount['fs_type']")

    assert path.steps == ("volume_capabilities", 1, "mount", "fs_type")
    assert path.values(REQUEST) == ["xfs"]


def test_a_quoted_key_may_hold_dots_slashes_and_escaped_quotes() -> None:
    assert parse_path('volume_context["csi.storage.k8s.io/pod.name"]').values(REQUEST) == ["web-0"]
    assert parse_path(r'volume_context["odd\"]=key"]').values(REQUEST) == ["x"]


def test_a_field_name_on_a_list_looks_at_every_element() -> None:
    assert parse_path("volume_capabilities.mount.fs_type").values(REQUEST) == ["ext4", "xfs"]


def test_an_absent_field_reaches_nothing() -> None:
    assert parse_path("volume_context.nosuch").values(REQUEST) == []
    assert parse_path("volume_capabilities[7]").values(REQUEST) == []
    assert parse_path("volume_id.deeper").values(REQUEST) == []


def test_a_condition_ends_its_path_at_the_first_equals_outside_brackets() -> None:
    condition = parse_condition('volume_context["a=b"]=web-*')

    assert condition.path.steps == ("volume_context", "a=b")
    assert condition.pattern == "web-*"


def test_a_condition_globs_scalars_and_any_element_of_a_list() -> None:
    assert parse_condition('volume_context["csi.storage.k8s.io/pod.name"]=web-*').holds(REQUEST)
    assert parse_condition("volume_capability.mount.mount_flags=noatime").holds(REQUEST)
    assert not parse_condition("volume_capability.mount.mount_flags=rw").holds(REQUEST)
    assert parse_condition("readonly=true").holds(REQUEST)
    assert parse_condition("capacity_range.required_bytes=1073741824").holds(REQUEST)


def test_a_condition_on_an_absent_field_does_not_hold_even_for_star() -> None:
    assert not parse_condition("volume_context.nosuch=*").holds(REQUEST)


def test_a_condition_may_ask_for_an_empty_value() -> None:
    assert parse_condition("name=").holds({"name": ""})
    assert not parse_condition("name=").holds({"name": "x"})


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "at character 0: expected a field name"),
        ("1abc", "at character 0: expected a field name"),
        ("volume_context.", "at character 15: expected a field name"),
        ("volume_context[pod]", "at character 15: expected an index or a quoted key"),
        ('volume_context["pod"', "at character 20: expected ']'"),
        ('volume_context["pod', "unterminated key"),
        ("volume-id", "at character 6: expected '.', '[' or the end"),
    ],
)
def test_a_bad_path_is_refused_naming_it_and_where(text: str, complaint: str) -> None:
    with pytest.raises(FieldPathError) as caught:
        parse_path(text)

    assert repr(text) in str(caught.value)
    assert complaint in str(caught.value)


def test_a_condition_without_a_value_is_refused() -> None:
    with pytest.raises(FieldPathError, match="expected PATH=VALUE"):
        parse_condition("volume_id")
    with pytest.raises(FieldPathError, match=r"expected '\.', '\[' or '='"):
        parse_condition("volume id=x")


def test_an_overlong_path_is_refused() -> None:
    with pytest.raises(FieldPathError, match="longer than"):
        parse_path("a" * 2000)
