#!/usr/bin/env python3
"""Generate docs/upstream-coverage.md: every case of Kubernetes' CSI mock e2e suites
(``test/e2e/storage/csimock`` of Kubernetes 1.37.1: 138 cases in 18 files), and the
tests that cover it, or why none can here.

The cases are ``CASES`` below, as upstream names them (``test/e2e/storage/csimock``:
the file and the ginkgo title, with the Describe and Context around it). A test says
which it covers with ``@pytest.mark.upstream(file, title)`` (several are allowed; on a
``pytest.param`` too), and ``missing="..."`` when it checks only part of the case. The
markers are read by collecting ``tests/e2e`` with pytest (no cluster: nothing runs).
Where each test ran and how it ended comes from a run's JUnit reports, recorded in
docs/upstream-coverage-run.json (scripts/upstream_coverage_run.py); a case is covered
only where a test of it without ``missing`` passed with its pods on real kubelets.

Usage::

    # (re)write the table and the run record from a run's reports (CI's two parts)
    python scripts/upstream_coverage.py --junit local=reports/junit.xml \
        --junit kind=reports/kind/junit.xml --run "<which run>"
    python scripts/upstream_coverage.py           # the same from the recorded run
    python scripts/upstream_coverage.py --check   # exit 1 if it is stale, a marker names
                                                  # no case, or it lists a test that is gone
    # ... and if a case the table says is covered is not covered in this run
    python scripts/upstream_coverage.py --check --junit local=... --junit kind=...
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from upstream_coverage_run import Outcome, RunRecord, record_of

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "e2e"
TABLE = ROOT / "docs" / "upstream-coverage.md"
RUN = ROOT / "docs" / "upstream-coverage-run.json"
MARKER = "upstream"
UPSTREAM_DIR = "test/e2e/storage/csimock"
REGENERATE_HINT = (
    "run python scripts/upstream_coverage.py (with --junit PROVIDER=REPORT for a new run) "
    "and commit docs/upstream-coverage.md and docs/upstream-coverage-run.json"
)


@dataclass(frozen=True)
class Case:
    """One upstream ginkgo case: ``title`` is its It (or table entry) name, unique in
    ``file``; ``describe`` and ``context`` the containers around it."""

    file: str
    describe: str
    context: str
    title: str
    not_applicable: str | None = None
    """Why no test here can cover it, if so."""


def _cases(file: str, describe: str, context: str, *titles: str) -> tuple[Case, ...]:
    return tuple(Case(file, describe, context, title) for title in titles)


def _cases_that_do_not_apply(
    reason: str, file: str, describe: str, context: str, *titles: str
) -> tuple[Case, ...]:
    return tuple(Case(file, describe, context, title, reason) for title in titles)


_CAPACITY = ("csi_storage_capacity.go", "CSI Mock volume storage capacity")
_ATTACH = ("csi_attach_volume.go", "CSI Mock volume attach")
_WORKLOAD = ("csi_workload.go", "CSI Mock workload info")
_FSGROUP = ("csi_fsgroup_policy.go", "CSI Mock volume fsgroup policies")
_NODE_STAGE = ("csi_node_stage_error_cases.go", "CSI Mock volume node stage")
_RECLAIM = ("csi_honor_pv_reclaim_policy.go", "CSI Mock honor pv reclaim policy")
_EXPANSION = ("csi_volume_expansion.go", "CSI Mock volume expansion")
_SNAPSHOT = ("csi_snapshot.go", "CSI Mock volume snapshot")
_HEALTH = ("csi_node_volume_health.go", "CSI Mock Node Volume Health")
_MUTABLE_LIMIT = ("mutable_csinode_allocatable.go", "MutableCSINodeAllocatableCount")
_SELINUX_FILE = "csi_selinux_mount.go"
NO_SELINUX = (
    "needs SELinux enabled on the nodes, as upstream's file says of itself: kubelet "
    "passes the context mount option only where selinux.GetEnabled() is true "
    "(pkg/volume/util/selinux.go), and the host these suites run on has no SELinux in "
    "its kernel (/sys/kernel/security/lsm lists none, no selinuxfs), on the local "
    "provider and on kind alike; a virtual machine with an SELinux kernel runs here only "
    "under emulation, 10 to 25 times slower (docs/selinux.md)"
)

CASES: tuple[Case, ...] = (
    *_cases(
        *_CAPACITY,
        "storage capacity",
        "unlimited",
        "exhausted, immediate binding",
        "exhausted, late binding, no topology",
        "exhausted, late binding, with topology",
    ),
    *_cases(
        *_CAPACITY,
        "CSIStorageCapacity",
        "CSIStorageCapacity unused",
        "CSIStorageCapacity disabled",
        "CSIStorageCapacity used, no capacity",
        "CSIStorageCapacity used, insufficient capacity",
        "CSIStorageCapacity used, have capacity",
    ),
    *_cases(
        "csi_storage_capacity_scoring.go",
        "CSI Mock volume storage capacity scoring",
        "storage capacity scoring",
        "should prefer a node with the largest available space by default",
        "should prefer a node with the maximum allocatable when configured",
        "should fail to place pod if no node meets the requested size",
        "should schedule the recreated pod to the same expected node",
    ),
    *_cases(
        *_ATTACH,
        "CSI attach test using mock driver",
        "should not require VolumeAttach for drivers without attachment",
        "should require VolumeAttach for drivers with attachment",
        # Upstream's spelling.
        "should require VolumeAttach for ephemermal volume and drivers with attachment",
        "should preserve attachment policy when no CSIDriver present",
    ),
    *_cases(
        *_ATTACH,
        "When CSIDriver AttachRequired changes from true to false",
        "should cleanup VolumeAttachment properly",
    ),
    *_cases(
        *_ATTACH,
        "CSI CSIDriver deployment after pod creation using non-attachable mock driver",
        "should bringup pod after deploying CSIDriver attach=false",
    ),
    *_cases(
        "csi_volume_limit.go",
        "CSI Mock volume limit",
        "CSI volume limit information using mock driver",
        "should report attach limit when limit is bigger than 0",
        "should report attach limit for generic ephemeral volume "
        "when persistent volume is attached",
        "should report attach limit for persistent volume "
        "when generic ephemeral volume is attached",
    ),
    *_cases(
        "csi_volume_limit_scaling.go",
        "CSI Mock VolumeLimitScaling scheduling",
        "VolumeLimitScaling scheduling",
        "blocks scheduling when driver not installed and CSIDriver opts in",
        "allows scheduling when driver not installed and CSIDriver object is not present",
        "allows scheduling when driver not installed and CSIDriver does not opt in",
    ),
    *_cases(
        *_MUTABLE_LIMIT,
        "Dynamic Allocatable Count",
        "should observe dynamic changes in CSINode allocatable count",
    ),
    *_cases(
        *_MUTABLE_LIMIT,
        "Attach Limit Exceeded",
        "should transition pod to failed state when attachment limit exceeded",
    ),
    *_cases(
        *_WORKLOAD,
        "CSI workload information using mock driver",
        "should be passed when podInfoOnMount=true",
        "contain ephemeral=true when using inline volume",
        "should not be passed when podInfoOnMount=false",
        "should not be passed when CSIDriver does not exist",
    ),
    *_cases(
        *_WORKLOAD,
        "CSI PodInfoOnMount Update",
        "should not be passed when update from true to false",
        "should be passed when update from false to true",
    ),
    *_cases(
        "csi_service_account_token.go",
        "CSI Mock volume service account token",
        "CSIServiceAccountToken",
        "token should not be plumbed down when csiServiceAccountTokenEnabled=false",
        "token should not be plumbed down when CSIDriver is not deployed",
        "token should be plumbed down when csiServiceAccountTokenEnabled=true",
        "token should be plumbed down only in secrets when serviceAccountTokenInSecrets=true",
    ),
    *_cases(
        *_FSGROUP,
        "CSI FSGroupPolicy [LinuxOnly]",
        "should modify fsGroup if fsGroupPolicy=default",
        "should modify fsGroup if fsGroupPolicy=File",
        "should not modify fsGroup if fsGroupPolicy=None",
    ),
    *_cases(
        *_FSGROUP,
        "CSI FSGroupPolicy Update [LinuxOnly]",
        "should update fsGroup if update from None to File",
        "should update fsGroup if update from None to default",
        "should not update fsGroup if update from File to None",
        "should update fsGroup if update from File to default",
        # Upstream's spelling.
        "should not update fsGroup if update from detault to None",
        "should update fsGroup if update from detault to File",
    ),
    *_cases(
        *_NODE_STAGE,
        "CSI NodeStage error cases [Slow]",
        "should call NodeUnstage after NodeStage success",
        "should retry NodeStage after NodeStage final error",
        "should retry NodeStage after NodeStage ephemeral error",
        "should call NodeUnstage after NodeStage ephemeral error",
        "should not call NodeUnstage after NodeStage final error",
    ),
    *_cases(
        *_NODE_STAGE,
        "CSI NodeUnstage error cases [Slow]",
        "should call NodeStage after NodeUnstage success",
        "two pods: should call NodeStage after previous NodeUnstage final error",
        "two pods: should call NodeStage after previous NodeUnstage transient error",
    ),
    *_cases(
        *_RECLAIM,
        "CSI honor pv reclaim policy using mock driver",
        "Dynamic provisioning should honor pv delete reclaim policy when deleting pvc",
        "Dynamic provisioning should honor pv delete reclaim policy when deleting pv then pvc",
        "Dynamic provisioning should honor pv retain reclaim policy when deleting pvc then pv",
        "Dynamic provisioning should honor pv retain reclaim policy when deleting pv then pvc",
        "Static provisioning should honor pv delete reclaim policy when deleting pvc",
        "Static provisioning should honor pv delete reclaim policy when deleting pv then pvc",
        "Static provisioning should honor pv retain reclaim policy when deleting pvc then pv",
        "Static provisioning should honor pv retain reclaim policy when deleting pv then pvc",
    ),
    *_cases(
        *_RECLAIM,
        "CSI honor pv reclaim policy changes using mock driver",
        "should honor pv reclaim policy after it is changed from retain to deleted",
        "should honor pv reclaim policy after it is changed from deleted to retain",
    ),
    *_cases(
        "csi_fsgroup_mount.go",
        "CSI Mock fsgroup as mount option",
        "Delegate FSGroup to CSI driver [LinuxOnly]",
        "should pass FSGroup to CSI driver if it is set in pod and driver supports "
        "VOLUME_MOUNT_GROUP",
        # Upstream's title: the case is the driver *without* VOLUME_MOUNT_GROUP.
        "should not pass FSGroup to CSI driver if it is set in pod and driver supports "
        "VOLUME_MOUNT_GROUP",
    ),
    *_cases(
        "csi_kubelet_restart.go",
        "CSI Mock when kubelet restart",
        "",
        "should not umount volume when the pvc is terminating but still used by a running pod",
    ),
    *_cases(
        *_EXPANSION,
        "CSI Volume expansion",
        "should expand volume without restarting pod if nodeExpansion=off",
        "should expand volume by restarting pod if attach=on, nodeExpansion=on",
        "should not have staging_path missing in node expand volume pod if attach=on, "
        "nodeExpansion=on",
        "should expand volume by restarting pod if attach=off, nodeExpansion=on",
        "should not expand volume if resizingOnDriver=off, resizingOnSC=on",
    ),
    *_cases(
        *_EXPANSION,
        "CSI online volume expansion with secret",
        "should expand volume without restarting pod if attach=on, nodeExpansion=on, "
        "csiNodeExpandSecret=on",
    ),
    *_cases(
        *_EXPANSION,
        "CSI online volume expansion",
        "should expand volume without restarting pod if attach=on, nodeExpansion=on",
        "should expand volume without restarting pod if attach=off, nodeExpansion=on",
    ),
    *_cases(
        *_EXPANSION,
        "Expansion with recovery",
        "should record target size in allocated resources",
        "should allow recovery if controller expansion fails with infeasible error",
        "should allow recovery if controller expansion fails with final error",
        "recovery should not be possible in partially expanded volumes",
        "recovery should be possible for node-only expanded volumes with infeasible error",
        "recovery should be possible for node-only expanded volumes with final error",
    ),
    *_cases(
        *_EXPANSION,
        "CSI offline volume expansion after PVC deletion",
        "should complete filesystem resize after PVC is deleted and new PVC binds to retained PV",
    ),
    *_cases(
        *_HEALTH,
        "CSI Mock Node Volume Health",
        "return normal volume stats without volume health",
        "return normal volume health",
        "return abnormal volume health",
    ),
    *_cases(
        *_HEALTH, "CSI Mock Node Storage Health", "should mark CSINode unhealthy and then healthy"
    ),
    *_cases(
        "csi_pvc_unused_condition.go",
        "CSI Mock PVC Unused Condition",
        "",
        "should set Unused=True condition when PVC has no referencing pods",
        "should set Unused=False when a running pod references the PVC",
        "should transition Unused from False to True when pod is deleted",
        "should transition Unused from True to False when new pod starts",
        "should show Unused=True when only terminated pods reference the PVC",
        "should show Unused=False for pending unscheduled pod",
        "should track Unused correctly with multiple pods",
    ),
    *_cases(
        *_SNAPSHOT,
        "CSI Volume Snapshots",
        "volumesnapshotcontent and pvc in Bound state with deletion timestamp set should "
        "not get deleted while snapshot finalizer exists",
    ),
    *_cases(
        *_SNAPSHOT,
        "CSI Volume Snapshots secrets",
        "volume snapshot create/delete with secrets",
    ),
    *_cases(
        *_SNAPSHOT,
        "CSI Snapshot Controller metrics",
        "snapshot controller should emit dynamic CreateSnapshot, CreateSnapshotAndReady, "
        "and DeleteSnapshot metrics",
        "snapshot controller should emit pre-provisioned CreateSnapshot, "
        "CreateSnapshotAndReady, and DeleteSnapshot metrics",
    ),
    *_cases_that_do_not_apply(
        NO_SELINUX,
        _SELINUX_FILE,
        "CSI Mock selinux on mount",
        "SELinuxMount [LinuxOnly]",
        "should pass SELinux mount option for RWOP volume and Pod with SELinux context set",
        "should add SELinux mount option to existing mount options",
        "should not pass SELinux mount option for RWO volume with SELinuxMount disabled",
        "should not pass SELinux mount option for RWO volume with only SELinuxChangePolicy enabled",
        "should pass SELinux mount option for RWO volume with SELinuxMount enabled and nil policy",
        "should pass SELinux mount option for RWO volume with SELinuxMount enabled and "
        "MountOption policy",
        "should not pass SELinux mount option for RWO volume with SELinuxMount disabled and "
        "Recursive policy",
        "should not pass SELinux mount option for Pod without SELinux context",
        "should not pass SELinux mount option for CSI driver that does not support SELinux mount",
        "should not unstage RWOP volume when starting a second pod with the same SELinux context",
        "should unstage RWOP volume when starting a second pod with different SELinux context",
        "should not unstage RWO volume when starting a second pod with the same SELinux context",
        "should unstage RWO volume when starting a second pod with different SELinux context",
        "should unstage RWO volume when starting a second pod with different policy "
        "(MountOption -> Recursive)",
        "should unstage RWO volume when starting a second pod with different policy "
        "(Recursive -> MountOption)",
    ),
    *_cases(
        _SELINUX_FILE,
        "CSI Mock selinux on mount metrics and SELinuxWarningController",
        "SELinuxMount metrics [LinuxOnly]",
        "warning is not bumped on two Pods with the same context on RWO volume",
        "warning is bumped on two Pods with a different context on RWO volume",
        "warning is bumped on two Pods with different policies on RWO volume",
        "warning is not bumped on two Pods with Recursive policy and a different context on "
        "RWO volume",
        "error is not bumped on two Pods with the same context on RWO volume and SELinuxMount "
        "enabled",
        "error is bumped on two Pods with a different context on RWO volume and SELinuxMount "
        "enabled",
        "error is bumped on two Pods with a different policy on RWO volume and SELinuxMount "
        "enabled (nil + Recursive)",
        "error is bumped on two Pods with a different policy on RWO volume and SELinuxMount "
        "enabled (Recursive + nil)",
        "error is bumped on two Pods with a different policy on RWO volume and SELinuxMount "
        "enabled (Recursive + MountOption)",
        "error is bumped on two Pods with a different context on RWX volume and SELinuxMount "
        "enabled",
        "error is not bumped on two Pods with Recursive policy and a different context on RWX "
        "volume",
        "error is not bumped on two Pods with the same policy RWX volume (nil + MountOption)",
        "error is not bumped on two Pods with the same policy RWX volume "
        "(MountOption + MountOption)",
        "error is bumped on two Pods with a different context on RWOP volume",
        "error is bumped on two Pods with MountOption policy and a different context on RWOP "
        "volume",
        "error is not bumped on two privileged Pods with mount policy RWO volume",
        "error is not bumped on two privileged Pods with recursive policy RWO volume",
        "error is not bumped on a privileged and unprivileged Pod with given SELinux context "
        "and recursive policy",
        "error is bumped on a privileged and unprivileged Pod with given SELinux with "
        "MountOption policy",
        "error is bumped on an unprivileged and privileged Pod with given SELinux with "
        "MountOption policy",
        "error is not bumped on a finished Pod with a different context on RWO volume and "
        "SELinuxMount enabled",
        "error is not bumped on a failed Pod with a different context on RWO volume and "
        "SELinuxMount enabled",
        "warning is not bumped on RWO volume with CSIDriver.SELinuxMount disabled and "
        "mismatched labels",
        "warning is not bumped on RWX volume with CSIDriver.SELinuxMount disabled and "
        "mismatched labels",
        "warning is not bumped on RWO volume with CSIDriver.SELinuxMount disabled and "
        "mismatched policies",
        "warning is not bumped on RWX volume with CSIDriver.SELinuxMount disabled and "
        "mismatched policies",
    ),
)


@dataclass(frozen=True)
class Mark:
    """One ``@pytest.mark.upstream`` of a collected test."""

    test: str
    """``<module>.py::<name>[<parameters>]``, relative to the tests directory."""
    file: str
    title: str
    missing: str | None = None


@dataclass
class Collection:
    """What collecting the tests found."""

    marks: list[Mark] = field(default_factory=list)
    tests: set[str] = field(default_factory=set)
    """Every collected test's id (as in ``Mark.test``)."""
    malformed: list[str] = field(default_factory=list)
    """A message for each marker whose arguments are not (file, title[, missing=])."""


