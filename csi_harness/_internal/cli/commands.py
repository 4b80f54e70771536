"""The other commands: ``kind``, ``cluster up|down --provider kind``, ``upstream``,
``scale`` and ``tools``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from csi_harness._internal.cli.local_cluster import UsageError
from csi_harness._internal.core.package_data import TOOLS_SCRIPT
from csi_harness._internal.core.tools import Tools, ToolsMissing
from csi_harness._internal.providers.kind.node_image import NodeImageError
from csi_harness._internal.providers.local.cluster import (
    ClusterUpFailed,
)


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
    from csi_harness._internal.providers.factory import (
        ClusterOptionError,
        ClusterOptions,
        open_provider,
    )
    from csi_harness._internal.providers.kind.cluster import KindClusterError
    from csi_harness._internal.providers.kind.node_image import build_node_image
    from csi_harness._internal.providers.kind.node_image_traits import NodeImageUnusable
    from csi_harness._internal.providers.kind.provider import KindProvider

    def progress(message: str) -> None:
        print(f"csi-harness: {message}", file=sys.stderr, flush=True)

    try:
        if args.command == "kind" and args.action == "prepare":
            prepared = open_provider(
                ClusterOptions(
                    provider="kind",
                    name=args.name,
                    keep=True,
                    images=args.images or "built",
                    driver_image=args.driver_image,
                ),
                progress=progress,
            )
            assert isinstance(prepared, KindProvider)
            adopted = prepared.cluster()
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
        if args.action == "down":
            down = KindProvider(args.name or "csi-mock", progress=progress)
            progress(down.tear_down(keep=False))
            return 0
        provider = open_provider(
            ClusterOptions(
                provider="kind",
                name=args.name or "csi-mock",
                kind_config=Path(args.kind_config) if args.kind_config else None,
                node_image=args.node_image,
                keep=args.reuse,
                images=args.images,
                driver_image=args.driver_image,
                registry_mirror=args.registry_mirror,
            ),
            progress=progress,
        )
        print(f"export KUBECONFIG={provider.bring_up().kubeconfig}")
        return 0
    except UsageError as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 2
    except ClusterOptionError as exc:
        print(f"csi-harness: --{exc.option.replace('_', '-')}: {exc.message}", file=sys.stderr)
        return 2
    except (
        KindClusterError,
        NodeImageError,
        NodeImageUnusable,
        DriverImageError,
        CommandFailed,
        ToolsMissing,
    ) as exc:
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

    from csi_harness._internal.providers.factory import ClusterOptionError

    image_options = {
        option: getattr(args, option) for option in ("images", "driver_image", "registry_mirror")
    }
    try:
        if local:
            if any(image_options.values()) and image_options["images"] != "built":
                raise ClusterOptionError("images", "only for --provider kind")
            summary = run_on_local_cluster(run, name=args.name, keep=args.keep, progress=progress)
        else:
            summary = run_on_kind_cluster(
                run, name=args.name, keep=args.keep, progress=progress, image_options=image_options
            )
    except ClusterOptionError as exc:
        print(f"csi-harness: --{exc.option.replace('_', '-')}: {exc.message}", file=sys.stderr)
        return 2
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
    """Run the packaged tools/build.sh: the same pins and cache as a source checkout's."""
    if not tools_args or tools_args[0] not in TOOLS_COMMANDS:
        given = tools_args[0] if tools_args else "nothing"
        print(
            f"csi-harness tools: expected one of {', '.join(TOOLS_COMMANDS)}, got {given}",
            file=sys.stderr,
        )
        return 2
    env = {**os.environ, "CSI_MOCK_TOOLS_COMMAND": "csi-harness tools"}
    return subprocess.run(["bash", str(TOOLS_SCRIPT), *tools_args], env=env, check=False).returncode
