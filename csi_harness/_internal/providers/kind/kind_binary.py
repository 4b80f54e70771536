"""Which ``kind`` runs: the user's own from PATH when it is new enough, else the
pinned one built by ``csi-harness tools build kind``.

The suites are tested with the pinned kind (``tools/kind/build.env``); older kinds are
refused because their node images and kubeadm configurations predate the Kubernetes
versions the suites pin (kind supports node images of the Kubernetes versions it was
released with, and the suites' kind configurations carry kubeadm ``v1beta4`` patches).
"""

from __future__ import annotations

import re
import shutil

from csi_harness._internal.core.commands import CommandFailed, Runner, run_command
from csi_harness._internal.core.tools import ToolsMissing, tool_binary

MINIMUM = (0, 33, 0)
"""The oldest kind the suites run with: the pinned version."""

_VERSION = re.compile(r"\bkind v(\d+)\.(\d+)\.(\d+)")


class KindVersionError(RuntimeError):
    """The ``kind`` found cannot run the suites; the message says which and the fix."""


def parse_kind_version(output: str) -> tuple[int, int, int]:
    """``kind version``'s ``kind v0.33.0 go1.26.8 linux/amd64`` as (0, 33, 0)."""
    match = _VERSION.search(output)
    if match is None:
        raise KindVersionError(f"`kind version` printed no version: {output.strip()!r}")
    return int(match[1]), int(match[2]), int(match[3])


def check_kind(binary: str, runner: Runner = run_command) -> tuple[int, int, int]:
    """The version of ``binary``, or KindVersionError when it is older than MINIMUM."""
    try:
        version = parse_kind_version(runner([binary, "version"]))
    except CommandFailed as exc:
        raise KindVersionError(f"{binary} version failed: {exc}") from exc
    if version < MINIMUM:
        wanted = "v" + ".".join(map(str, MINIMUM))
        found = "v" + ".".join(map(str, version))
        raise KindVersionError(
            f"{binary} is kind {found}, older than {wanted}, the oldest the suites run with "
            f"(its node images and kubeadm configuration predate the pinned Kubernetes): "
            f"install kind {wanted} or newer, or build the pinned one with "
            "`csi-harness tools build kind` and put it first"
        )
    return version


def find_kind(*, prefer_path: bool, runner: Runner = run_command) -> str:
    """kind from PATH (checked) when ``prefer_path`` and there is one, else the pinned
    build; ToolsMissing when neither is there."""
    on_path = shutil.which("kind") if prefer_path else None
    if on_path is not None:
        check_kind(on_path, runner)
        return on_path
    pinned = tool_binary("kind")
    if pinned is not None:
        return str(pinned)
    raise ToolsMissing(
        "no kind: install kind v" + ".".join(map(str, MINIMUM)) + " or newer on PATH "
        "(https://kind.sigs.k8s.io), or build the pinned one with `csi-harness tools build kind`"
    )
