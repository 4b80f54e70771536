"""``csi-harness scale``: bad arguments are refused with the option named, exit 2,
before any cluster is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal import cli
from csi_harness._internal.cli.parser import build_parser
from csi_harness._internal.deploy.spec import ProvisionerMode
from csi_harness._internal.scale import cli as scale_cli
from csi_harness._internal.scale import comparisons
from csi_harness._internal.scale.experiment import Setup, Variant
from csi_harness._internal.scale.workload import SizeRange, WorkloadKind


@pytest.fixture(autouse=True)
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("went past argument validation")

    monkeypatch.setattr(scale_cli, "run_comparison", refuse)
    monkeypatch.setattr(scale_cli, "measure", refuse)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "--nodes: 0 is not in 1..1000"),
        (["--nodes", "1001"], "--nodes: 1001"),
        (["--pods", "0"], "--pods: 0 is not a positive number"),
        (["--pool", "ten"], "--pool: 'ten' is not a quantity"),
        (["--size", "2Gi-1Gi"], "--size: '2Gi-1Gi': the upper bound is below"),
        (["--size", "20Gi"], "--size: '20Gi' does not fit a pool of 10Gi"),
        (["--variants", "tracking,bogus"], "--variants: bogus not among tracking, no-tracking"),
        (["--runs", "0"], "--runs: 0 is not a positive number"),
        (["--create-qps", "-1"], "--create-qps: -1.0 is negative"),
        (["--provider", "kind", "--nodes", "3"], "--nodes: only on the local provider"),
        (["--provider", "kind", "--busy-nodes", "1"], "--busy-nodes: only on the local"),
        (["--kubeconfig", "k", "--random-tie-break"], "--random-tie-break: only on the local"),
        (["--provider", "kind", "--kubeconfig", "k"], "--kubeconfig: an existing cluster is not"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig: no such file"),
    ],
)
def test_bad_arguments_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["scale", "kep1472", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--deadline", "--stall"])
def test_a_time_option_that_is_not_a_positive_duration_exits_2_naming_it(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["scale", "kep1472", option, "0s"])
    assert exited.value.code == 2
    assert f"argument {option}: '0s' is not a positive duration" in capsys.readouterr().err


def test_bad_node_counts_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["scale", "nodes", "--counts", "10,x"]) == 2
    assert "--counts" in capsys.readouterr().err
    assert cli.main(["scale", "nodes", "--counts", "0"]) == 2


def test_variants_select_a_subset_in_the_given_order() -> None:
    picked = scale_cli.selected(comparisons.SCORING, "scoring-inverted,scoring-off")
    assert [v.name for v in picked.variants] == ["scoring-inverted", "scoring-off"]


def test_both_kep1472_runs_keep_scoring_off_and_differ_only_in_tracking() -> None:
    tracking, no_tracking = comparisons.KEP1472.variants
    assert (
        tracking.scheduler_gates == no_tracking.scheduler_gates == {"StorageCapacityScoring": False}
    )
    assert (tracking.storage_capacity, no_tracking.storage_capacity) == (True, False)
    assert tracking.scheduler == no_tracking.scheduler == {}


def test_a_report_is_made_again_only_from_a_directory_with_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["scale", "report", str(tmp_path)]) == 2
    assert "no results.json there" in capsys.readouterr().err


def test_the_author_setup_is_read_into_the_setup() -> None:
    argv = ["--provisioning", "distributed", "--workload", "deployments", "--create-qps", "10"]
    args = build_parser().parse_args(["scale", "kep1472", *argv, "--runs", "3"])
    setup = scale_cli.setup_of(args)
    assert setup.provisioning is ProvisionerMode.DISTRIBUTED
    assert setup.workload is WorkloadKind.DEPLOYMENTS
    assert (setup.create_qps, setup.runs) == (10.0, 3)


def test_by_default_a_run_is_central_with_bare_pods_as_fast_as_possible_once() -> None:
    setup = scale_cli.setup_of(build_parser().parse_args(["scale", "kep1472"]))
    assert setup.provisioning is ProvisionerMode.CENTRAL
    assert setup.workload is WorkloadKind.PODS
    assert (setup.create_qps, setup.runs) == (None, 1)


def test_the_baseline_runs_first_without_volumes_and_is_added_once() -> None:
    picked = comparisons.with_baseline(comparisons.KEP1472)
    assert [v.name for v in picked.variants] == ["baseline", "tracking", "no-tracking"]
    assert not picked.variants[0].volumes and all(v.volumes for v in picked.variants[1:])
    assert comparisons.with_baseline(picked) == picked


def test_runs_go_round_by_round_over_the_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []

    def run_variant(setup: Setup, variant: Variant, progress: object, *, run: int) -> str:
        calls.append((variant.name, run))
        return variant.name

    monkeypatch.setattr(comparisons, "run_variant", run_variant)
    setup = Setup(nodes=1, pool="1Gi", pods=1, sizes=SizeRange.parse("1Gi"), seed=1, runs=2)
    comparisons.run_comparison(comparisons.KEP1472, setup)
    assert calls == [("tracking", 1), ("no-tracking", 1), ("tracking", 2), ("no-tracking", 2)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--busy-nodes", "51"], "--busy-nodes: 51 is not in 0..50"),
        (["--busy-nodes", "-1"], "--busy-nodes: -1 is not in 0..50"),
        (["--scheduler-gates", "OpportunisticBatching"], "is not true or false"),
        (["--scheduler-gates", "Foo=yes"], "--scheduler-gates: Foo='yes' is not true or false"),
        (["--scheduler-gates", "=true"], "--scheduler-gates: '=true' is not NAME=true|false"),
        (
            ["--scheduler-gates", "StorageCapacityScoring=true"],
            "--scheduler-gates: StorageCapacityScoring is set by the variants of kep1472",
        ),
    ],
)
def test_bad_busy_nodes_and_gates_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["scale", "kep1472", *argv]) == 2
    assert message in capsys.readouterr().err


def test_gates_and_busy_nodes_are_read_into_the_setup() -> None:
    gates = "A=true, NominatedNodeNameForExpectation=False"
    argv = ["--busy-nodes", "5", "--scheduler-gates", gates]
    setup = scale_cli.setup_of(build_parser().parse_args(["scale", "kep1472", *argv]))
    assert setup.busy_nodes == 5
    assert setup.scheduler_gates == {"A": True, "NominatedNodeNameForExpectation": False}


def test_an_existing_cluster_refuses_a_variant_that_needs_its_own_scheduler_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    argv = ["scale", "scoring", "--kubeconfig", str(kubeconfig)]
    assert cli.main(argv) == 2
    assert "--kubeconfig: scoring-inverted needs a kube-scheduler configuration" in (
        capsys.readouterr().err
    )


def test_on_kind_the_runs_follow_every_pod_until_it_runs_on_whatever_nodes_there_are() -> None:
    args = build_parser().parse_args(["scale", "kep1472", "--provider", "kind"])
    setup = scale_cli.setup_of(args)
    assert setup.until_running
    local = scale_cli.setup_of(build_parser().parse_args(["scale", "kep1472"]))
    assert (local.nodes, local.until_running) == (50, False)
