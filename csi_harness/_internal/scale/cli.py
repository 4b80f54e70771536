"""``csi-harness scale ...``: arguments to a Setup, runs, reports.

A stuck run is a result, not a failure: the command exits 0 when every run was
measured and its report written, 1 when a cluster could not be brought up, 2 on
bad arguments (naming the option).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from csi_harness._internal.deploy.spec import ProvisionerMode
from csi_harness._internal.providers.local.config import MAX_SIMULATED_NODES
from csi_harness._internal.scale.cluster_size import markdown_table as size_table
from csi_harness._internal.scale.cluster_size import measure
from csi_harness._internal.scale.comparisons import (
    COMPARISONS,
    Comparison,
    run_comparison,
    with_baseline,
)
from csi_harness._internal.scale.experiment import Setup
from csi_harness._internal.scale.report import RESULTS, load_results, write_report
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.run_statistics import Spread, summaries
from csi_harness._internal.scale.workload import SizeRange, WorkloadError, WorkloadKind
from csi_mock.model.quantity import QuantityError, parse_quantity


class ScaleUsageError(Exception):
    pass


def _progress(message: str) -> None:
    print(f"csi-harness: {message}", file=sys.stderr, flush=True)


def on_real_nodes(args: argparse.Namespace) -> bool:
    """Whether the runs go to kind or an existing cluster instead of simulated nodes."""
    return args.provider == "kind" or args.kubeconfig is not None


def setup_of(args: argparse.Namespace) -> Setup:
    real = on_real_nodes(args)
    if args.provider == "kind" and args.kubeconfig is not None:
        raise ScaleUsageError("--kubeconfig: an existing cluster is not a kind one (--provider)")
    if real:
        for option, given in (
            ("--nodes", args.nodes is not None),
            ("--busy-nodes", args.busy_nodes != 0),
            ("--random-tie-break", args.random_tie_break),
        ):
            if given:
                raise ScaleUsageError(
                    f"{option}: only on the local provider's simulated nodes (a kind or "
                    "existing cluster runs on every node csi-mock runs on, with the other "
                    "pods it has, and its kube-scheduler cannot reach an extender on this "
                    "host's loopback)"
                )
    if not real:
        for option in ("images", "driver_image", "registry_mirror"):
            value = getattr(args, option, None)
            if value is not None and not (option == "images" and value == "built"):
                raise ScaleUsageError(
                    f"--{option.replace('_', '-')}: only for a kind or existing cluster (the "
                    "local provider runs csi-mock and its sidecars as processes)"
                )
    nodes = 50 if args.nodes is None else args.nodes
    if not 1 <= nodes <= MAX_SIMULATED_NODES:
        raise ScaleUsageError(f"--nodes: {nodes} is not in 1..{MAX_SIMULATED_NODES}")
    if args.pods < 1:
        raise ScaleUsageError(f"--pods: {args.pods} is not a positive number")
    for option, value in (("--deadline", args.deadline), ("--stall", args.stall)):
        if value <= 0:
            raise ScaleUsageError(f"{option}: {value} is not a positive number of seconds")
    try:
        pool = parse_quantity(args.pool)
    except QuantityError as exc:
        raise ScaleUsageError(f"--pool: {exc}") from exc
    if pool <= 0:
        raise ScaleUsageError(f"--pool: {args.pool!r} must be positive")
    try:
        sizes = SizeRange.parse(args.size)
    except WorkloadError as exc:
        raise ScaleUsageError(str(exc)) from exc
    if sizes.high > pool:
        raise ScaleUsageError(f"--size: {args.size!r} does not fit a pool of {args.pool}")
    if args.provisioner_qps < 0:
        raise ScaleUsageError(f"--provisioner-qps: {args.provisioner_qps} is negative")
    if args.create_qps < 0:
        raise ScaleUsageError(f"--create-qps: {args.create_qps} is negative")
    if args.runs < 1:
        raise ScaleUsageError(f"--runs: {args.runs} is not a positive number")
    if not 0 <= args.busy_nodes <= nodes:
        raise ScaleUsageError(f"--busy-nodes: {args.busy_nodes} is not in 0..{nodes}")
    return Setup(
        provisioner_api_qps=args.provisioner_qps or None,
        provisioning=ProvisionerMode(args.provisioning),
        workload=WorkloadKind(args.workload),
        create_qps=args.create_qps or None,
        runs=args.runs,
        busy_nodes=args.busy_nodes,
        random_tie_break=args.random_tie_break,
        scheduler_gates=parse_gates(args.scheduler_gates),
        nodes=nodes,
        until_running=real,
        pool=args.pool,
        pods=args.pods,
        sizes=sizes,
        seed=args.seed,
        deadline=args.deadline,
        stall_seconds=args.stall,
    )


def parse_gates(text: str) -> dict[str, bool]:
    """``NAME=true|false,...`` (kube-scheduler's --feature-gates syntax)."""
    gates: dict[str, bool] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name.strip()):
            raise ScaleUsageError(f"--scheduler-gates: {item!r} is not NAME=true|false")
        if value.strip().lower() not in ("true", "false"):
            raise ScaleUsageError(f"--scheduler-gates: {name}={value!r} is not true or false")
        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def check_gates(comparison: Comparison, setup: Setup) -> None:
    """A gate the comparison's variants set themselves is what it compares: refused."""
    varied = {gate for v in comparison.variants for gate in v.scheduler_gates}
    clash = sorted(varied & setup.scheduler_gates.keys())
    if clash:
        raise ScaleUsageError(
            f"--scheduler-gates: {', '.join(clash)} is set by the variants of {comparison.name}"
        )


