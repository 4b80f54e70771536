"""The `csi-mock` command: `serve` runs the driver, `ctl` controls a running one.

`serve` takes hostpathplugin's flags, parsed as Go parses them (``go_flags.py``) and
turned into the driver's configuration (``hostpath_flags.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from csi_mock import __version__
from csi_mock.admin.ctl.parser import add_ctl_parser
from csi_mock.config import ConfigError, DriverConfig
from csi_mock.go_flags import GoFlagParser, collected, go_flag, go_int, klog_level
from csi_mock.hostpath_flags import resolve_configs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="csi-mock", description="A configurable mock CSI driver.")
    parser.add_argument("--version", action="version", version=f"csi-mock {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=GoFlagParser)

    serve = commands.add_parser(
        "serve",
        help="run the CSI driver",
        description="Run the driver. Flags override the config file. csi-driver-host-path's"
        " flag names are accepted with hostpathplugin's meaning; where csi-mock differs, the"
        " flag's help says how. Every bad flag is reported at once (exit 2).",
        allow_abbrev=False,  # Go's flag package matches whole names only
    )
    serve.add_argument("--version", "-version", action="version", version=f"csi-mock {__version__}")
    serve.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML configuration file; given more than once, one process serves an"
        " instance per file (each its own socket, state and admin API), and no other"
        " flag may be given",
    )
    serve.add_argument(
        "--mode", choices=["controller", "node", "all"], help="services to run (default all)"
    )
    go_flag(serve, "endpoint", help="unix:///abs/path.sock (default: $CSI_ENDPOINT)")
    go_flag(serve, "nodeid", help="node ID reported by NodeGetInfo")
    go_flag(serve, "drivername", help="driver name reported by GetPluginInfo")
    go_flag(serve, "statedir", type=Path, help="state directory (database and volumes)")
    go_flag(serve, "backend-dir", type=Path, help="volume data directory (default statedir)")
    go_flag(
        serve,
        "capacity",
        action="append",
        default=[],
        metavar="KIND=QUANTITY",
        help="a pool per kind for this node (repeatable; a repeated kind replaces the"
        " earlier one), e.g. fast=100Gi",
    )
    go_flag(
        serve,
        "max-volume-size",
        metavar="BYTES",
        help="largest volume, in bytes (a quantity such as 1Ti also works); default 1Ti"
        " for --capacity pools and, without --config, for the default pool",
    )
    go_flag(
        serve,
        "maxvolumespernode",
        type=collected(go_int),
        help="NodeGetInfo max_volumes_per_node: 0 (the default) for no limit, negative refused",
    )
    go_flag(
        serve,
        "attach-limit",
        type=collected(go_int),
        help="ControllerPublishVolume limit per node; when > 0 also NodeGetInfo's"
        " max_volumes_per_node; 0 (the default) for no limit, negative refused (hostpathplugin"
        " reads -1 as a random limit and other negatives as none)",
    )
    serve.add_go_bool("enable-attach", help="advertise attach (PUBLISH_UNPUBLISH_VOLUME)")
    serve.add_go_bool("enable-topology", help="advertise topology (default true)")
    serve.add_go_bool(
        "enable-controller-modify-volume",
        help="advertise MODIFY_VOLUME: ControllerModifyVolume and CreateVolume's"
        " mutable_parameters (config key controller.modify)",
    )
    serve.add_go_bool(
        "enable-list-snapshots",
        help="true: snapshots (CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS, GET_SNAPSHOT) with the"
        " config file's controller.snapshots or full accounting; false is refused",
    )
    serve.add_go_bool(
        "enable-volume-expansion",
        help="volume expansion on both sides (default true; config keys controller.expansion"
        " and node.expansion)",
    )
    serve.add_go_bool(
        "disable-controller-expansion",
        help="no ControllerExpandVolume (node-only expansion; controller.expansion: false)",
    )
    serve.add_go_bool("disable-node-expansion", help="no NodeExpandVolume (node.expansion: false)")
    serve.add_go_bool(
        "node-expand-required",
        help="ControllerExpandVolume's node_expansion_required (default true)",
    )
    go_flag(
        serve,
        "max-volume-size-node",
        metavar="BYTES",
        help="largest size NodeExpandVolume grows a volume to (node.max_expansion_size)",
    )
    go_flag(
        serve,
        "accepted-mutable-parameter-names",
        action="append",
        metavar="NAMES",
        help="comma-separated mutable parameter names, any value (repeatable); only with"
        " --enable-controller-modify-volume, without it every name is accepted",
    )
    go_flag(
        serve,
        "plugins-registry",
        type=Path,
        metavar="DIR",
        help="register with the kubelet through DIR/<drivername>-reg.sock"
        " (e.g. /var/lib/kubelet/plugins_registry); node and all modes only",
    )
    go_flag(
        serve,
        "kubelet-registration-path",
        type=Path,
        metavar="PATH",
        help="the CSI socket path as the kubelet sees it (default: the --endpoint path);"
        " enables registration",
    )
    go_flag(
        serve, "v", type=collected(klog_level), help="klog verbosity: >=5 means log level debug"
    )
    serve.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="log level"
    )
    add_ctl_parser(cast("argparse._SubParsersAction[argparse.ArgumentParser]", commands))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            configs = resolve_configs(args, dict(os.environ))
        except ConfigError as error:
            print(f"csi-mock: {error}", file=sys.stderr)
            return 2
        levels = [getattr(logging, config.log_level.upper()) for config in configs]
        logging.basicConfig(level=min(levels), format="%(message)s", stream=sys.stderr)
        try:
            asyncio.run(_serve(configs))
        except ConfigError as error:  # found at start-up, e.g. an unreadable token file
            print(f"csi-mock: {error}", file=sys.stderr)
            return 2
        return 0
    if args.command == "ctl":
        from csi_mock.admin.ctl.run import run_ctl  # the admin client: not for `serve`

        return run_ctl(args, os.environ)
    parser.error(f"unknown command {args.command}")
    return 2


async def _serve(configs: Sequence[DriverConfig]) -> None:
    from csi_mock.server import serve_many

    await serve_many(configs)


if __name__ == "__main__":
    sys.exit(main())