class CollectionFailed(Exception):
    """pytest could not collect the tests (an import error, say): its output."""


class _Collector:
    """pytest plugin: records the markers of the collected items."""

    def __init__(self, test_dir: Path) -> None:
        self.test_dir = test_dir
        self.found = Collection()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            _, _, rest = item.nodeid.partition("::")
            test = f"{item.path.relative_to(self.test_dir).as_posix()}::{rest}"
            self.found.tests.add(test)
            for marker in item.iter_markers(MARKER):
                mark = _mark_of(test, marker)
                if isinstance(mark, str):
                    self.found.malformed.append(mark)
                else:
                    self.found.marks.append(mark)


def _mark_of(test: str, marker: pytest.Mark) -> Mark | str:
    """The marker as a Mark, or a message saying what is wrong with it."""
    args, kwargs = marker.args, dict(marker.kwargs)
    missing = kwargs.pop("missing", None)
    if (
        len(args) != 2
        or not all(isinstance(a, str) and a.strip() for a in args)
        or kwargs
        or not (missing is None or (isinstance(missing, str) and missing.strip()))
    ):
        return (
            f"{test}: @pytest.mark.{MARKER} takes (file, title) and optionally missing=, "
            f"all non-empty strings; got args={args!r} kwargs={dict(marker.kwargs)!r}"
        )
    return Mark(test, args[0], args[1], missing)


