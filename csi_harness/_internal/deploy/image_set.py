"""Which images a session runs, and by what names: one setting for every entry point.

``--csi-images`` (pytest) and ``--images`` (``csi-harness``) take one of:

* ``built``: every image built on this machine from the pinned tools and tagged
  ``csi-mock.local/...`` (``csi_harness._internal.deploy.images``); nothing is pulled.
  The local provider always runs this way, and this project's own CI asks for it.
* ``upstream``: the CSI sidecars by their upstream names at the pinned versions
  (``registry.k8s.io/sig-storage/csi-provisioner:v6.3.0`` ...), the suites' pods on
  busybox by its Docker Hub name, pulled by the nodes as any user's cluster pulls them.
  The default on kind and existing clusters.
* a registry prefix ``HOST[:PORT][/PATH]``: the same images by their upstream
  reference under that prefix (``R/registry.k8s.io/sig-storage/csi-provisioner:v6.3.0``,
  ``R/docker.io/library/busybox:1.37.0``), for a mirror inside a company network.

The csi-mock image itself is never pulled from a public registry: it is built from the
installed package (``docker build`` on the Dockerfile's public Python base in
``upstream`` mode), or named with ``--csi-driver-image`` by users who publish their own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from csi_harness._internal.deploy.images import SIDECARS, default_sidecar_images, sidecar_version

BUILT = "built"
UPSTREAM = "upstream"

SIDECAR_REGISTRY = "registry.k8s.io/sig-storage"
BUSYBOX_UPSTREAM = "docker.io/library/busybox:1.37.0"
"""The suites' pod image in ``upstream`` mode: a pinned busybox by its public name."""
BUSYBOX_BUILT = "csi-mock.local/busybox:1"
PYTHON_BASE_UPSTREAM = "docker.io/library/python:3.11-slim"
"""The Dockerfile's default base (``ARG BASE_IMAGE``), which ``upstream`` mode builds on."""
KIND_NODE_REPOSITORY = "docker.io/kindest/node"

_REGISTRY_PREFIX = re.compile(
    r"^(?P<host>[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)"
    r"(:(?P<port>[0-9]{1,5}))?(?P<path>(/[a-z0-9]+([._-][a-z0-9]+)*)*)$"
)


class ImageSourceError(ValueError):
    """An image source that is neither ``built``, ``upstream`` nor a registry prefix."""


@dataclass(frozen=True)
class ImageSource:
    """``built``, ``upstream``, or ``upstream`` under a registry ``prefix``."""

    kind: str
    prefix: str | None = None

    def __str__(self) -> str:
        return self.prefix or self.kind

    @property
    def pulls(self) -> bool:
        """Whether the nodes pull the sidecars and the pod image (not ``built``)."""
        return self.kind != BUILT

    def name(self, upstream_reference: str) -> str:
        """The name this source gives an image whose public reference is
        ``upstream_reference`` (``registry.k8s.io/...``, ``docker.io/library/...``)."""
        if self.prefix is None:
            return upstream_reference
        return f"{self.prefix}/{upstream_reference}"


def parse_image_source(text: str) -> ImageSource:
    """``built``, ``upstream`` or a registry prefix (``mirror.example.com:5000/k8s``);
    anything else is an ``ImageSourceError`` that says what is accepted."""
    value = text.strip()
    if value in (BUILT, UPSTREAM):
        return ImageSource(value)
    match = _REGISTRY_PREFIX.match(value)
    # A bare word ("upstrem") is a typo, not a registry: a prefix names a host, so it has
    # a dot, a port or is localhost.
    if match is None or not ("." in match["host"] or match["port"] or match["host"] == "localhost"):
        raise ImageSourceError(
            f"{text!r} is not an image source: say 'built' (images built here from the "
            "pinned tools), 'upstream' (the sidecars from registry.k8s.io, busybox from "
            "Docker Hub) or a registry prefix such as 'mirror.example.com:5000/k8s' "
            "(every upstream image under it)"
        )
    if match["port"] and not 0 < int(match["port"]) < 65536:
        raise ImageSourceError(f"{text!r}: port {match['port']} is out of range")
    return ImageSource(UPSTREAM, prefix=value)


def upstream_sidecar(sidecar: str) -> str:
    """The upstream reference of a sidecar at its pinned version."""
    return f"{SIDECAR_REGISTRY}/{sidecar}:{sidecar_version(sidecar)}"


def upstream_references() -> dict[str, str]:
    """Every image ``upstream`` mode pulls by its public name: the sidecars and the
    snapshot-controller, and ``busybox`` (the suites' pods)."""
    references = {sidecar: upstream_sidecar(sidecar) for sidecar in SIDECARS}
    references["busybox"] = BUSYBOX_UPSTREAM
    return references


def kind_node_image(kubernetes_version: str) -> str:
    """kind's stock node image of a Kubernetes version (``kindest/node:v1.37.1``)."""
    return f"{KIND_NODE_REPOSITORY}:{kubernetes_version}"


@dataclass(frozen=True)
class ImageSet:
    """The names a session's deployments and pods use.

    ``driver`` is None when the provider builds csi-mock's image itself (kind: built
    and loaded; the local provider runs the driver as a process)."""

    source: ImageSource
    sidecars: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    busybox: str = BUSYBOX_BUILT
    driver: str | None = None

    @property
    def pull_policy(self) -> str:
        """The pods' ``imagePullPolicy``: never pull what was built here (so that a
        missing image fails at once), pull a public name only when it is missing."""
        return "IfNotPresent" if self.source.pulls else "Never"


def image_set(source: ImageSource, driver: str | None = None) -> ImageSet:
    """The names of ``source``'s images; ``driver`` as given (``--csi-driver-image``)."""
    if not source.pulls:
        return ImageSet(source, MappingProxyType(default_sidecar_images()), BUSYBOX_BUILT, driver)
    sidecars = {sidecar: source.name(upstream_sidecar(sidecar)) for sidecar in SIDECARS}
    return ImageSet(source, MappingProxyType(sidecars), source.name(BUSYBOX_UPSTREAM), driver)
