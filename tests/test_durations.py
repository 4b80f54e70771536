"""The longest-first schedule (tests/durations.py) and the script that writes its file
(scripts/test_durations.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tests.durations import DURATIONS_FILE, load_durations, longest_first
from tests.scripts import load_script

REPO = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    return load_script("test_durations.py")


@dataclass(frozen=True)
class Item:
    nodeid: str


def ids(items: list[Item]) -> list[str]:
    return [item.nodeid for item in items]


def test_timed_tests_come_first_longest_first_and_the_rest_keep_their_order() -> None:
    items = [Item(n) for n in ("a::quick1", "a::slow", "b::quick2", "b::slower", "c::quick3")]
    ordered = longest_first(items, {"a::slow": 20.0, "b::slower": 90.0, "gone::test": 500.0})
    assert ids(ordered) == ["b::slower", "a::slow", "a::quick1", "b::quick2", "c::quick3"]


def test_without_durations_the_order_is_unchanged(tmp_path: Path) -> None:
    items = [Item("x::b"), Item("x::a")]
    assert load_durations(tmp_path / "absent.json") == {}
    assert ids(longest_first(items, {})) == ["x::b", "x::a"]


def test_a_junit_case_maps_to_the_node_id_of_its_module_class_and_name() -> None:
    node_id = _script().node_id
    assert node_id("tests.test_durations", "test_x[a-b]") == "tests/test_durations.py::test_x[a-b]"
    assert (
        node_id("tests.test_durations.Some.Nested", "test_y")
        == "tests/test_durations.py::Some::Nested::test_y"
    )
    assert node_id("docs.admin-api.md", "line:12,column:1") is None


def test_the_script_keeps_the_slow_cases_longest_first(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="tests.test_durations" name="test_quick" time="0.4"/>'
        '<testcase classname="tests.test_durations" name="test_slow" time="12.25"/>'
        '<testcase classname="tests.test_conftest" name="test_slower" time="40"/>'
        '<testcase classname="tests.nowhere" name="test_lost" time="99"/>'
        "</testsuite></testsuites>"
    )
    output = tmp_path / "durations.json"
    assert _script().main(["--junit", str(report), "--output", str(output)]) == 0
    written = json.loads(output.read_text())["tests"]
    assert list(written.items()) == [
        ("tests/test_conftest.py::test_slower", 40.0),
        ("tests/test_durations.py::test_slow", 12.2),
    ]


def test_the_committed_file_names_only_tests_that_exist() -> None:
    for nodeid in load_durations(DURATIONS_FILE):
        assert (REPO / nodeid.split("::", 1)[0]).is_file(), nodeid
