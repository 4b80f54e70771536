from pathlib import Path

from csi_harness._internal.upstream.summary import read_junit

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5">
  <testsuite name="Kubernetes e2e suite" tests="5">
    <testcase name="[SynchronizedBeforeSuite]" time="1.0"></testcase>
    <testcase name="[sig-storage] External Storage [Driver: csi-mock.example]
 [Testpattern: Dynamic PV (block volmode)] volumes should store data" time="12.5"></testcase>
    <testcase name="[sig-storage] External Storage [Driver: csi-mock.example]
 [Testpattern: Dynamic PV (block volmode)] volumes should allow exec" time="0">
      <skipped message="skipped - Driver csi-mock.example doesn&apos;t support exec --
 skipping"></skipped>
    </testcase>
    <testcase name="[sig-storage] External Storage [Driver: csi-mock.example]
 [Testpattern: Dynamic PV (default fs)] provisioning should provision" time="3">
      <failure message="timed out waiting for the condition">stack</failure>
    </testcase>
    <testcase name="[sig-storage] In-tree Volumes [Driver: nfs] should not count" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>
"""


def report(tmp_path: Path) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    return path


def test_only_external_storage_specs_are_counted(tmp_path: Path) -> None:
    summary = read_junit(report(tmp_path))

    assert summary.counts() == {"passed": 1, "skipped": 1, "failed": 1}


def test_rows_are_test_pattern_and_suite(tmp_path: Path) -> None:
    rows = read_junit(report(tmp_path)).rows()

    assert rows[("Dynamic PV (block volmode)", "volumes")] == {"passed": 1, "skipped": 1}
    assert rows[("Dynamic PV (default fs)", "provisioning")] == {"failed": 1}


def test_skip_reasons_are_one_line_without_the_skipped_prefix(tmp_path: Path) -> None:
    reasons = read_junit(report(tmp_path)).skip_reasons()

    assert reasons == {"Driver csi-mock.example doesn't support exec -- skipping": 1}


def test_markdown_lists_failures_and_explained_skips(tmp_path: Path) -> None:
    summary = read_junit(report(tmp_path))
    summary.explanations["Driver csi-mock.example doesn't support exec -- skipping"] = "by design"

    text = summary.markdown("title")

    assert "1 passed, 1 failed, 1 skipped (3 External Storage specs)" in text
    assert "| Dynamic PV (default fs) | provisioning | 0 | 1 | 0 |" in text
    assert "timed out waiting for the condition" in text
    assert "| 1 | Driver csi-mock.example doesn't support exec -- skipping | by design |" in text
    assert summary.unexplained() == []


def test_specs_excluded_by_the_runs_skip_expression_say_so(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(
        '<testsuites><testsuite><testcase name="External Storage [Testpattern: x] disruptive'
        ' kills the kubelet [Disruptive]"><skipped message="skipped"/></testcase>'
        '<testcase name="External Storage [Testpattern: x] volumes never reached">'
        '<skipped message="skipped"/></testcase></testsuite></testsuites>'
    )

    reasons = read_junit(path, skips=[r"\[Disruptive\]"]).skip_reasons()

    assert reasons == {
        r"excluded by --skip \[Disruptive\]": 1,
        "not selected (filtered out, or the run ended first)": 1,
    }