def collect(test_dir: Path = TESTS) -> Collection:
    """The upstream markers of every test under ``test_dir``, by collecting it with
    pytest (in this process; nothing runs)."""
    collector = _Collector(test_dir)
    output = io.StringIO()
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", str(test_dir)]
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        status = pytest.main(args, plugins=[collector])
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise CollectionFailed(
            f"pytest {' '.join(args)} exited {int(status)}:\n{output.getvalue()}"
        )
    return collector.found


# -- the table -------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


@dataclass(frozen=True, order=True)
class _Ran:
    """How a case's tests ended on one provider: the best of them (lowest ``rank``)."""

    rank: int
    text: str


_PASSED_ON_REAL_KUBELETS = 0
_PARTLY_BECAUSE = {
    1: "its pods were placed on simulated nodes, which never run them: the test stops at "
    "scheduling where upstream runs the pod",
    2: "where its pods ran is not recorded (only kind's nodes are all real kubelets)",
    3: "no test of it passed in the run",
}
_NOT_RUN = _Ran(5, "not run")


def _ran(outcome: Outcome | None, provider: str) -> _Ran:
    if outcome is None:
        return _NOT_RUN
    if outcome.result == "failed":
        return _Ran(3, "failed")
    if outcome.result == "skipped":
        return _Ran(4, f"skipped ({outcome.detail})" if outcome.detail else "skipped")
    real = outcome.on_real_kubelets(provider)
    if real is None:
        return _Ran(2, "passed, where its pods ran not recorded")
    if not real:
        n = outcome.pods_on_simulated_nodes
        return _Ran(1, f"passed, {n} pod{'s' * (n != 1)} placed on simulated nodes")
    return _Ran(_PASSED_ON_REAL_KUBELETS, "passed")


