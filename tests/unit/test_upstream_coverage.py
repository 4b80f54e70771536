"""The upstream coverage table (scripts/upstream_coverage.py): generated from the
``@pytest.mark.upstream`` markers, and its check fails on a stale table, a marker that
names no upstream case, and a listed test that no longer exists."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "upstream_coverage", REPO / "scripts" / "upstream_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


coverage = _load()
Case, Collection, Mark = coverage.Case, coverage.Collection, coverage.Mark

CASES = (
    Case("a.go", "A suite", "context", "covered case"),
    Case("a.go", "A suite", "context", "partly covered case"),
    Case("b.go", "B suite", "", "uncovered case"),
    Case("b.go", "B suite", "", "foreign case", not_applicable="needs a cloud"),
)
MARKS = [
    Mark("test_a.py::test_one", "a.go", "covered case"),
    Mark("test_a.py::test_two[x]", "a.go", "partly covered case", missing="the second pod"),
]


def collection(marks: list[Any]) -> Any:
    """What collecting would find: the marks' tests and an unmarked one."""
    tests = {mark.test for mark in marks} | {"test_a.py::test_unmarked"}
    return Collection(marks=list(marks), tests=tests)


def test_a_table_generated_from_the_markers_passes_the_check() -> None:
    table = coverage.render(CASES, MARKS)
    assert coverage.problems(CASES, collection(MARKS), table) == []
    rows = {line.split(" | ")[1]: line for line in table.splitlines() if line.count(" | ") == 3}
    assert "| covered | `test_a.py::test_one` |" in rows["covered case"]
    assert (
        "| partly | `test_a.py::test_two[x]` (missing: the second pod) |"
        in (rows["partly covered case"])
    )
    assert "| **not covered** | — |" in rows["uncovered case"]
    assert "| does not apply: needs a cloud | — |" in rows["foreign case"]
    assert "4 cases: 1 covered, 1 partly covered, 1 not covered, 1 do not apply." in table


def test_a_stale_table_is_reported_with_the_row_that_changed() -> None:
    table = coverage.render(CASES, MARKS)
    # The partial test now covers its case fully: the checked-in table says "partly".
    now = [MARKS[0], Mark("test_a.py::test_two[x]", "a.go", "partly covered case")]
    (problem,) = coverage.problems(CASES, collection(now), table)
    assert "docs/upstream-coverage.md is stale" in problem
    assert "-| context | partly covered case | partly |" in problem
    assert "+| context | partly covered case | covered |" in problem


def test_a_marker_naming_an_unknown_case_is_reported() -> None:
    typo = Mark("test_a.py::test_three", "a.go", "covered  case")
    marks = [*MARKS, typo]
    table = coverage.render(CASES, marks)
    assert coverage.problems(CASES, collection(marks), table) == [
        "test_a.py::test_three: @pytest.mark.upstream('a.go', 'covered  case') names no "
        "upstream case (scripts/upstream_coverage.py CASES)"
    ]


def test_a_marker_on_a_case_that_does_not_apply_is_reported() -> None:
    marks = [*MARKS, Mark("test_b.py::test_cloud", "b.go", "foreign case")]
    (problem,) = coverage.marker_problems(CASES, collection(marks))
    assert problem.startswith("test_b.py::test_cloud: covers b.go 'foreign case'")


def test_a_listed_test_that_no_longer_exists_is_reported() -> None:
    table = coverage.render(CASES, MARKS)
    gone = collection(MARKS[:1])
    found = coverage.problems(CASES, gone, table)
    assert (
        found[0] == "docs/upstream-coverage.md lists test_a.py::test_two[x], which no longer exists"
    )
    assert found[1].startswith("docs/upstream-coverage.md is stale")
    assert len(found) == 2


def test_a_missing_table_is_reported() -> None:
    assert coverage.problems(CASES, collection(MARKS), None) == [
        "docs/upstream-coverage.md does not exist: run python scripts/upstream_coverage.py "
        "and commit docs/upstream-coverage.md"
    ]


def suite(directory: Path) -> Path:
    """A directory with a pytest configuration of its own (as the repository's: the
    marker registered), for a test module."""
    (directory / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "markers =\n    upstream(file, title, missing=None): upstream case\n"
    )
    return directory


def test_markers_are_collected_from_tests_functions_and_parameters(tmp_path: Path) -> None:
    (tmp_path / "test_marked_for_coverage.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.upstream("a.go", "covered case")
            @pytest.mark.upstream("a.go", "partly covered case", missing="the rest")
            def test_two_cases():
                pass

            @pytest.mark.parametrize(
                "x", [1, pytest.param(2, marks=pytest.mark.upstream("b.go", "uncovered case"))]
            )
            def test_param(x):
                pass

            @pytest.mark.upstream("a.go")
            def test_malformed():
                pass
            """
        )
    )
    found = coverage.collect(suite(tmp_path))
    module = "test_marked_for_coverage.py"
    assert found.tests == {
        f"{module}::test_two_cases",
        f"{module}::test_param[1]",
        f"{module}::test_param[2]",
        f"{module}::test_malformed",
    }
    assert sorted(found.marks, key=lambda m: m.title) == [
        Mark(f"{module}::test_two_cases", "a.go", "covered case"),
        Mark(f"{module}::test_two_cases", "a.go", "partly covered case", "the rest"),
        Mark(f"{module}::test_param[2]", "b.go", "uncovered case"),
    ]
    (malformed,) = found.malformed
    assert malformed.startswith(f"{module}::test_malformed: @pytest.mark.upstream takes")


def test_a_module_that_does_not_import_is_a_collection_failure(tmp_path: Path) -> None:
    (tmp_path / "test_broken_for_coverage.py").write_text("import no_such_module_here\n")
    with pytest.raises(coverage.CollectionFailed, match="no_such_module_here"):
        coverage.collect(suite(tmp_path))
