"""Putting images into a registry: csi-mock's own for any cluster, and, for a mirror
with no way out, stand-ins for the public images built here.

* ``push_driver``: csi-mock's image, built from the installed package on the
  Dockerfile's public Python base, pushed as ``REGISTRY/csi-mock:<version>`` (what
  ``--csi-driver-image`` then names);
* ``push_stand_ins``: the sidecars, snapshot-controller, busybox and the Python base,
  built from the pinned tools and Debian, pushed under their upstream references in the
  layout of ``csi_harness._internal.providers.kind.registry_mirror``: Docker Hub names at
  the registry's root (``library/busybox:1.37.0``) and again under ``docker.io/``,
  every other registry under its host (``registry.k8s.io/sig-storage/...``). They are
  stand-ins: the same names as upstream, other bytes. This project's CI proves the
  ``upstream`` path through them, not against the public registries.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from csi_harness._internal.core import registry
from csi_harness._internal.core.commands import run_command
from csi_harness._internal.core.images import build_busybox_image
from csi_harness._internal.core.package_data import DOCKER_ENGINE_SCRIPT
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.deploy.image_set import (
    BUSYBOX_UPSTREAM,
    PYTHON_BASE_UPSTREAM,
    upstream_sidecar,
)
from csi_harness._internal.deploy.images import (
    BASE_IMAGE,
    DRIVER_IMAGE,
    SIDECARS,
    build_driver_image,
    build_sidecar_images,
)

DOCKER_HUB = "docker.io/"


def mirror_paths(reference: str) -> list[str]:
    """Where a mirror of ``registry_mirror``'s layout keeps ``reference``: a Docker Hub
    name at the root and under ``docker.io/``, any other under its registry host."""
    if reference.startswith(DOCKER_HUB):
        return [reference.removeprefix(DOCKER_HUB), reference]
    return [reference]


def driver_reference(registry_prefix: str) -> str:
    """The name ``push_driver`` gives csi-mock's image under ``registry_prefix``."""
    return f"{registry_prefix}/csi-mock:{metadata.version('csi-mock')}"


def push_driver(
    registry_prefix: str, *, base: str = PYTHON_BASE_UPSTREAM, progress: Callable[[str], None]
) -> str:
    """Build csi-mock's image on ``base`` and push it; return the name pushed."""
    reference = driver_reference(registry_prefix)
    progress(f"building {DRIVER_IMAGE} on {base}")
    build_driver_image(DRIVER_IMAGE, base=base)
    progress(f"pushing {reference}")
    registry.push_docker_image(DRIVER_IMAGE, reference)
    return reference


def push_stand_ins(
    registry_prefix: str, tools: Tools, crane: Path, *, progress: Callable[[str], None]
) -> list[str]:
    """Push the stand-ins (see the module's docstring); return every name pushed."""
    pushed: list[str] = []

    def push_archive(archive: Path, reference: str) -> None:
        for path in mirror_paths(reference):
            registry.push_archive(crane, archive, f"{registry_prefix}/{path}")
            pushed.append(f"{registry_prefix}/{path}")

    sidecars = build_sidecar_images(tools)
    for sidecar in SIDECARS:
        push_archive(sidecars[sidecar].tarball, upstream_sidecar(sidecar))
    push_archive(build_busybox_image().tarball, BUSYBOX_UPSTREAM)
    run_command(["bash", str(DOCKER_ENGINE_SCRIPT), "base"])
    for path in mirror_paths(PYTHON_BASE_UPSTREAM):
        registry.push_docker_image(BASE_IMAGE, f"{registry_prefix}/{path}")
        pushed.append(f"{registry_prefix}/{path}")
    progress(f"pushed {len(pushed)} stand-ins to {registry_prefix}")
    return pushed
