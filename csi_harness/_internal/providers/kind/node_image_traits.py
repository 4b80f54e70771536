"""What a kind node image carries, read from the image before a cluster is made of it:
its Kubernetes version (``/kind/version``) and whether it brings kind's own CNI
(``/kind/manifests/default-cni.yaml``, with kindnetd and CoreDNS preloaded, as every
stock ``kindest/node`` image does) or not (csi-mock's offline image: the harness then
networks the pods itself and leaves CoreDNS off)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

CNI_MANIFEST = "/kind/manifests/default-cni.yaml"
PULL_TIMEOUT = 600.0


class NodeImageUnusable(RuntimeError):
    """The node image cannot be pulled or does not fit; the message says why and the fix."""


@dataclass(frozen=True)
class NodeImageTraits:
    image: str
    kubernetes_version: str
    carries_cni: bool


def _docker(argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *argv], capture_output=True, text=True, check=False, timeout=timeout
    )


def ensure_local(image: str) -> None:
    """Pull ``image`` unless the engine has it; a failed pull is NodeImageUnusable with
    Docker's own message."""
    if _docker(["image", "inspect", image]).returncode == 0:
        return
    pulled = _docker(["pull", image], timeout=PULL_TIMEOUT)
    if pulled.returncode != 0:
        raise NodeImageUnusable(
            f"node image {image} cannot be pulled: {pulled.stderr.strip() or pulled.stdout.strip()}"
            "\nname one that exists with --csi-node-image (pytest) or --node-image (csi-harness), "
            "or build csi-mock's offline image with --csi-images built"
        )


def read_traits(image: str) -> NodeImageTraits:
    """The traits of ``image`` (pulled first when missing)."""
    ensure_local(image)
    probe = _docker(
        [
            "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c",
            f"echo \"$(cat /kind/version)\"; test -f {CNI_MANIFEST} && echo cni || echo no-cni",
        ]
    )  # fmt: skip
    lines = probe.stdout.split()
    if probe.returncode != 0 or len(lines) != 2:
        raise NodeImageUnusable(
            f"{image} is not a kind node image (no /kind/version): "
            f"{probe.stderr.strip() or probe.stdout.strip()}"
        )
    return NodeImageTraits(image, lines[0], lines[1] == "cni")


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split(".")[:2])


def check_version(traits: NodeImageTraits, pinned: str) -> None:
    """NodeImageUnusable unless the image runs the pinned Kubernetes minor version
    (a patch release or a build of that branch is fine)."""
    if _minor(traits.kubernetes_version) != _minor(pinned):
        raise NodeImageUnusable(
            f"node image {traits.image} runs Kubernetes {traits.kubernetes_version}, not "
            f"{_minor(pinned)}.x (pinned: {pinned}) that the suites are written for: use "
            f"kindest/node:{pinned} (the default) or a node image of that minor version"
        )
