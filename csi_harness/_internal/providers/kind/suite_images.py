"""Which images a kind cluster's nodes are given, and how: ``built`` images (the driver,
the sidecars and busybox, built here) are baked into the node image
(``baked_node_image``) or, for a cluster made elsewhere, ``kind load``ed; in a mode
where the nodes pull (``upstream`` or a registry prefix), only csi-mock's own image may
be loaded."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from csi_harness._internal.core.image_archive import LocalImage
from csi_harness._internal.core.images import build_busybox_image
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.deploy.images import (
    DRIVER_IMAGE,
    build_driver_image,
    build_sidecar_images,
)
from csi_harness._internal.providers.kind.kind_cli import ImageArchive, KindCli


@dataclass(frozen=True)
class SuiteImages:
    """The images built here for the suites: archives (busybox, the sidecars), the
    driver's image in the Docker engine, and the sidecar -> image map the deployments
    use."""

    archives: tuple[LocalImage, ...]
    driver: str
    sidecars: Mapping[str, str]

    @property
    def references(self) -> list[str]:
        """Every image's name as the nodes know it: the driver's, then the archives'."""
        return [self.driver, *(archive.reference for archive in self.archives)]


def build_suite_images(
    tools: Tools, progress: Callable[[str], None] = lambda _: None
) -> SuiteImages:
    """Build (or find cached) the driver, sidecar and busybox images."""
    progress("building the driver, sidecar and test pod images")
    # The suites' pods run the local busybox image: nothing can be pulled.
    sidecars = build_sidecar_images(tools)
    return SuiteImages(
        archives=(build_busybox_image(), *sidecars.values()),
        driver=build_driver_image(DRIVER_IMAGE),
        sidecars={sidecar: image.reference for sidecar, image in sidecars.items()},
    )


def load_suite_images(
    cli: KindCli, tools: Tools, progress: Callable[[str], None] = lambda _: None
) -> dict[str, str]:
    """Build the driver, sidecar and busybox images and load them into the nodes of
    ``cli``'s cluster; return sidecar -> image. For clusters made by hand too."""
    images = build_suite_images(tools, progress)
    progress("loading them into the nodes")
    for archive in images.archives:
        cli.load_image(ImageArchive(archive.tarball))
    cli.load_image(images.driver)
    return dict(images.sidecars)


def driver_image_to_load(
    given: str | None, build: Callable[[], str], is_local: Callable[[str], bool]
) -> tuple[str, bool]:
    """csi-mock's image for a cluster whose nodes pull the rest, and whether to load it
    into the nodes: one built here always is (no registry has it); one the user names
    is when the engine has it and its name names no registry (else the nodes pull it)."""
    if given is None:
        return build(), True
    return given, not names_a_registry(given) and is_local(given)


def names_a_registry(image: str) -> bool:
    """Whether ``image`` names its registry (``localhost:5001/x``, ``ghcr.io/x``): such a
    name is meant to be pulled by the nodes, so it is never loaded into them."""
    first, _, rest = image.partition("/")
    return bool(rest) and ("." in first or ":" in first or first == "localhost")


def driver_image_is_local(image: str) -> bool:
    """Whether the Docker engine has ``image`` (else the nodes pull it)."""
    return (
        subprocess.run(
            ["docker", "image", "inspect", image], capture_output=True, check=False
        ).returncode
        == 0
    )
