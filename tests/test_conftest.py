"""This checkout's session rules (tests/conftest.py): a bare ``pytest`` leaves out the
end-to-end suites and says how to run them; asked for, they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import E2E_DIR, e2e_wanted, finding_wanted, proven_elsewhere

pytest_plugins = ["pytester"]

REPO = E2E_DIR.parent.parent
# In process, this checkout's conftest as the only plugin of the harness's.
PLUGIN_ARGS = ("-p", "no:csi_harness", "-p", "tests.conftest", "-p", "no:cacheprovider")
PLUGIN_ARGS += ("-p", "no:asyncio")

SUITES = {
    "test_unit": "def test_arithmetic():\n    assert 1 + 1 == 2\n",
    "test_cluster": (
        "import pytest\n\npytestmark = pytest.mark.e2e\n\n"
        "def test_on_a_cluster():\n    pass\n\n"
        "@pytest.mark.mission\ndef test_a_mission():\n    pass\n"
    ),
}


def wanted(*args: str, with_e2e: bool = False, markexpr: str = "") -> bool:
    return e2e_wanted(with_e2e=with_e2e, markexpr=markexpr, args=args, invocation_dir=REPO)


def test_a_bare_session_and_paths_outside_tests_e2e_leave_the_suites_out() -> None:
    assert not wanted()
    assert not wanted("tests")
    assert not wanted("tests/unit", "tests/harness/test_cli.py::test_x")


def test_a_marker_expression_the_flag_or_a_path_inside_tests_e2e_asks_for_them() -> None:
    assert wanted(markexpr="e2e")
    assert wanted(markexpr="not e2e")  # the expression decides then
    assert wanted(with_e2e=True)
    assert wanted("tests/e2e")
    assert wanted("tests/e2e/test_topology.py::test_x[a]")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nmarkers =\n    e2e: end to end\n    mission: mission\n")
    pytester.makepyfile(**SUITES)
    return pytester


def test_bare_pytest_runs_what_needs_no_cluster_and_says_how_to_run_the_rest(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "2 end-to-end tests (tests/e2e) were not run, as they bring up a cluster: "
            "run them with `pytest -m e2e`, or everything with `pytest --with-e2e`"
        ]
    )


def test_with_e2e_everything_runs_and_nothing_is_said(project: pytest.Pytester) -> None:
    result = project.runpytest(*PLUGIN_ARGS, "--with-e2e")
    result.assert_outcomes(passed=3)
    assert "were not run" not in result.stdout.str()


def test_a_marker_expression_chooses_alone(project: pytest.Pytester) -> None:
    project.runpytest(*PLUGIN_ARGS, "-m", "e2e").assert_outcomes(passed=2, deselected=1)
    project.runpytest(*PLUGIN_ARGS, "-m", "mission").assert_outcomes(passed=1, deselected=2)


def test_a_session_without_end_to_end_tests_says_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_unit=SUITES["test_unit"])
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=1)
    assert "were not run" not in result.stdout.str()


def test_the_e2e_directory_is_this_checkouts() -> None:
    assert Path(__file__).resolve().parent / "e2e" == E2E_DIR
    assert (E2E_DIR / "conftest.py").is_file()


def test_tests_proven_elsewhere_are_left_out_but_the_named_exceptions_run(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(
        *PLUGIN_ARGS,
        "--with-e2e",
        "--proven-elsewhere=test_cluster.py",
        "--not-proven-elsewhere=test_cluster.py::test_a_mission",
    )
    result.assert_outcomes(passed=2, deselected=1)
    ran = {r.nodeid for r in result.reprec.getreports("pytest_runtest_logreport")}  # type: ignore[attr-defined]
    assert ran == {"test_cluster.py::test_a_mission", "test_unit.py::test_arithmetic"}


def test_an_exception_without_a_rule_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest(*PLUGIN_ARGS, "--not-proven-elsewhere=test_cluster.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--not-proven-elsewhere is an exception to --proven-elsewhere*"])


def test_proven_elsewhere_matches_node_id_prefixes() -> None:
    rule = ["tests/e2e/test_skip_attach.py"]
    assert proven_elsewhere("tests/e2e/test_skip_attach.py::test_x[a]", rule, [])
    assert not proven_elsewhere("tests/e2e/test_topology.py::test_x", rule, [])
    assert not proven_elsewhere(
        "tests/e2e/test_skip_attach.py::test_x[a]", rule, ["tests/e2e/test_skip_attach.py::test_x"]
    )


FINDING_SUITE = (
    "import pytest\n\npytestmark = pytest.mark.e2e\n\n"
    "def test_a_feature():\n    pass\n\n"
    "@pytest.mark.finding\ndef test_a_finding():\n    pass\n"
)


def test_a_finding_runs_only_when_the_marker_expression_names_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    e2e: end to end\n    finding: finding\n")
    pytester.makepyfile(test_cluster=FINDING_SUITE)
    pytester.runpytest(*PLUGIN_ARGS, "--with-e2e").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest(*PLUGIN_ARGS, "-m", "e2e").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest(*PLUGIN_ARGS, "-m", "finding").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest(*PLUGIN_ARGS, "-m", "e2e or (finding)").assert_outcomes(passed=2)


def test_finding_wanted_reads_the_marker_not_a_substring() -> None:
    assert finding_wanted("finding")
    assert finding_wanted("e2e and (finding)")
    assert not finding_wanted("findings")
    assert not finding_wanted("")
