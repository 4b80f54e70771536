"""``csi-harness registry`` and ``csi-harness images``: a registry on loopback, and
images pushed into any registry (csi_harness._internal.core.registry,
csi_harness._internal.deploy.image_push)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from csi_harness._internal.core import registry
from csi_harness._internal.core.commands import CommandFailed
from csi_harness._internal.core.tools import Tools, ToolsMissing, tool_binary


def _progress(message: str) -> None:
    print(f"csi-harness: {message}", file=sys.stderr, flush=True)


def _crane() -> Path:
    crane = tool_binary("crane")
    if crane is None:
        raise ToolsMissing("crane is not built: csi-harness tools build crane")
    return crane


def registry_main(args: argparse.Namespace) -> int:
    try:
        if args.action == "serve":
            served = registry.serve(_crane())
            print(f"push to:   {served.host_address}")
            print(f"kind:      --csi-registry-mirror {served.node_address}")
            return 0
        if args.action == "stop":
            registry.stop()
            _progress(f"registry {registry.CONTAINER} removed")
            return 0
        pulled = registry.pulls(registry.log(since=registry.pushed_until()))
        for reference in pulled:
            print(reference)
        if args.expect_upstream:
            return _expect_upstream(pulled)
        return 0
    except (registry.RegistryError, ToolsMissing) as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 1


def _expect_upstream(pulled: list[str]) -> int:
    from csi_harness._internal.deploy.image_set import upstream_references

    # containerd asks the mirror by tag; a reference is pulled when its path and tag
    # are in the log, at the root (Docker Hub) or under its registry's host.
    wanted = upstream_references()
    missing = []
    for name, reference in wanted.items():
        path = reference.removeprefix("docker.io/")
        if not any(p in (path, reference) for p in pulled):
            missing.append(f"{name} ({reference})")
    if missing:
        print("csi-harness: not pulled from the registry: " + ", ".join(missing), file=sys.stderr)
        return 1
    _progress(f"all {len(wanted)} upstream names were pulled from the registry")
    return 0


def images_main(args: argparse.Namespace) -> int:
    from csi_harness._internal.deploy.image_push import push_driver, push_stand_ins
    from csi_harness._internal.deploy.image_set import PYTHON_BASE_UPSTREAM
    from csi_harness._internal.deploy.images import DriverImageError

    prefix = args.registry.rstrip("/")
    try:
        if args.stand_ins:
            push_stand_ins(prefix, Tools.locate(), _crane(), progress=_progress)
        if not args.no_driver:
            print(push_driver(prefix, base=args.base or PYTHON_BASE_UPSTREAM, progress=_progress))
        registry.mark_pushed()
        return 0
    except (registry.RegistryError, ToolsMissing, DriverImageError, CommandFailed) as exc:
        print(f"csi-harness: {exc}", file=sys.stderr)
        return 1