def selected(comparison: Comparison, names: str | None) -> Comparison:
    if not names:
        return comparison
    wanted = [n for n in names.split(",") if n]
    known = {v.name: v for v in comparison.variants}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ScaleUsageError(
            f"--variants: {', '.join(unknown)} not among {', '.join(known)} of {comparison.name}"
        )
    return Comparison(comparison.name, comparison.title, tuple(known[n] for n in wanted))


def run(args: argparse.Namespace, command: str) -> int:
    if args.experiment == "nodes":
        return _run_nodes(args)
    if args.experiment == "report":
        results = Path(args.report_dir) / RESULTS
        if not results.is_file():
            raise ScaleUsageError(f"{args.report_dir}: no {RESULTS} there")
        _progress(f"report: {write_report(results.parent, *load_results(results))}")
        return 0
    comparison = selected(COMPARISONS[args.experiment], args.variants)
    if args.baseline:
        comparison = with_baseline(comparison)
    setup = setup_of(args)
    check_gates(comparison, setup)
    directory = Path(args.report_dir or f"reports/scale/{comparison.name}").resolve()
    done: list[RunResult] = []

    def keep(result: RunResult) -> None:
        # Written after every run, so an interrupted comparison keeps what it measured.
        done.append(result)
        write_report(directory, comparison.title, command, done)

    if on_real_nodes(args):
        _run_on_real_nodes(args, comparison, setup, keep)
    else:
        run_comparison(comparison, setup, _progress, keep)
    report = write_report(directory, comparison.title, command, done)
    for r in done:
        spread = Spread.of(r)
        outcome = (
            f"all placed in {r.all_placed_after:.1f}s"
            if r.completed and r.all_placed_after is not None
            else f"STUCK with {r.claims_left} unbound, {r.pods_left} not placed"
        )
        _progress(
            f"{r.title} (run {r.run}): {outcome}; CreateVolume {r.create_volume_calls}, "
            f"RESOURCE_EXHAUSTED {r.resource_exhausted}, reschedules {r.reschedules}; "
            f"utilisation {spread.minimum:.0%}..{spread.maximum:.0%} "
            f"(stddev {spread.stddev:.3f})"
        )
    for v in summaries(done):
        placed = "-" if v.placed is None else v.placed.text(" s")
        ratio = "" if v.ratio is None else f" ({v.ratio:.2f} x baseline)"
        _progress(f"{v.title}: {v.completed} of {v.runs} runs complete; placed in {placed}{ratio}")
    _progress(f"report: {report}")
    return 0


def _run_on_real_nodes(
    args: argparse.Namespace,
    comparison: Comparison,
    setup: Setup,
    keep: Callable[[RunResult], None],
) -> None:
    """Every run on one kind cluster (brought up, or adopted with ``--keep``) or on
    the existing cluster of ``--kubeconfig``, csi-mock deployed into it per run."""
    # Imported here: the local runs need neither kind nor the in-cluster deployment.
    from csi_harness._internal.providers.factory import (
        ClusterOptionError,
        ClusterOptions,
        open_provider,
    )
    from csi_harness._internal.scale.on_cluster import ClusterRuns

    kubeconfig = Path(args.kubeconfig).resolve() if args.kubeconfig is not None else None
    if kubeconfig is not None:
        configured = [v.name for v in comparison.variants if v.scheduler]
        if configured:
            raise ScaleUsageError(
                f"--kubeconfig: {', '.join(configured)} needs a kube-scheduler configuration "
                "of its own, which the harness gives only to clusters it made; leave it out "
                "with --variants"
            )
    kind = "existing" if kubeconfig is not None else "kind"
    try:
        provider = open_provider(
            ClusterOptions(
                provider=kind,
                name=args.name if kubeconfig is None else None,
                kubeconfig=kubeconfig,
                keep=args.keep,
                images=args.images,
                driver_image=args.driver_image,
                registry_mirror=args.registry_mirror,
            ),
            progress=_progress,
        )
    except ClusterOptionError as exc:
        raise ScaleUsageError(f"--{exc.option.replace('_', '-')}: {exc.message}") from exc
    with provider as cluster:
        runs = ClusterRuns(cluster, kind)
        setup = replace(setup, nodes=len(cluster.nodes()))
        try:
            run_comparison(comparison, setup, _progress, keep, run_one=runs.run_variant)
        finally:
            if provider.keep:  # a cluster left running gets its scheduler back
                runs.restore()


def _run_nodes(args: argparse.Namespace) -> int:
    try:
        counts = [int(c) for c in args.counts.split(",") if c]
    except ValueError:
        raise ScaleUsageError(f"--counts: {args.counts!r} is not N,N,...") from None
    bad = [c for c in counts if not 1 <= c <= MAX_SIMULATED_NODES]
    if not counts or bad:
        raise ScaleUsageError(f"--counts: each count must be in 1..{MAX_SIMULATED_NODES}")
    directory = Path(args.report_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    results = []
    for count in counts:
        result = measure(count, _progress)
        results.append(result)
        (directory / "results.json").write_text(
            json.dumps([r.to_json() for r in results], indent=1) + "\n"
        )
        (directory / "report.md").write_text(size_table(results) + "\n")
        _progress(
            f"{count} nodes: "
            + (
                f"ready in {result.bring_up_seconds:.1f}s, {result.pss_mib / 1024:.2f} GiB"
                if result.ready
                else result.error
            )
        )
    print(size_table(results))
    return 0 if all(r.ready for r in results) else 1