@dataclass(frozen=True)
class Row:
    """A case's cells, and the providers where it is covered."""

    coverage: str
    where: str
    tests: str
    covered_on: tuple[str, ...] = ()


def case_row(case: Case, marks: Sequence[Mark], record: RunRecord) -> Row:
    """The case's row: covered only where a test of it without ``missing`` passed with
    every pod it placed on a node with a real kubelet."""
    if case.not_applicable is not None:
        return Row(f"does not apply: {_cell(case.not_applicable)}", "—", "—")
    if not marks:
        return Row("**not covered**", "—", "—")
    full = [m for m in marks if m.missing is None]
    # Where it ran: of its full tests when it has any (a partial one's pass covers less).
    counted = full or marks
    best = {
        provider: min(_ran(found.get(m.test), provider) for m in counted)
        for provider, found in record.outcomes.items()
    }
    covered_on = tuple(
        p for p, ran in best.items() if full and ran.rank == _PASSED_ON_REAL_KUBELETS
    )
    if covered_on:
        coverage = "covered"
    elif not full:
        coverage = "partly: its tests check part of it (what is missing: under tests)"
    else:
        rank = min((ran.rank for ran in best.values()), default=_NOT_RUN.rank)
        coverage = f"partly: {_PARTLY_BECAUSE[min(rank, 3)]}"
    where = "<br>".join(f"{p}: {_cell(ran.text)}" for p, ran in best.items()) or "—"
    tests = [
        f"`{m.test}`" + ("" if m.missing is None else f" (missing: {_cell(m.missing)})")
        for m in sorted(marks, key=lambda m: (m.missing is not None, m.test))
    ]
    return Row(coverage, where, "<br>".join(tests), covered_on)


