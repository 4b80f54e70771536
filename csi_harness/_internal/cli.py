"""``csi-harness``: bring clusters up and down.

csi-harness cluster up [--simulated-nodes N] [--zones a,b] [--feature-gates G=true,...]
                       [--scheduler-config FILE] [--config FILE] [--name NAME]
csi-harness cluster status [--json]
csi-harness cluster down
csi-harness cluster up --provider kind [--name NAME] [--kind-config FILE]
                       [--node-image IMAGE] [--reuse]
csi-harness cluster down --provider kind [--name NAME]
csi-harness upstream [--procs N] [--focus RE] [--skip RE] [--report-dir DIR] [--keep]
                           Kubernetes' External Storage e2e suites (e2e.test) against
                           csi-mock on a local cluster without simulated nodes
csi-harness scale kep1472|scoring [--nodes N] [--pool SIZE] [--pods N] [--size SIZE|LOW-HIGH[/STEP]]
                           [--seed N] [--deadline S] [--stall S] [--report-dir DIR]
                           the same burst of pods on fresh local clusters with simulated
                           nodes, once per variant (docs/scale.md)
csi-harness scale report DIR    the report and charts again from DIR/results.json
csi-harness scale nodes [--counts 10,50,100,200] [--report-dir DIR]
                           bring-up time, memory and idle CPU per simulated node count
csi-harness kind image     build (or find) the offline kind node image; print its tag
csi-harness kind prepare --name NAME
                           make a kind cluster made by hand ready for --cluster existing:
                           pod network if kind's CNI is off, driver, sidecar and busybox
                           images loaded
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from csi_harness._internal.core.resources import TOOLS_SCRIPT
from csi_harness._internal.core.tools import Tools, ToolsMissing
from csi_harness._internal.core.validation import describe_validation_error
from csi_harness._internal.providers.kind.node_image import NodeImageError
from csi_harness._internal.providers.local.cluster import (
    ClusterUpFailed,
    LocalCluster,
    format_teardown,
)
from csi_harness._internal.providers.local.config import LocalClusterConfig, parse_feature_gates
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_mock.model.duration import DurationError, parse_duration


class UsageError(Exception):
    pass


def build_config(args: argparse.Namespace) -> LocalClusterConfig:
    data: dict[str, Any] = {}
    if args.config is not None:
        try:
            loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--config {args.config}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise UsageError(f"--config {args.config}: the top level must be a mapping")
        data.update(loaded)
    if args.name is not None:
        data["name"] = args.name
    if args.run_dir is not None:
        data["run_dir"] = args.run_dir
    if getattr(args, "simulated_nodes", None) is not None:
        data["simulated_nodes"] = args.simulated_nodes
    if getattr(args, "zones", None) is not None:
        data["zones"] = [z for z in args.zones.split(",") if z]
    if getattr(args, "feature_gates", None):
        given = data.get("feature_gates")
        if given is not None and not isinstance(given, dict):
            raise UsageError(f"{args.config}: feature_gates must be a mapping of NAME: bool")
        data["feature_gates"] = {
            **(data.get("feature_gates") or {}),
            **_feature_gates(args.feature_gates),
        }
    if getattr(args, "scheduler_config", None) is not None:
        try:
            data["scheduler"] = yaml.safe_load(Path(args.scheduler_config).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--scheduler-config {args.scheduler_config}: {exc}") from exc
    if getattr(args, "timeout", None) is not None:
        data["timeout_seconds"] = args.timeout
    try:
        return LocalClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc, args.config or "arguments")) from exc


def _print_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _feature_gates(text: str) -> dict[str, bool]:
    try:
        return parse_feature_gates(text)
    except ValueError as exc:
        raise UsageError(f"--feature-gates: {exc}") from exc


def _command(commands: Any, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose one-line help is also the description of its own --help."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=text, description=text)
    return parser


def duration(value: str) -> float:
    """An argparse type: seconds, or a Go duration such as 90s, 2m, 1h30m."""
    try:
        seconds = parse_duration(value)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive duration")
    return seconds


def _version() -> str:
    try:
        return f"csi-harness (csi-mock {metadata.version('csi-mock')})"
    except metadata.PackageNotFoundError:
        return "csi-harness (csi-mock, not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="csi-harness",
        description="csi-mock's conformance harness: Kubernetes clusters for storage tests "
        "(local processes or kind), upstream's External Storage suites, scale experiments "
        "and the pinned tools they run.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    cluster = _command(
        commands,
        "cluster",
        "a cluster for the suites: local (real control plane and kubelet, no Docker) or kind",
    )
    actions = cluster.add_subparsers(dest="action", required=True)
    for action, text in (
        ("up", "bring a cluster up and print its KUBECONFIG"),
        ("down", "remove a cluster and everything it left on the host"),
        ("status", "show a local cluster: phase, nodes, processes"),
    ):
        sub = _command(actions, action, text)
        sub.add_argument(
            "--config",
            help="YAML file of a local cluster's configuration (name, nodes, zones, "
            "feature_gates, scheduler, driver, ...)",
        )
        sub.add_argument("--name", help="cluster name (default csi-harness)")
        sub.add_argument(
            "--run-dir", help="directory of the run (default /var/lib/csi-harness/NAME)"
        )
        if action == "up":
            sub.add_argument(
                "--simulated-nodes", type=int, help="simulated nodes besides the kubelet"
            )
            sub.add_argument("--zones", help="comma-separated zone names assigned round-robin")
            sub.add_argument("--feature-gates", help="NAME=true|false,... for every component")
            sub.add_argument(
                "--scheduler-config", help="YAML merged into KubeSchedulerConfiguration"
            )
            sub.add_argument(
                "--timeout", type=duration, help="how long to wait for readiness (120s)"
            )
        if action == "status":
            sub.add_argument("--json", action="store_true", help="machine-readable output")
        if action in ("up", "down"):
            sub.add_argument(
                "--provider",
                choices=["local", "kind"],
                default="local",
                help="local (no Docker) or kind (needs a running Docker engine)",
            )
        if action == "up":
            sub.add_argument(
                "--kind-config", help="kind configuration file (default: csi-harness's own)"
            )
            sub.add_argument("--node-image", help="kind node image of your own (default: built)")
            sub.add_argument("--reuse", action="store_true", help="keep a running kind cluster")
    upstream = _command(
        commands, "upstream", "Kubernetes' External Storage e2e suites against csi-mock"
    )
    upstream.add_argument(
        "--report-dir", default="reports/upstream", help="JUnit, summary.md, ginkgo.log"
    )
    upstream.add_argument("--procs", type=int, default=4, help="ginkgo processes (4)")
    upstream.add_argument("--focus", help="ginkgo --focus (default External.Storage)")
    upstream.add_argument(
        "--skip",
        help="ginkgo --skip (default: the specs csi-harness skips, each for a known cause)",
    )
    upstream.add_argument(
        "--provider",
        choices=["local", "kind"],
        default="local",
        help="local (no Docker) or kind (needs a running Docker engine)",
    )
    upstream.add_argument(
        "--timeout", type=duration, default=3600.0, help="how long the suites may take (60m)"
    )
    upstream.add_argument("--name", default="csi-upstream", help="cluster name")
    upstream.add_argument("--keep", action="store_true", help="leave the cluster running")
    _add_scale_parser(commands)
    kind = _command(commands, "kind", "kind's node image, and kind clusters made by hand")
    kind_actions = kind.add_subparsers(dest="action", required=True)
    _command(kind_actions, "image", "build the offline node image (cached); print its tag")
    prepare = _command(kind_actions, "prepare", "ready a hand-made kind cluster for the suites")
    prepare.add_argument("--name", required=True, help="the kind cluster's name")
    tools = _command(
        commands,
        "tools",
        "build or locate the pinned tools (Kubernetes, CSI sidecars, kind, csi-sanity) "
        "from the Go module proxy into the shared cache",
    )
    tools.add_argument(
        "tools_args",
        nargs=argparse.REMAINDER,
        metavar="build [TOOL...] | doctor | path [TOOL] | list | prune",
    )
    return parser


def _add_scale_parser(commands: Any) -> None:
    scale = _command(commands, "scale", "scale experiments on local clusters")
    experiments = scale.add_subparsers(dest="experiment", required=True)
    for name, text in (
        ("kep1472", "capacity tracking on and off (KEP-1472)"),
        ("scoring", "StorageCapacityScoring off, on, inverted (KEP-4049)"),
    ):
        sub = _command(experiments, name, text)
        sub.add_argument("--nodes", type=int, default=50, help="simulated nodes (50)")
        sub.add_argument("--pool", default="10Gi", help="pool size of every node (10Gi)")
        sub.add_argument("--pods", type=int, default=450, help="pods in the burst (450)")
        sub.add_argument(
            "--size", default="1Gi", help="volume size, or LOW-HIGH[/STEP] drawn by --seed (1Gi)"
        )
        sub.add_argument("--seed", type=int, default=1, help="seed of the sizes (1)")
        sub.add_argument(
            "--deadline", type=duration, default=240.0, help="how long before a run is stuck (240s)"
        )
        sub.add_argument(
            "--stall", type=duration, default=60.0, help="how long without a binding: stuck (60s)"
        )
        sub.add_argument(
            "--provisioner-qps",
            type=float,
            default=50,
            help="external-provisioner --kube-api-qps (50; 0: its own default, 5)",
        )
        sub.add_argument("--variants", help="comma-separated subset of the comparison's variants")
        sub.add_argument("--report-dir", help=f"default reports/scale/{name}")
    again = _command(experiments, "report", "make a comparison's report again from its results")
    again.add_argument("report_dir", help="a directory with results.json")
    nodes = _command(experiments, "nodes", "what N simulated nodes cost")
    nodes.add_argument("--counts", default="10,50,100,200", help="node counts (10,50,100,200)")
    nodes.add_argument("--report-dir", default="reports/scale/nodes")


def _scale_main(args: argparse.Namespace, argv: list[str]) -> int:
    from csi_harness._internal.scale import cli as scale_cli

    try:
        return scale_cli.run(args, "csi-harness " + " ".join(argv))
    except scale_cli.ScaleUsageError as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 2
    except (ClusterUpFailed, ToolsMissing) as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 1


def _kind_main(args: argparse.Namespace) -> int:
    # Imported here: the kind provider needs lightkube and the deploy package, the local
    # commands do not.
    from csi_harness._internal.core.commands import CommandFailed
    from csi_harness._internal.deploy.images import DriverImageError
    from csi_harness._internal.providers.kind.cluster import (
        DEFAULT_CONFIG,
        KindClusterError,
    )
    from csi_harness._internal.providers.kind.node_image import build_node_image
    from csi_harness._internal.providers.kind.provider import KindProvider

    def progress(message: str) -> None:
        print(f"csi-harness: {message}", file=sys.stderr, flush=True)

    try:
        if args.command == "kind" and args.action == "prepare":
            adopted = KindProvider(args.name, progress=progress, keep=True).cluster()
            if not adopted.cli.exists():
                raise UsageError(f"--name {args.name}: kind knows no such cluster")
            adopted.prepare()
            print(f"export KUBECONFIG={adopted.kubeconfig}")
            return 0
        if args.command == "kind":
            image = build_node_image(Tools.locate(), progress=progress)
            state = "cached" if image.cached else f"built in {image.seconds:.0f}s"
            print(image.tag)
            progress(f"{image.tag} ({state})")
            return 0
        config = Path(getattr(args, "kind_config", None) or DEFAULT_CONFIG)
        if not config.is_file():
            raise UsageError(f"--kind-config {config}: no such file")
        provider = KindProvider(
            args.name or "csi-mock",
            config.resolve(),
            node_image=getattr(args, "node_image", None),
            progress=progress,
            keep=getattr(args, "reuse", False),
        )
        if args.action == "down":
            progress(provider.tear_down(keep=False))
            return 0
        print(f"export KUBECONFIG={provider.bring_up().kubeconfig}")
        return 0
    except UsageError as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 2
    except (KindClusterError, NodeImageError, DriverImageError, CommandFailed, ToolsMissing) as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 1


def _upstream_main(args: argparse.Namespace) -> int:
    from csi_harness._internal.upstream.run import (
        FOCUS,
        LOCAL_SKIPS,
        SKIPS,
        UpstreamRun,
        run_on_kind_cluster,
        run_on_local_cluster,
    )

    if args.procs < 1:
        print("csi-harness: --procs must be at least 1", file=sys.stderr)
        return 2
    local = args.provider == "local"
    run = UpstreamRun(
        report_dir=Path(args.report_dir).resolve(),
        procs=args.procs,
        focus=args.focus or FOCUS,
        skips=(args.skip,)
        if args.skip
        else tuple(SKIPS if args.provider == "kind" else LOCAL_SKIPS),
        timeout_seconds=args.timeout,
    )

    def progress(message: str) -> None:
        print(f"csi-harness: {message}", file=sys.stderr, flush=True)

    try:
        runner = run_on_local_cluster if local else run_on_kind_cluster
        summary = runner(run, name=args.name, keep=args.keep, progress=progress)
    except (ClusterUpFailed, ToolsMissing, RuntimeError, LookupError) as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 1
    counts = summary.counts()
    progress(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    for reason in summary.unexplained():
        progress(f"skip reason not explained in csi_harness/_internal/upstream/run.py: {reason}")
    if not summary.results:
        progress("no External Storage spec ran: check --focus and ginkgo.log")
        return 1
    return 1 if summary.failed else 0


TOOLS_COMMANDS = ("build", "doctor", "path", "list", "prune")


def _tools_main(tools_args: list[str]) -> int:
    """Run the packaged tools.sh: the same pins and cache as a source checkout's."""
    if not tools_args or tools_args[0] not in TOOLS_COMMANDS:
        given = tools_args[0] if tools_args else "nothing"
        print(
            f"csi-harness tools: expected one of {', '.join(TOOLS_COMMANDS)}, got {given}",
            file=sys.stderr,
        )
        return 2
    env = {**os.environ, "CSI_MOCK_TOOLS_COMMAND": "csi-harness tools"}
    return subprocess.run(["bash", str(TOOLS_SCRIPT), *tools_args], env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.command == "scale":
        return _scale_main(args, argv)
    if args.command == "upstream":
        return _upstream_main(args)
    if args.command == "tools":
        return _tools_main(args.tools_args)
    if args.command == "kind" or getattr(args, "provider", "local") == "kind":
        return _kind_main(args)
    try:
        config = build_config(args)
    except UsageError as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 2
    cluster = LocalCluster(config)
    if args.action == "up":
        # Kept: the cluster outlives the command, and a failed one stays for inspection.
        provider = LocalProvider(config, progress=_print_progress, keep=True)
        try:
            up = provider.bring_up()
        except (ClusterUpFailed, ToolsMissing) as exc:
            print(f"csi-harness: {exc}", file=sys.stderr)
            print(
                "csi-harness: the run is left for inspection; "
                "`csi-harness cluster down` removes it",
                file=sys.stderr,
            )
            return 1
        print(f"export KUBECONFIG={up.kubeconfig}")
        return 0
    if args.action == "down":
        report = cluster.down()
        print(f"cluster {config.name!r} removed: {format_teardown(report)}", file=sys.stderr)
        return 1 if report.problems or report.stray_processes else 0
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    return 0 if status["phase"] == "ready" else 3


def _print_status(status: dict[str, Any]) -> None:
    print(f"cluster {status['cluster']}: {status['phase']} ({status['run_dir']})")
    if status["phase"] == "absent":
        return
    if status.get("ready_after_seconds"):
        print(
            f"ready after {status['ready_after_seconds']:.1f}s; KUBECONFIG={status['kubeconfig']}"
        )
    print("nodes:")
    for name, node in status["nodes"].items():
        print(f"  {name:<10} {node['type']:<10} zone={node['zone'] or '-'}")
    print("processes:")
    for name, proc in status["processes"].items():
        state = "running" if proc["running"] else "EXITED"
        print(f"  {name:<32} pid {proc['pid']:<8} {state:<8} {proc['log']}")


if __name__ == "__main__":
    sys.exit(main())
