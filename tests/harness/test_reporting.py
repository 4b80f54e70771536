"""The run summary and the failure report (csi_harness/_internal/reporting.py).

The plugin is tried on small fake suites run by ``pytester``, in process, with the
csi_harness plugin switched off so that nothing reaches for a real cluster. The
collectors behind the failure report: tests/harness/test_diagnostics.py.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET

import pytest

from csi_harness._internal.reporting import diagnostics_dirname

pytest_plugins = ["pytester"]

# In process, with only this plugin of the harness; no asyncio plugin, no cache.
PLUGIN_ARGS = ("-p", "no:csi_harness", "-p", "csi_harness._internal.reporting", "-p", "no:asyncio")
PLUGIN_ARGS += ("-p", "no:cacheprovider", "--strict-markers")

CAPACITY_SUITE = """
    import pytest

    pytestmark = pytest.mark.e2e

    FEATURE = "capacity tracking"


    @pytest.mark.scenario(FEATURE, "claim within maximumVolumeSize binds")
    def test_binds():
        pass


    @pytest.mark.scenario(FEATURE, "claim larger than every maximumVolumeSize stays Pending")
    def test_stays_pending():
        assert "Bound" == "Pending", "claim got bound"


    @pytest.mark.scenario(FEATURE, "capacity per zone")
    @pytest.mark.skip(reason="needs two zones")
    def test_per_zone():
        pass


    @pytest.mark.scenario("node limits", "attach limit is honoured")
    @pytest.mark.xfail(reason="kubelet caches the limit")
    def test_attach_limit():
        assert False


    def test_unmarked_e2e_test():
        pass
"""

UNIT_SUITE = """
    def test_unit_arithmetic():
        assert 1 + 1 == 2
"""


E2E_INI = "[pytest]\nmarkers =\n    e2e: end to end\n"
"""The ``e2e`` marker, which the harness's plugin (not loaded here) registers."""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a rootdir, an e2e module and a unit test module."""
    pytester.makeini(E2E_INI)
    pytester.makepyfile(
        **{
            "tests/e2e/test_capacity": textwrap.dedent(CAPACITY_SUITE),
            "tests/unit/test_unit": textwrap.dedent(UNIT_SUITE),
        }
    )
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGIN_ARGS, *args)


# -- the summary ---------------------------------------------------------------------


def test_summary_table_groups_scenarios_by_feature_with_counts_and_results(
    suite: pytest.Pytester,
) -> None:
    result = run(suite)
    result.assert_outcomes(passed=3, failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*= conformance summary =*",
            "capacity tracking (1 passed, 1 failed, 1 skipped)",
            "  claim within maximumVolumeSize binds * passed *s",
            "  claim larger than every maximumVolumeSize stays Pending * failed *s"
            "  AssertionError: claim got bound*",
            "  capacity per zone * skipped * needs two zones",
            "node limits (1 xfailed)",
            "  attach limit is honoured * xfailed *s  kubelet caches the limit",
            "test_capacity (1 passed)",
            "  test_unmarked_e2e_test * passed *",
            "5 tests in 3 features: 2 passed, 1 failed, 1 skipped, 1 xfailed; session wall time *s",
            "summary written to reports/summary.md",
        ]
    )


def test_unit_tests_are_not_in_the_summary(suite: pytest.Pytester) -> None:
    result = run(suite)
    assert "test_unit_arithmetic" not in result.stdout.str()
    assert "test_unit_arithmetic" not in (suite.path / "reports/summary.md").read_text()


