#!/usr/bin/env python3
"""Generate the kustomize base deploy/kubernetes/ from the harness's renderer.

The files are ``csi_harness._internal.deploy.kustomize_base.base_files()``: the
in-cluster deployment the harness makes for its tests (``render_objects``), for the
default driver on nodes not known in advance, with the sidecars by their upstream
names. Every file says it is generated; edit the renderer or its sources
(``csi_harness/_internal/deploy/manifests/``) and run this again. A ``*.yaml`` in the
directory that the renderer does not write is stale too: writing removes it.

Usage::

    python scripts/gen_deploy.py           # (re)write deploy/kubernetes/
    python scripts/gen_deploy.py --check   # exit 1, with a diff summary, if it is stale
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from csi_harness._internal.deploy.kustomize_base import base_files

ROOT = Path(__file__).resolve().parents[1]
BASE_DIR = ROOT / "deploy" / "kubernetes"
DIFF_LINES = 12
"""Lines of each stale file's diff that ``--check`` prints."""


def stale_files(files: Mapping[str, str], directory: Path) -> dict[str, list[str]]:
    """File name -> the unified diff from what ``directory`` holds to what it should
    (a missing file: its whole text; a file nothing generates: its removal)."""
    stale = {}
    present = {p.name for p in directory.glob("*.yaml")} if directory.is_dir() else set()
    for name in sorted(present | set(files)):
        path = directory / name
        old = path.read_text() if name in present else ""
        new = files.get(name, "")
        if old != new:
            stale[name] = list(
                difflib.unified_diff(
                    old.splitlines(),
                    new.splitlines(),
                    f"{name} (committed)" if name in present else "/dev/null",
                    f"{name} (generated)" if name in files else "/dev/null",
                    lineterm="",
                )
            )
    return stale


def summary(stale: Mapping[str, list[str]]) -> str:
    """Per stale file: lines added and removed, then the first lines of its diff."""
    lines = []
    for name, diff in stale.items():
        body = [line for line in diff[2:] if not line.startswith("@@")]
        added = sum(1 for line in body if line.startswith("+"))
        removed = sum(1 for line in body if line.startswith("-"))
        lines.append(f"  {name}: +{added} -{removed}")
        lines += [f"    {line}" for line in diff[2 : 2 + DIFF_LINES]]
        if len(diff) > 2 + DIFF_LINES:
            lines.append(f"    ... ({len(diff) - 2 - DIFF_LINES} more diff lines)")
    return "\n".join(lines)


def write(files: Mapping[str, str], directory: Path, stale: Mapping[str, list[str]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in stale:
        if name in files:
            (directory / name).write_text(files[name])
        else:
            (directory / name).unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the directory differs from what would be generated",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=BASE_DIR,
        help=f"the directory to write or check (default: {BASE_DIR.relative_to(ROOT)})",
    )
    args = parser.parse_args(argv)
    directory: Path = args.dir
    shown = directory.relative_to(ROOT) if directory.is_relative_to(ROOT) else directory

    files = base_files()
    stale = stale_files(files, directory)
    if args.check:
        if stale:
            print(
                f"gen_deploy: {shown}/ is stale ({len(stale)} of its files differ from "
                f"what the renderer gives):\n{summary(stale)}\n"
                "  run `python scripts/gen_deploy.py` and commit the result; to change the "
                "base, change the renderer (csi_harness/_internal/deploy/), not the files",
                file=sys.stderr,
            )
            return 1
        print(f"gen_deploy: {shown}/ is up to date")
        return 0
    write(files, directory, stale)
    print(f"gen_deploy: updated {len(stale)} of the {len(files)} files in {shown}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
