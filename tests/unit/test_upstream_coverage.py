"""The upstream coverage table (scripts/upstream_coverage.py): generated from the
``@pytest.mark.upstream`` markers and a run's JUnit reports
(scripts/upstream_coverage_run.py); its check fails on a stale table, a marker that
names no upstream case, a listed test that no longer exists, and a case the table says
is covered that the run does not cover."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


# The script imports its sibling as the interpreter would, from the scripts directory.
run_module = load_script("upstream_coverage_run.py")
coverage = load_script("upstream_coverage.py")
Case, Collection, Mark = coverage.Case, coverage.Collection, coverage.Mark
Outcome, RunRecord = run_module.Outcome, run_module.RunRecord

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


PASSED = Outcome("passed", pods_on_simulated_nodes=0)
RUN = RunRecord(
    "a run", {"local": {"test_a.py::test_one": PASSED, "test_a.py::test_two[x]": PASSED}}
)


def collection(marks: list[Any]) -> Any:
    """What collecting would find: the marks' tests and an unmarked one."""
    tests = {mark.test for mark in marks} | {"test_a.py::test_unmarked"}
    return Collection(marks=list(marks), tests=tests)


def table_rows(table: str) -> dict[str, list[str]]:
    """The table's rows by case title: their cells."""
    return {
        cells[1]: cells
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
        for cells in [[c.strip() for c in line.strip("|").split(" | ")]]
    }


def test_a_table_generated_from_the_markers_and_a_run_passes_the_check() -> None:
    table = coverage.render(CASES, MARKS, RUN)
    assert coverage.problems(CASES, collection(MARKS), table, RUN) == []
    rows = table_rows(table)
    assert rows["covered case"][2:] == ["covered", "local: passed", "`test_a.py::test_one`"]
    assert rows["partly covered case"][2:] == [
        "partly: its tests check part of it (what is missing: under tests)",
        "local: passed",
        "`test_a.py::test_two[x]` (missing: the second pod)",
    ]
    assert rows["uncovered case"][2:] == ["**not covered**", "—", "—"]
    assert rows["foreign case"][2:] == ["does not apply: needs a cloud", "—", "—"]
    assert (
        "4 cases: 1 covered, 1 partly covered, 1 not covered, 1 do not apply. "
        "Covered, by provider: local 1." in table
    )
    assert "Made from a run; recorded in `docs/upstream-coverage-run.json`." in table


def test_a_stale_table_is_reported_with_the_row_that_changed() -> None:
    table = coverage.render(CASES, MARKS, RUN)
    # The partial test now covers its case fully: the checked-in table says "partly".
    now = [MARKS[0], Mark("test_a.py::test_two[x]", "a.go", "partly covered case")]
    (problem,) = coverage.problems(CASES, collection(now), table, RUN)
    assert "docs/upstream-coverage.md is stale" in problem
    assert "-| context | partly covered case | partly: its tests check part of it" in problem
    assert "+| context | partly covered case | covered | local: passed |" in problem


def test_a_marker_naming_an_unknown_case_is_reported() -> None:
    typo = Mark("test_a.py::test_three", "a.go", "covered  case")
    marks = [*MARKS, typo]
    table = coverage.render(CASES, marks, RUN)
    assert coverage.problems(CASES, collection(marks), table, RUN) == [
        "test_a.py::test_three: @pytest.mark.upstream('a.go', 'covered  case') names no "
        "upstream case (scripts/upstream_coverage.py CASES)"
    ]


def test_a_marker_on_a_case_that_does_not_apply_is_reported() -> None:
    marks = [*MARKS, Mark("test_b.py::test_cloud", "b.go", "foreign case")]
    (problem,) = coverage.marker_problems(CASES, collection(marks))
    assert problem.startswith("test_b.py::test_cloud: covers b.go 'foreign case'")


def test_a_listed_test_that_no_longer_exists_is_reported() -> None:
    table = coverage.render(CASES, MARKS, RUN)
    gone = collection(MARKS[:1])
    found = coverage.problems(CASES, gone, table, RUN)
    assert (
        found[0] == "docs/upstream-coverage.md lists test_a.py::test_two[x], which no longer exists"
    )
    assert found[1].startswith("docs/upstream-coverage.md is stale")
    assert len(found) == 2


