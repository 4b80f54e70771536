"""``csi-harness``: bring clusters up and down.

csi-harness cluster up [--simulated-nodes N] [--zones a,b] [--feature-gates G=true,...]
                       [--scheduler-config FILE] [--config FILE] [--name NAME]
csi-harness cluster status [--json]
csi-harness cluster down
csi-harness cluster up --provider kind [--name NAME] [--kind-config FILE]
                       [--node-image IMAGE] [--reuse] [--images built|upstream|REGISTRY]
                       [--driver-image NAME] [--registry-mirror HOST:PORT]
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
csi-harness registry serve|stop|pulls
                           a registry on loopback for machines that cannot pull
csi-harness images push --registry R [--stand-ins]
                           csi-mock's image (and stand-ins of the public ones) into R
"""

from __future__ import annotations

import json
import sys

from csi_harness._internal.cli.commands import (
    _kind_main,
    _scale_main,
    _tools_main,
    _upstream_main,
)
from csi_harness._internal.cli.images import images_main, registry_main
from csi_harness._internal.cli.local_cluster import (
    UsageError,
    _print_progress,
    _print_status,
    build_config,
)
from csi_harness._internal.cli.parser import build_parser, duration
from csi_harness._internal.core.tools import ToolsMissing
from csi_harness._internal.providers.local.cluster import (
    ClusterUpFailed,
    LocalCluster,
    format_teardown,
)
from csi_harness._internal.providers.local.provider import LocalProvider

__all__ = ["UsageError", "build_config", "build_parser", "duration", "main"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.command == "scale":
        return _scale_main(args, argv)
    if args.command == "upstream":
        return _upstream_main(args)
    if args.command == "tools":
        return _tools_main(args.tools_args)
    if args.command == "registry":
        return registry_main(args)
    if args.command == "images":
        return images_main(args)
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