def rows(cases: Sequence[Case], marks: Iterable[Mark], record: RunRecord) -> dict[Case, Row]:
    by_case: dict[tuple[str, str], list[Mark]] = {}
    for mark in marks:
        by_case.setdefault((mark.file, mark.title), []).append(mark)
    return {
        case: case_row(case, by_case.get((case.file, case.title), []), record) for case in cases
    }


def render(cases: Sequence[Case], marks: Iterable[Mark], record: RunRecord) -> str:
    """The text of docs/upstream-coverage.md."""
    table = rows(cases, marks, record)
    counts = {
        label: sum(1 for row in table.values() if row.coverage.startswith(prefix))
        for label, prefix in (
            ("covered", "covered"),
            ("partly covered", "partly"),
            ("not covered", "**not covered"),
            ("do not apply", "does not apply"),
        )
    }
    summary = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
    by_provider = ", ".join(
        f"{provider} {sum(1 for row in table.values() if provider in row.covered_on)}"
        for provider in record.outcomes
    )
    run_file = RUN.relative_to(ROOT).as_posix()
    lines = [
        "# Upstream coverage",
        "",
        "<!-- Generated by scripts/upstream_coverage.py from the @pytest.mark.upstream "
        f"markers of tests/e2e and the run recorded in {run_file}: do not edit. -->",
        "",
        f"Kubernetes' own end-to-end tests of these features run its Go mock driver "
        f"(`{UPSTREAM_DIR}`). Each of their cases is listed here, as upstream names it, "
        "with the tests in `tests/e2e` that check what it checks. A test says so with "
        '`@pytest.mark.upstream("<file>", "<case title>")`, and with '
        '`missing="..."` when it checks only part of the case.',
        "",
        f"Made from {record.run}; recorded in `{run_file}`.",
        "",
        "**Where it ran** gives, for each part of that run (a provider), the best outcome "
        "there of the case's tests (of those without `missing=`, when it has any): "
        "passed; passed with pods placed on simulated nodes (the local provider's, which "
        "never start a pod, so the test stopped at scheduling where upstream runs the "
        "pod); passed, where its pods ran not recorded (a report from before the harness "
        "recorded `pods_on_simulated_nodes`; kind has only real kubelets); failed; "
        "skipped, with pytest's reason; or not run. A case is **covered** only when a "
        "test of it without `missing=` passed on some provider with every pod it placed "
        "on a node with a real kubelet; otherwise it is **partly**, with the reason.",
        "",
        "**The check.** `make lint` runs `python scripts/upstream_coverage.py --check`, "
        "which fails when this file is not what the markers and the recorded run give, "
        "when a marker names a case that is not listed, or when a listed test no longer "
        "exists. After its pytest parts, `make test` runs it again with "
        "`--junit local=reports/junit.xml --junit kind=reports/kind/junit.xml`: it fails "
        "when a case this file says is covered is not covered in that run (no test of it "
        "passed there with its pods on real kubelets). Any other difference (the run "
        "covers a case this file says is partly; a test skipped on one machine for a "
        "feature its cluster lacks and passed on another) is printed, not failed on, so "
        "CI stays stable; regenerate from a CI run to record it.",
        "",
        "Regenerate after `make test` with `python scripts/upstream_coverage.py --junit "
        'local=reports/junit.xml --junit kind=reports/kind/junit.xml --run "<which '
        'run>"`, which rewrites the record too; without `--junit` it keeps the recorded '
        "run (a new or renamed test shows as not run).",
        "",
        f"{len(cases)} cases: {summary}. Covered, by provider: {by_provider}.",
    ]
    for file, describe in dict.fromkeys((case.file, case.describe) for case in cases):
        lines += [
            "",
            f"## {file}: {describe}",
            "",
            "| context | case | coverage | where it ran | tests |",
            "| --- | --- | --- | --- | --- |",
        ]
        for case in (c for c in cases if (c.file, c.describe) == (file, describe)):
            row = table[case]
            context = _cell(case.context) or "—"
            lines.append(
                f"| {context} | {_cell(case.title)} | {row.coverage} | {row.where} | {row.tests} |"
            )
    return "\n".join(lines) + "\n"


