"""``csi-harness cluster up|down|status`` for the local provider: the configuration from
the options and a file, and the status table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from csi_harness._internal.core.validation import describe_validation_error
from csi_harness._internal.kube.feature_gates import parse_feature_gates
from csi_harness._internal.providers.local.config import LocalClusterConfig


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
