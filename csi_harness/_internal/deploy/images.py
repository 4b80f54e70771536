"""The images an in-cluster deployment runs, built here: nothing can be pulled.

* the driver, ``csi-mock.local/csi-mock:dev``, from the repository's Dockerfile on a
  debootstrapped Python base (``docker/engine.sh base``);
* the CSI sidecars, one static binary each from the pinned tools
  (``tools/build.sh``), as one-layer archives (``csi_harness._internal.core.images``) tagged
  ``csi-mock.local/<sidecar>:<version>``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from importlib.resources import files
from pathlib import Path

from csi_harness._internal.core.commands import CommandFailed, run_command
from csi_harness._internal.core.image_archive import (
    LayerEntry,
    LocalImage,
    cached_archive,
    content_key,
    image_archive,
    layer_tar,
    resolve_cache_dir,
)
from csi_harness._internal.core.package_data import (
    DATA_DIR,
    DOCKER_ENGINE_SCRIPT,
    DOCKERFILE,
    TOOLS_SCRIPT,
)
from csi_harness._internal.core.tools import Tools

DRIVER_IMAGE = "csi-mock.local/csi-mock:dev"
BASE_IMAGE = "csi-mock.local/python-base:bookworm"
SIDECARS = (
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "snapshot-controller",
)
"""Images from pinned binaries: the CSI sidecars, and the cluster's snapshot-controller."""


class DriverImageError(RuntimeError):
    """The driver image could not be built; the message has the cause and the fix."""


@functools.cache
def _pinned_versions() -> dict[str, str]:
    """Unit and binary -> pinned version, from ``tools/build.sh list`` (read once)."""
    out = subprocess.run(
        ["bash", str(TOOLS_SCRIPT), "list"], capture_output=True, text=True, check=True
    ).stdout
    versions: dict[str, str] = {}
    for line in out.splitlines():
        fields = line.split()  # unit, module, version, binaries[, UNAVAILABLE]
        if len(fields) >= 3:
            for name in (fields[0], *fields[3:]):
                versions.setdefault(name, fields[2])
    return versions


def pinned_version(name: str) -> str:
    """The pinned version of a tool unit or binary (``kubernetes``, ``csi-provisioner``),
    as ``tools/build.sh list`` reads it from the pins (no Go needed)."""
    try:
        return _pinned_versions()[name]
    except KeyError:
        raise DriverImageError(f"{TOOLS_SCRIPT} list does not name {name}") from None


def sidecar_version(sidecar: str) -> str:
    return pinned_version(sidecar)


def sidecar_tag(sidecar: str) -> str:
    return f"csi-mock.local/{sidecar}:{sidecar_version(sidecar)}"


def default_sidecar_images() -> dict[str, str]:
    """Sidecar -> the tag ``build_sidecar_images`` gives it (what a cluster's nodes must
    hold for an in-cluster deployment)."""
    return {sidecar: sidecar_tag(sidecar) for sidecar in SIDECARS}


def build_sidecar_images(tools: Tools, cache_dir: Path | None = None) -> dict[str, LocalImage]:
    """Sidecar name -> its image archive (cached by binary content and tag)."""
    images = {}
    for sidecar in SIDECARS:
        binary = Path(os.path.realpath(tools[sidecar])).read_bytes()
        tag = sidecar_tag(sidecar)
        key = content_key(sidecar, binary, tag.encode())

        def build(binary: bytes = binary, sidecar: str = sidecar, tag: str = tag) -> bytes:
            layer = layer_tar([LayerEntry(sidecar, 0o755, binary)])
            return image_archive(layer, [tag], entrypoint=[f"/{sidecar}"])

        path = cached_archive(resolve_cache_dir(cache_dir), sidecar, key, build)
        images[sidecar] = LocalImage(sidecar, (tag,), path)
    return images


def build_driver_image(tag: str = DRIVER_IMAGE, base: str = BASE_IMAGE) -> str:
    """``docker build`` of the Dockerfile on ``base`` (built first when missing), on the
    host network (the build installs csi-mock's dependencies from PyPI)."""
    if base == BASE_IMAGE:
        _run(["bash", str(DOCKER_ENGINE_SCRIPT), "base"], "building the Python base image")
    with tempfile.TemporaryDirectory(prefix="csi-mock-image-") as context:
        driver_build_context(Path(context))
        build = ["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}"]
        _run([*build, "-t", tag, context], f"building {tag} from the Dockerfile")
    return tag


def driver_build_context(directory: Path) -> None:
    """What the Dockerfile copies, taken from the installed packages (so an installed
    csi-mock builds its image as a source tree does): the Dockerfile, pyproject.toml
    and the driver package, without the harness."""
    shutil.copy(DOCKERFILE, directory / "Dockerfile")
    shutil.copy(DATA_DIR / "pyproject.toml", directory / "pyproject.toml")
    shutil.copytree(
        Path(str(files("csi_mock"))),
        directory / "csi_mock",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def _run(argv: list[str], what: str) -> None:
    try:
        run_command(argv)
    except CommandFailed as exc:
        raise DriverImageError(f"{what} failed: {exc}") from exc