# -- the check ---------------------------------------------------------------------------

_LISTED_TEST = re.compile(r"`([\w/.-]+\.py::[^`]+)`")


def listed_tests(text: str) -> list[str]:
    """The test ids a coverage table names."""
    return list(dict.fromkeys(_LISTED_TEST.findall(text)))


def marker_problems(cases: Sequence[Case], found: Collection) -> list[str]:
    """Markers that are malformed, name no case of ``cases``, or cover one that does
    not apply."""
    known = {(case.file, case.title): case for case in cases}
    found_problems = list(found.malformed)
    for mark in found.marks:
        case = known.get((mark.file, mark.title))
        if case is None:
            found_problems.append(
                f"{mark.test}: @pytest.mark.{MARKER}({mark.file!r}, {mark.title!r}) names no "
                "upstream case (scripts/upstream_coverage.py CASES)"
            )
        elif case.not_applicable is not None:
            found_problems.append(
                f"{mark.test}: covers {mark.file} {mark.title!r}, which CASES says does not "
                f"apply ({case.not_applicable})"
            )
    return found_problems


def problems(
    cases: Sequence[Case], found: Collection, checked_in: str | None, record: RunRecord | None
) -> list[str]:
    """What is wrong with the markers and with the checked-in table (``checked_in``:
    its text, None if there is none) made from the recorded run (``record``: None if
    there is none). Empty when all is well."""
    found_problems = marker_problems(cases, found)
    table = TABLE.relative_to(ROOT).as_posix()
    missing = [
        f"{path} does not exist: {REGENERATE_HINT}"
        for path, text in ((table, checked_in), (RUN.relative_to(ROOT).as_posix(), record))
        if text is None
    ]
    if checked_in is None or record is None:
        return [*found_problems, *missing]
    found_problems += [
        f"{table} lists {test}, which no longer exists"
        for test in listed_tests(checked_in)
        if test not in found.tests
    ]
    fresh = render(cases, found.marks, record)
    if fresh != checked_in:
        diff = difflib.unified_diff(
            checked_in.splitlines(),
            fresh.splitlines(),
            f"{table} (checked in)",
            f"{table} (from the markers and the recorded run)",
            n=0,
            lineterm="",
        )
        found_problems.append(f"{table} is stale: {REGENERATE_HINT}\n" + "\n".join(diff))
    return found_problems