def test_a_missing_table_or_run_record_is_reported() -> None:
    hint = (
        "run python scripts/upstream_coverage.py (with --junit PROVIDER=REPORT for a new "
        "run) and commit docs/upstream-coverage.md and docs/upstream-coverage-run.json"
    )
    assert coverage.problems(CASES, collection(MARKS), None, RUN) == [
        f"docs/upstream-coverage.md does not exist: {hint}"
    ]
    table = coverage.render(CASES, MARKS, RUN)
    assert coverage.problems(CASES, collection(MARKS), table, None) == [
        f"docs/upstream-coverage-run.json does not exist: {hint}"
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


# -- covered only where a test passed with its pods on real kubelets ---------------------

ONE_CASE = (Case("a.go", "A suite", "context", "covered case"),)
FULL = [Mark("test_a.py::test_one", "a.go", "covered case")]


def row(*outcomes: tuple[str, Any]) -> Any:
    """The row of ONE_CASE when test_one ended on each provider as given (None: it
    did not run there)."""
    record = RunRecord(
        "a run",
        {p: {} if o is None else {"test_a.py::test_one": o} for p, o in outcomes},
    )
    return coverage.case_row(ONE_CASE[0], FULL, record)


def test_a_pass_with_a_pod_placed_on_a_simulated_node_does_not_cover_the_case() -> None:
    found = row(("local", Outcome("passed", pods_on_simulated_nodes=2)))
    assert found.coverage == (
        "partly: its pods were placed on simulated nodes, which never run them: the test "
        "stops at scheduling where upstream runs the pod"
    )
    assert found.where == "local: passed, 2 pods placed on simulated nodes"
    assert found.covered_on == ()


def test_the_case_is_covered_on_the_provider_where_its_pods_ran_on_real_kubelets() -> None:
    found = row(
        ("local", Outcome("passed", pods_on_simulated_nodes=1)),
        ("kind", Outcome("passed", pods_on_simulated_nodes=0)),
    )
    assert found.coverage == "covered"
    assert found.covered_on == ("kind",)
    assert found.where == "local: passed, 1 pod placed on simulated nodes<br>kind: passed"


def test_a_pass_that_does_not_say_where_its_pods_ran_counts_only_on_kind() -> None:
    # A report from before the harness recorded the property: kind has no simulated
    # nodes, the local provider has.
    unrecorded = Outcome("passed")
    local = row(("local", unrecorded))
    assert local.coverage == (
        "partly: where its pods ran is not recorded (only kind's nodes are all real kubelets)"
    )
    assert local.where == "local: passed, where its pods ran not recorded"
    assert row(("local", unrecorded), ("kind", unrecorded)).covered_on == ("kind",)


def test_a_skipped_or_failed_or_absent_test_does_not_cover_the_case() -> None:
    found = row(
        ("local", Outcome("skipped", "needs the feature gate X=true on the kubelet")),
        ("kind", Outcome("failed", pods_on_simulated_nodes=0)),
        ("existing", None),
    )
    assert found.coverage == "partly: no test of it passed in the run"
    assert found.where == (
        "local: skipped (needs the feature gate X=true on the kubelet)<br>"
        "kind: failed<br>existing: not run"
    )


def test_a_partial_test_that_passed_on_real_kubelets_does_not_cover_the_case() -> None:
    partial = [Mark("test_a.py::test_one", "a.go", "covered case", missing="the retry")]
    record = RunRecord("a run", {"kind": {"test_a.py::test_one": PASSED}})
    found = coverage.case_row(ONE_CASE[0], partial, record)
    assert found.coverage.startswith("partly: its tests check part of it")
    assert found.covered_on == ()


def test_where_it_ran_is_the_best_of_the_case_s_full_tests_on_each_provider() -> None:
    marks = [
        *FULL,
        Mark("test_a.py::test_two", "a.go", "covered case"),
        Mark("test_a.py::test_partial", "a.go", "covered case", missing="the retry"),
    ]
    record = RunRecord(
        "a run",
        {
            "local": {
                "test_a.py::test_one": Outcome("skipped", "no room"),
                "test_a.py::test_two": Outcome("passed", pods_on_simulated_nodes=1),
                # Better, but it checks only part of the case.
                "test_a.py::test_partial": PASSED,
            }
        },
    )
    found = coverage.case_row(ONE_CASE[0], marks, record)
    assert found.where == "local: passed, 1 pod placed on simulated nodes"
    assert found.coverage.startswith("partly: its pods were placed on simulated nodes")


# -- the check against a run -------------------------------------------------------------


def test_the_run_check_fails_when_a_case_the_table_covers_did_not_pass_in_the_run() -> None:
    recorded = RunRecord("CI", {"local": {"test_a.py::test_one": PASSED}})
    run = RunRecord(
        "this run", {"local": {"test_a.py::test_one": Outcome("skipped", "no kubelet")}}
    )
    failures, notes = coverage.run_disagreements(ONE_CASE, FULL, recorded, run)
    assert failures == [
        "a.go 'covered case': the table says covered (local), but in this run no test of "
        "it passed in the run: local: skipped (no kubelet)"
    ]
    assert notes == []


def test_the_run_check_fails_when_a_covered_case_now_places_pods_on_simulated_nodes() -> None:
    recorded = RunRecord("CI", {"local": {"test_a.py::test_one": PASSED}})
    run = RunRecord(
        "this run",
        {"local": {"test_a.py::test_one": Outcome("passed", pods_on_simulated_nodes=1)}},
    )
    (failure,), _ = coverage.run_disagreements(ONE_CASE, FULL, recorded, run)
    assert "its pods were placed on simulated nodes" in failure


def test_the_run_check_notes_but_does_not_fail_a_run_that_covers_more() -> None:
    recorded = RunRecord("CI", {"local": {"test_a.py::test_one": Outcome("passed")}})
    run = RunRecord("this run", {"local": {"test_a.py::test_one": PASSED}})
    failures, (note,) = coverage.run_disagreements(ONE_CASE, FULL, recorded, run)
    assert failures == []
    assert note.startswith("a.go 'covered case': partly: where its pods ran is not recorded")
    assert note.endswith("covered (local: passed) in this run")


def test_the_run_check_tolerates_a_skip_on_one_provider_while_another_covers_the_case() -> None:
    both = {"local": {"test_a.py::test_one": PASSED}, "kind": {"test_a.py::test_one": PASSED}}
    recorded = RunRecord("CI", both)
    run = RunRecord(
        "this run",
        {**both, "kind": {"test_a.py::test_one": Outcome("skipped", "needs a feature gate")}},
    )
    failures, (note,) = coverage.run_disagreements(ONE_CASE, FULL, recorded, run)
    assert failures == []
    assert "kind: skipped (needs a feature gate)" in note
