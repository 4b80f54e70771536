"""Reading a run's JUnit XML reports for the upstream coverage table
(scripts/upstream_coverage_run.py): each test by the id its marker has, how it ended,
and where kube-scheduler placed its pods."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


run_module = load_script("upstream_coverage_run.py")
Outcome, RunRecord = run_module.Outcome, run_module.RunRecord

# As pytest writes it (one testsuite in testsuites; properties from user_properties).
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="1" skipped="2" tests="7"
  timestamp="2026-11-28T05:59:27.773608+00:00" hostname="vm">
<testcase classname="tests.e2e.test_cap" name="test_runs" time="1.0"><properties>
  <property name="driver" value="d1.csi-mock" />
  <property name="pods_on_simulated_nodes" value="0" /></properties></testcase>
<testcase classname="tests.e2e.test_cap" name="test_pinned[a/b::c]" time="1.0"><properties>
  <property name="pods_on_simulated_nodes" value="3" /></properties></testcase>
<testcase classname="tests.e2e.test_cap" name="test_old" time="1.0" />
<testcase classname="tests.e2e.sub.test_deep.TestGroup" name="test_skipped" time="0.1">
  <skipped type="pytest.skip" message="needs 1 simulated nodes;
    the cluster has 0">tests/e2e/conftest.py:42: needs ...</skipped></testcase>
<testcase classname="tests.e2e.test_cap" name="test_expected_to_fail" time="0.1">
  <skipped type="pytest.xfail" message="kubernetes issue 1" /></testcase>
<testcase classname="tests.e2e.test_cap" name="test_broken" time="0.1">
  <properties><property name="pods_on_simulated_nodes" value="0" /></properties>
  <failure message="AssertionError">...</failure></testcase>
<testcase classname="tests.unit.test_cap" name="test_runs" time="0.1" />
</testsuite></testsuites>
"""
TESTS = [
    "test_cap.py::test_runs",
    "test_cap.py::test_pinned[a/b::c]",
    "test_cap.py::test_old",
    "sub/test_deep.py::TestGroup::test_skipped",
    "test_cap.py::test_expected_to_fail",
    "test_cap.py::test_broken",
    "test_cap.py::test_not_in_the_report",
]


def test_each_marked_test_is_found_in_the_report_with_its_outcome(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(REPORT, encoding="utf-8")
    record = run_module.record_of({"local": report}, TESTS, "tests/e2e", None)
    assert record.outcomes == {
        "local": {
            "test_cap.py::test_runs": Outcome("passed", pods_on_simulated_nodes=0),
            "test_cap.py::test_pinned[a/b::c]": Outcome("passed", pods_on_simulated_nodes=3),
            "test_cap.py::test_old": Outcome("passed"),
            "sub/test_deep.py::TestGroup::test_skipped": Outcome(
                "skipped", "needs 1 simulated nodes; the cluster has 0"
            ),
            "test_cap.py::test_expected_to_fail": Outcome("skipped", "xfail: kubernetes issue 1"),
            "test_cap.py::test_broken": Outcome("failed", pods_on_simulated_nodes=0),
        }
    }
    assert record.run == "the run of local 2026-11-28T05:59:27.773608+00:00"


def test_a_record_survives_writing_and_reading() -> None:
    record = RunRecord(
        "CI",
        {
            "local": {
                "test_a.py::test_b": Outcome("skipped", "no room"),
                "test_a.py::test_c": Outcome("passed", pods_on_simulated_nodes=0),
            },
            "kind": {"test_a.py::test_b": Outcome("passed")},
        },
    )
    assert RunRecord.loads(record.dumps()) == record


def test_only_the_local_provider_needs_the_property_to_say_where_pods_ran() -> None:
    unrecorded = Outcome("passed")
    assert unrecorded.on_real_kubelets("local") is None
    assert unrecorded.on_real_kubelets("kind") is True
    assert Outcome("passed", pods_on_simulated_nodes=1).on_real_kubelets("local") is False
    assert Outcome("passed", pods_on_simulated_nodes=0).on_real_kubelets("local") is True