def test_an_unmarked_test_counts_by_its_e2e_marker_or_the_cluster_fixture_not_its_directory(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(E2E_INI)
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def cluster():
            return "a cluster"
        """
    )
    pytester.makepyfile(
        **{
            "suites/test_marked": "import pytest\n\n@pytest.mark.e2e\ndef test_marked(): pass\n",
            "suites/test_uses": "def test_uses_the_cluster(cluster): pass\n",
            "tests/e2e/test_plain": "def test_plain_in_tests_e2e(): pass\n",
        }
    )
    result = run(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["test_marked (1 passed)", "  test_marked * passed *", "test_uses (1 passed)"]
    )
    assert "test_plain_in_tests_e2e" not in result.stdout.str()


def test_summary_markdown_has_a_row_per_scenario_and_the_feature_counts_once(
    suite: pytest.Pytester,
) -> None:
    run(suite)
    lines = (suite.path / "reports" / "summary.md").read_text().splitlines()
    assert lines[0] == "# Conformance summary"
    assert lines[2].startswith("5 tests in 3 features: 2 passed, 1 failed, 1 skipped, 1 xfailed;")
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[0] == "| feature | scenario | result | time | detail |"
    body = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]
    assert [(cells[0], cells[1], cells[2]) for cells in body] == [
        ("**capacity tracking** (1 passed, 1 failed, 1 skipped)", body[0][1], "passed"),
        ("", "claim larger than every maximumVolumeSize stays Pending", "failed"),
        ("", "capacity per zone", "skipped"),
        ("**node limits** (1 xfailed)", "attach limit is honoured", "xfailed"),
        ("**test_capacity** (1 passed)", "test_unmarked_e2e_test", "passed"),
    ]
    assert body[0][1] == "claim within maximumVolumeSize binds"
    assert body[1][4] == "AssertionError: claim got bound"
    assert body[2][3:] == ["", "needs two zones"]


def test_no_summary_when_no_test_declares_a_scenario(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(**{"tests/unit/test_unit": textwrap.dedent(UNIT_SUITE)})
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "conformance summary" not in result.stdout.str()
    assert not (pytester.path / "reports").exists()


def test_junit_xml_carries_feature_and_scenario_properties(suite: pytest.Pytester) -> None:
    run(suite, "--junitxml=junit.xml")
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(suite.path / "junit.xml").iter("testcase")
    }
    assert cases["test_stays_pending"] == {
        "feature": "capacity tracking",
        "scenario": "claim larger than every maximumVolumeSize stays Pending",
    }
    assert cases["test_unmarked_e2e_test"] == {
        "feature": "test_capacity",
        "scenario": "test_unmarked_e2e_test",
    }
    assert cases["test_unit_arithmetic"] == {}


def test_scenario_marker_with_the_wrong_arguments_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        **{
            "tests/e2e/test_bad": """
                import pytest

                @pytest.mark.scenario("capacity tracking")
                def test_only_a_feature():
                    pass
            """
        }
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_only_a_feature: @pytest.mark.scenario takes two*"])


def test_a_parametrized_scenario_has_a_row_per_parameter_set(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        **{
            "tests/e2e/test_classes": """
                import pytest

                @pytest.mark.scenario("capacity tracking", "capacity is published")
                @pytest.mark.parametrize("storage_class", ["csi-mock", "csi-mock-mirrored"])
                def test_published(storage_class):
                    pass
            """
        }
    )
    result = run(pytester)
    result.stdout.fnmatch_lines(
        [
            "capacity tracking (2 passed)",
            "  capacity is published [[]csi-mock] * passed *",
            "  capacity is published [[]csi-mock-mirrored] * passed *",
        ]
    )


# -- diagnostics on failure, end to end ----------------------------------------------

# A cluster whose apiserver refuses connections and whose driver is gone: the test's
# own failure must still be what the report says, with the logs that could be read.
BROKEN_CLUSTER_CONFTEST = """
    from pathlib import Path
    from types import SimpleNamespace

    import pytest

    from csi_mock.admin.client import AdminClient

    KUBECONFIG = '''
    apiVersion: v1
    kind: Config
    clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
    users: [{name: u, user: {token: t}}]
    contexts: [{name: x, context: {cluster: c, user: u}}]
    current-context: x
    '''


    @pytest.fixture(scope="session")
    def cluster(tmp_path_factory):
        root = tmp_path_factory.mktemp("run")
        (root / "kubeconfig").write_text(KUBECONFIG)
        logs = root / "logs"
        logs.mkdir()
        (logs / "kubelet-node-1.log").write_text(
            "".join(f"kubelet line {i}\\n" for i in range(100))
        )
        (logs / "csi-mock-controller.log").write_text("controller started\\n")
        return SimpleNamespace(
            kubeconfig=root / "kubeconfig",
            log_dir=logs,
            driver=SimpleNamespace(
                spec=SimpleNamespace(name="csi-mock.example", namespace="csi-mock")
            ),
            admin_instances=lambda: {
                instance: AdminClient(root / instance / "admin.sock", timeout=1)
                for instance in ("controller", "node-1")
            },
        )


    @pytest.fixture
    def namespace(cluster):
        return "t-1234"
"""

FAILING_E2E_SUITE = """
    import pytest


    @pytest.mark.scenario("capacity tracking", "claim stays Pending")
    def test_stays_pending(cluster, namespace):
        assert "Bound" == "Pending", "claim got bound"


    @pytest.fixture
    def broken_fixture(cluster):
        raise RuntimeError("could not create the storage class")


    @pytest.mark.scenario("capacity tracking", "storage class setup")
    def test_setup_fails(broken_fixture):
        pass


    @pytest.mark.scenario("capacity tracking", "no cluster used")
    def test_without_cluster():
        assert False, "no diagnostics for me"
"""


@pytest.fixture
def failing_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(textwrap.dedent(BROKEN_CLUSTER_CONFTEST))
    pytester.makepyfile(**{"tests/e2e/test_pending": textwrap.dedent(FAILING_E2E_SUITE)})
    return pytester


def test_failure_report_keeps_the_failure_and_adds_what_could_be_collected(
    failing_suite: pytest.Pytester,
) -> None:
    result = run(failing_suite, "-o", "junit_logging=system-out", "--junitxml=junit.xml")
    result.assert_outcomes(failed=2, errors=1)
    out = result.stdout.str()
    assert "AssertionError: claim got bound" in out
    result.stdout.fnmatch_lines(
        [
            "*- Captured stdout diagnostics: overview -*",
            "driver csi-mock.example, test namespace t-1234, collected in *s;"
            " files in reports/diagnostics/tests_e2e_test_pending.py_test_stays_pending",
            "component logs: */logs",
            "not collected: events in t-1234 (ConnectError: *Connection refused)",
            "not collected: journal of controller (AdminConnectionError: *)",
            "not collected: journal of node-1 (AdminConnectionError: *)",
            "the apiserver failed (ConnectError: *): no further API reads were tried",
            "*- Captured stdout diagnostics: events t-1234 -*",
            "(events in t-1234: not collected, ConnectError: *)",
            "*- Captured stdout diagnostics: events csi-mock -*",
            "(events in csi-mock: skipped, the apiserver failed before)",
            "*- Captured stdout diagnostics: objects -*",
            "*",
            "(pods in t-1234: skipped, the apiserver failed before)",
            "*- Captured stdout diagnostics: driver journal -*",
            "*",
            "(journal of controller: not collected, AdminConnectionError*",
            "*- Captured stdout diagnostics: log csi-mock-controller -*",
            "[[]last 1 lines; a longer tail in reports/diagnostics/*/logs/csi-mock-controller.log]",
            "controller started",
            "*- Captured stdout diagnostics: log kubelet-node-1 -*",
            "[[]last 40 lines; *",
            "kubelet line 60",
        ]
    )
    assert "kubelet line 59\n" not in out
    system_out = "".join(
        case.findtext("system-out") or ""
        for case in ET.parse(failing_suite.path / "junit.xml").iter("testcase")
        if case.get("name") == "test_stays_pending"
    )
    assert "kubelet line 99" in system_out


def test_failure_files_hold_the_failure_and_the_longer_logs(
    failing_suite: pytest.Pytester,
) -> None:
    run(failing_suite)
    directory = (
        failing_suite.path / "reports/diagnostics/tests_e2e_test_pending.py_test_stays_pending"
    )
    assert "claim got bound" in (directory / "failure.txt").read_text()
    kubelet_log = (directory / "logs" / "kubelet-node-1.log").read_text()
    assert kubelet_log.splitlines()[0] == "kubelet line 0"
    assert len(kubelet_log.splitlines()) == 100


def test_setup_error_gets_diagnostics_and_counts_as_an_error(
    failing_suite: pytest.Pytester,
) -> None:
    result = run(failing_suite)
    result.stdout.fnmatch_lines(
        [
            "*- Captured stdout diagnostics: overview -*",
            "driver csi-mock.example, test namespace (none), *test_setup_fails",
            "*",
            "  storage class setup * error *setup error: RuntimeError: could not create*"
            " [[]reports/diagnostics/tests_e2e_test_pending.py_test_setup_fails]",
        ]
    )


def test_tests_without_the_cluster_get_no_diagnostics(failing_suite: pytest.Pytester) -> None:
    result = run(failing_suite)
    assert not (
        failing_suite.path / "reports/diagnostics/tests_e2e_test_pending.py_test_without_cluster"
    ).exists()
    result.stdout.fnmatch_lines(
        ["  no cluster used * failed *AssertionError: no diagnostics for me"]
    )


# -- the diagnostics directory ---------------------------------------------------


def test_diagnostics_directory_name_is_safe_and_unique_when_shortened() -> None:
    assert diagnostics_dirname("tests/e2e/test_a.py::test_b[x-1/2]") == (
        "tests_e2e_test_a.py_test_b_x-1_2"
    )
    long_a, long_b = (diagnostics_dirname(f"tests/e2e/t.py::test_{'x' * 200}{n}") for n in "ab")
    assert len(long_a) <= 120 and long_a != long_b
