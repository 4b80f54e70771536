"""The `csi-mock` command: `serve` runs the driver, `ctl` controls a running one."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from csi_mock import __version__
from csi_mock.admin.ctl import add_ctl_parser, run_ctl
from csi_mock.config import ConfigError, DriverConfig, load_config, validate_config
from csi_mock.model.quantity import QuantityError, parse_quantity


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not a boolean (true/false)")


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """Register --name and Go-style -name (csi-driver-host-path writes both)."""
    parser.add_argument(f"--{name}", f"-{name}", **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="csi-mock", description="A configurable mock CSI driver.")
    parser.add_argument("--version", action="version", version=f"csi-mock {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the CSI driver",
        description="Run the driver. Flags override the config file; csi-driver-host-path's"
        " flag names are accepted where the meaning matches.",
    )
    serve.add_argument("--config", type=Path, help="YAML configuration file")
    serve.add_argument(
        "--mode", choices=["controller", "node", "all"], help="services to run (default all)"
    )
    _flag(serve, "endpoint", help="unix:///abs/path.sock (default: $CSI_ENDPOINT)")
    _flag(serve, "nodeid", help="node ID reported by NodeGetInfo")
    _flag(serve, "drivername", help="driver name reported by GetPluginInfo")
    _flag(serve, "statedir", type=Path, help="state directory (database and volumes)")
    _flag(serve, "backend-dir", type=Path, help="volume data directory (default statedir)")
    _flag(
        serve,
        "capacity",
        action="append",
        default=[],
        metavar="KIND=QUANTITY",
        help="a pool per kind for this node (repeatable), e.g. fast=100Gi",
    )
    _flag(serve, "max-volume-size", help="largest volume any pool accepts, e.g. 1Ti")
    _flag(serve, "maxvolumespernode", type=int, help="NodeGetInfo max_volumes_per_node")
    _flag(serve, "attach-limit", type=int, help="ControllerPublishVolume limit per node")
    _flag(serve, "enable-attach", type=_bool, nargs="?", const=True, help="advertise attach")
    _flag(
        serve,
        "enable-topology",
        type=_bool,
        nargs="?",
        const=True,
        help="advertise topology (default true)",
    )
    _flag(
        serve,
        "plugins-registry",
        type=Path,
        metavar="DIR",
        help="register with the kubelet through DIR/<drivername>-reg.sock"
        " (e.g. /var/lib/kubelet/plugins_registry); node and all modes only",
    )
    _flag(
        serve,
        "kubelet-registration-path",
        type=Path,
        metavar="PATH",
        help="the CSI socket path as the kubelet sees it (default: the --endpoint path);"
        " enables registration",
    )
    _flag(serve, "v", help="log verbosity (accepted for compatibility; >=5 means debug)")
    serve.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="log level"
    )
    add_ctl_parser(commands)
    return parser


def overrides_from_flags(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """Translate flags (and CSI_ENDPOINT) into dotted configuration keys."""
    overrides: dict[str, Any] = {}
    simple = {
        "mode": "mode",
        "nodeid": "node.id",
        "drivername": "name",
        "statedir": "state_dir",
        "backend_dir": "backend_dir",
        "maxvolumespernode": "node.max_volumes_per_node",
        "attach_limit": "controller.attach_limit",
        "enable_attach": "attach_required",
        "enable_topology": "topology",
        "log_level": "log_level",
        "plugins_registry": "node.registration.plugins_registry",
        "kubelet_registration_path": "node.registration.kubelet_endpoint",
    }
    for attribute, key in simple.items():
        value = getattr(args, attribute)
        if value is not None:
            overrides[key] = str(value) if isinstance(value, Path) else value
    endpoint = args.endpoint or env.get("CSI_ENDPOINT")
    if endpoint:
        overrides["endpoint"] = endpoint
    if args.v is not None and args.log_level is None:
        overrides["log_level"] = "debug" if args.v.isdigit() and int(args.v) >= 5 else "info"
    return overrides


def _quantity_flag(flag: str, value: str) -> int:
    try:
        return parse_quantity(value)
    except QuantityError as error:
        raise ConfigError(f"{flag}: {error}") from None


def _capacity_pools(
    entries: Sequence[str], segment: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """hostpathplugin's --capacity KIND=QUANTITY: one pool per kind on this node."""
    kinds: dict[str, Any] = {}
    pools: list[dict[str, Any]] = []
    for entry in entries:
        kind, sep, quantity = entry.partition("=")
        if not sep or not kind:
            raise ConfigError(f"--capacity {entry!r}: expected KIND=QUANTITY, e.g. fast=100Gi")
        kinds[kind] = {"cost": 1.0}
        pools.append(
            {
                "name": kind,
                "size": _quantity_flag(f"--capacity {kind}", quantity),
                "kinds": [kind],
                "segment": segment,
            }
        )
    return kinds, pools


def resolve_config(args: argparse.Namespace, env: dict[str, str]) -> DriverConfig:
    """The file, then the flags, validated; pool flags need the node's segment first."""
    config = load_config(args.config, overrides_from_flags(args, env))
    max_size = (
        _quantity_flag("--max-volume-size", args.max_volume_size)
        if args.max_volume_size is not None
        else None
    )
    if not args.capacity and max_size is None:
        return config
    data = config.model_dump()
    if args.capacity:
        segment = config.node_segment() if config.node.id else {}
        data["kinds"], data["pools"] = _capacity_pools(args.capacity, segment)
    if max_size is not None:
        data["pools"] = data["pools"] or [p.model_dump() for p in config.effective_pools()]
        for pool in data["pools"]:
            if pool.get("max_volume_size") is None:
                pool["max_volume_size"] = max_size
    return validate_config(data, source="flags")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            config = resolve_config(args, dict(os.environ))
        except ConfigError as error:
            print(f"csi-mock: {error}", file=sys.stderr)
            return 2
        logging.basicConfig(
            level=getattr(logging, config.log_level.upper()),
            format="%(message)s",
            stream=sys.stderr,
        )
        try:
            asyncio.run(_serve(config))
        except ConfigError as error:  # found at start-up, e.g. an unreadable token file
            print(f"csi-mock: {error}", file=sys.stderr)
            return 2
        return 0
    if args.command == "ctl":
        return run_ctl(args, os.environ)
    parser.error(f"unknown command {args.command}")
    return 2


async def _serve(config: DriverConfig) -> None:
    from csi_mock.server import serve

    await serve(config)


if __name__ == "__main__":
    sys.exit(main())
