"""The ``csi-harness`` command line: every subcommand with its description, and the
argument types (``duration``: seconds or a Go duration)."""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from csi_mock.model.duration import DurationError, parse_duration


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


def build_parser() -> argparse.ArgumentParser:
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
            sub.add_argument(
                "--node-image",
                help="kind node image (default: kindest/node of the pinned Kubernetes, or "
                "with --images built csi-mock's offline image)",
            )
            sub.add_argument("--reuse", action="store_true", help="keep a running kind cluster")
            _add_image_options(sub)
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
    _add_image_options(upstream)
    upstream.add_argument("--keep", action="store_true", help="leave the cluster running")
    _add_scale_parser(commands)
    _add_registry_parsers(commands)
    kind = _command(commands, "kind", "kind's node image, and kind clusters made by hand")
    kind_actions = kind.add_subparsers(dest="action", required=True)
    _command(kind_actions, "image", "build the offline node image (cached); print its tag")
    prepare = _command(kind_actions, "prepare", "ready a hand-made kind cluster for the suites")
    prepare.add_argument("--name", required=True, help="the kind cluster's name")
    prepare.add_argument(
        "--images",
        metavar="built|upstream|REGISTRY",
        help="built (default: every image loaded into the nodes) or pulled by the nodes: "
        + IMAGES_HELP,
    )
    prepare.add_argument(
        "--driver-image",
        metavar="NAME",
        help="csi-mock's image; a name with a registry host is pulled by the nodes",
    )
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


IMAGES_HELP = (
    "built (every image built here from the pinned tools), upstream (the sidecars from "
    "registry.k8s.io, busybox from Docker Hub, at pinned versions; the default on kind) or "
    "a registry prefix holding every upstream image under its upstream path"
)


def _add_image_options(parser: argparse.ArgumentParser) -> None:
    """The image options of every command that deploys csi-mock into a cluster."""
    parser.add_argument("--images", metavar="built|upstream|REGISTRY", help=IMAGES_HELP)
    parser.add_argument(
        "--driver-image",
        metavar="NAME",
        help="csi-mock's image as you publish it (default on kind: built and loaded)",
    )
    parser.add_argument(
        "--registry-mirror",
        metavar="HOST:PORT",
        help="kind: pull registry.k8s.io and Docker Hub names through this registry "
        "(csi-harness registry serve prints the one it starts)",
    )


def _add_registry_parsers(commands: Any) -> None:
    registry = _command(
        commands,
        "registry",
        "a registry on loopback (crane registry serve in a container) for machines "
        "without access to public registries",
    )
    actions = registry.add_subparsers(dest="action", required=True)
    _command(actions, "serve", "start it (or keep the running one); print its addresses")
    _command(actions, "stop", "remove its container (the pushed blobs stay cached)")
    pulls = _command(actions, "pulls", "list the images pulled from it, from its log")
    pulls.add_argument(
        "--expect-upstream",
        action="store_true",
        help="exit 1 unless every sidecar and busybox upstream name was pulled",
    )
    images = _command(commands, "images", "put csi-mock's image (and stand-ins) in a registry")
    image_actions = images.add_subparsers(dest="action", required=True)
    push = _command(
        image_actions,
        "push",
        "build csi-mock's image from the installed package and push it as "
        "REGISTRY/csi-mock:VERSION; print that name",
    )
    push.add_argument("--registry", required=True, help="HOST[:PORT][/PATH] to push to")
    push.add_argument(
        "--stand-ins",
        action="store_true",
        help="also push sidecars, busybox and the Python base built here under their "
        "upstream names (a mirror for machines that cannot pull; needs the pinned tools)",
    )
    push.add_argument(
        "--no-driver", action="store_true", help="push only the stand-ins, not csi-mock"
    )
    push.add_argument(
        "--base", help="Python base image of csi-mock's image (default python:3.11-slim)"
    )


def _add_scale_parser(commands: Any) -> None:
    scale = _command(commands, "scale", "scale experiments on local, kind or existing clusters")
    experiments = scale.add_subparsers(dest="experiment", required=True)
    for name, text in (
        ("kep1472", "capacity tracking on and off (KEP-1472)"),
        ("scoring", "StorageCapacityScoring off, on, inverted (KEP-4049)"),
    ):
        sub = _command(experiments, name, text)
        sub.add_argument(
            "--nodes", type=int, help="simulated nodes (50; on kind or --kubeconfig: every node)"
        )
        sub.add_argument(
            "--provider",
            choices=["local", "kind"],
            default="local",
            help="a fresh local cluster of simulated nodes per run (local), or one kind "
            "cluster with csi-mock deployed into it per run",
        )
        sub.add_argument(
            "--kubeconfig",
            help="run on the existing cluster of this kubeconfig, csi-mock deployed into it",
        )
        sub.add_argument("--name", default="csi-scale", help="kind cluster name (csi-scale)")
        _add_image_options(sub)
        sub.add_argument(
            "--keep", action="store_true", help="keep the kind cluster (adopt a running one)"
        )
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
        sub.add_argument(
            "--provisioning",
            choices=["central", "distributed"],
            default="central",
            help="one external-provisioner (central), or one per node with --node-deployment",
        )
        sub.add_argument(
            "--workload",
            choices=["pods", "deployments"],
            default="pods",
            help="bare pods, or a Deployment of one replica per pod (clusterloader2's shape)",
        )
        sub.add_argument(
            "--create-qps",
            type=float,
            default=0,
            help="pods or Deployments created per second (0: as fast as the API server takes)",
        )
        sub.add_argument(
            "--baseline", action="store_true", help="also run the same pods without volumes"
        )
        sub.add_argument("--runs", type=int, default=1, help="runs of every variant (1)")
        sub.add_argument(
            "--busy-nodes",
            type=int,
            default=0,
            help="simulated nodes carrying another pod that asks for half their CPU and memory (0)",
        )
        sub.add_argument(
            "--random-tie-break",
            action="store_true",
            help="a scheduler extender scoring every node 0, so that kube-scheduler 1.37 "
            "breaks ties between nodes at random",
        )
        sub.add_argument(
            "--scheduler-gates",
            default="",
            help="kube-scheduler feature gates of every variant: NAME=true|false,...",
        )
        sub.add_argument("--variants", help="comma-separated subset of the comparison's variants")
        sub.add_argument("--report-dir", help=f"default reports/scale/{name}")
    again = _command(experiments, "report", "make a comparison's report again from its results")
    again.add_argument("report_dir", help="a directory with results.json")
    nodes = _command(experiments, "nodes", "what N simulated nodes cost")
    nodes.add_argument("--counts", default="10,50,100,200", help="node counts (10,50,100,200)")
    nodes.add_argument("--report-dir", default="reports/scale/nodes")