def run_disagreements(
    cases: Sequence[Case], marks: Sequence[Mark], recorded: RunRecord, run: RunRecord
) -> tuple[list[str], list[str]]:
    """(failures, notes) of comparing the table made from ``recorded`` with the one
    ``run`` gives: a failure for each case the table says is covered that the run does
    not cover; a note for each other case whose row would change."""
    committed, now = rows(cases, marks, recorded), rows(cases, marks, run)
    failures, notes = [], []
    for case in cases:
        was, is_ = committed[case], now[case]
        name = f"{case.file} {case.title!r}"
        if was.coverage == "covered" and is_.coverage != "covered":
            failures.append(
                f"{name}: the table says covered ({', '.join(was.covered_on)}), but in this "
                f"run {is_.coverage.removeprefix('partly: ')}: " + is_.where.replace("<br>", "; ")
            )
        elif (was.coverage, was.where) != (is_.coverage, is_.where):
            notes.append(
                f"{name}: {was.coverage} ({was.where.replace('<br>', '; ')}) in the table, "
                f"{is_.coverage} ({is_.where.replace('<br>', '; ')}) in this run"
            )
    return failures, notes


def _provider_report(text: str) -> tuple[str, Path]:
    provider, sep, path = text.partition("=")
    if not (sep and provider and path):
        raise argparse.ArgumentTypeError(f"expected PROVIDER=PATH, got {text!r}")
    return provider, Path(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/upstream-coverage.md.")
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the table is stale or a marker or listed test is "
        "wrong, or (with --junit) if the run does not cover a case the table says is covered",
    )
    parser.add_argument(
        "--junit",
        metavar="PROVIDER=PATH",
        type=_provider_report,
        action="append",
        default=[],
        help="a JUnit XML report of the run's part on PROVIDER (local, kind, ...); repeat "
        "for each part. Without it the recorded run is used",
    )
    parser.add_argument("--run", help="which run the reports are of, for the table's header")
    args = parser.parse_args(argv)
    reports: dict[str, Path] = dict(args.junit)
    try:
        found = collect()
    except CollectionFailed as failed:
        print(f"upstream_coverage: error: {failed}", file=sys.stderr)
        return 2
    table = TABLE.relative_to(ROOT).as_posix()
    recorded = RunRecord.loads(RUN.read_text(encoding="utf-8")) if RUN.is_file() else None
    marked = [mark.test for mark in found.marks]
    run = (
        record_of(reports, marked, TESTS.relative_to(ROOT).as_posix(), args.run)
        if reports
        else None
    )
    if args.check:
        checked_in = TABLE.read_text(encoding="utf-8") if TABLE.is_file() else None
        found_problems = problems(CASES, found, checked_in, recorded)
        if run is not None and recorded is not None:
            failures, notes = run_disagreements(CASES, found.marks, recorded, run)
            for note in notes:
                print(f"upstream_coverage: note: {note}")
            found_problems += failures
        for problem in found_problems:
            print(f"upstream_coverage: {problem}", file=sys.stderr)
        if found_problems:
            return 1
        against = " and with this run" if run is not None else ""
        print(f"upstream_coverage: {table} agrees with the markers{against}")
        return 0
    # A marker naming no case would silently drop out of the table: refuse to write.
    bad = marker_problems(CASES, found)
    for problem in bad:
        print(f"upstream_coverage: {problem}", file=sys.stderr)
    if bad:
        return 1
    record = run or recorded
    if record is None:
        print(
            f"upstream_coverage: error: no run recorded in {RUN.relative_to(ROOT)}: "
            "give the run's reports with --junit",
            file=sys.stderr,
        )
        return 2
    record = record.restricted_to(marked)
    RUN.write_text(record.dumps(), encoding="utf-8", newline="\n")
    TABLE.write_text(render(CASES, found.marks, record), encoding="utf-8", newline="\n")
    print(f"upstream_coverage: wrote {table} and {RUN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
