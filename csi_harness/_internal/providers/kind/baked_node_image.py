"""A node image that starts with the suites' built images in its containerd, so that a
kind cluster needs no ``kind load`` at bring-up.

``kind load`` saves each image, copies it into every node and imports it there: with
the seven built images and four nodes it took 46 s of an 86 s bring-up on two cores
(docs/benchmarks.md), and it is paid again by every cluster. Baking pays it once per
set of images: the node image's ``/var/lib/containerd`` is copied out, the pinned
containerd on the host imports the archives into it (pinned, in the ``k8s.io``
namespace, as the control-plane images of ``node_image`` are), and what the import
added or changed becomes one more layer on the node image (``docker build`` with ``ADD``
of a tar, which keeps owners and modes). What the import's garbage collection removes
(blobs no image refers to) stays in the lower layer, unreferenced, as it is in the node
image. Every node then starts with the images present, as it does with kubeadm's.

The images are stored, not unpacked: an unpacked snapshot of a layered image holds
overlay whiteouts (character devices), and ``ADD`` may not make device nodes on this
VM ("operation not permitted"). A new cluster's nodes unpack them while ``kind create``
runs (``unpacked_images``), not under the first drivers.

The tag says what is in it: ``<node image tag>-images-<key>``, the key hashing this
recipe, the node image's ID and every archive's name and size (each archive's file
name carries its content key) or image ID. An image of the same node image with other
contents is removed when a new one is made (unless a container still uses it).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.image_archive import LocalImage
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.providers.kind.node_image import (
    BAKED_TAG_SEPARATOR,
    NodeImageError,
    docker_has,
    import_into_rootfs,
    scratch_dir,
    short_hash,
)

CONTAINERD_ROOT = "var/lib/containerd"


@dataclass(frozen=True)
class BakedImage:
    tag: str
    cached: bool
    seconds: float


@dataclass(frozen=True)
class FileState:
    """What a file of the containerd root was before the import, to find what changed."""

    mode: int
    size: int
    mtime_ns: int
    link: str | None


def bake_images(
    tools: Tools,
    node_image: str,
    archives: Sequence[LocalImage],
    docker_images: Sequence[str] = (),
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> BakedImage:
    """``node_image`` with ``archives`` and the Docker engine's ``docker_images`` in its
    containerd; built unless Docker has it already."""
    started = time.monotonic()
    docker_ids = [_image_id(image) for image in docker_images]
    key = baked_key(
        Path(__file__).read_text(),
        _image_id(node_image),
        [(a.tarball.name, a.tarball.stat().st_size) for a in archives],
        docker_ids,
    )
    tag = f"{node_image}{BAKED_TAG_SEPARATOR}{key}"
    if docker_has(tag):
        return BakedImage(tag, True, time.monotonic() - started)
    progress(f"node image: baking {len(archives) + len(docker_images)} images into {tag}")
    with tempfile.TemporaryDirectory(prefix="csi-mock-bake-", dir=scratch_dir()) as tmp:
        work = Path(tmp)
        root = work / "rootfs"
        (root / CONTAINERD_ROOT).parent.mkdir(parents=True)
        _copy_containerd_root(node_image, root)
        before = snapshot(root, CONTAINERD_ROOT)
        saved = [
            _docker_save(image, work / f"docker-{n}.tar") for n, image in enumerate(docker_images)
        ]
        # Content only (see the module's docstring).
        import_into_rootfs(tools, root, [*archives, *saved], work / "containerd", unpack=False)
        changes = changed_paths(before, snapshot(root, CONTAINERD_ROOT))
        context = work / "context"
        context.mkdir()
        _write_layer(root, changes, context / "images.tar")
        (context / "Dockerfile").write_text(f"FROM {node_image}\nADD images.tar /\n")
        _docker(["build", "-q", "-t", tag, str(context)], f"docker build of {tag}")
    _remove_other_bakes(node_image, keep=tag)
    return BakedImage(tag, False, time.monotonic() - started)


def baked_key(
    recipe: str,
    node_image_id: str,
    archives: Iterable[tuple[str, int]],
    docker_image_ids: Iterable[str],
) -> str:
    """What a baked image is made of, as a short hash (its tag's suffix)."""
    parts = [recipe, node_image_id]
    parts += [f"{name}:{size}" for name, size in archives]
    parts += list(docker_image_ids)
    return short_hash(parts)


def snapshot(root: Path, relative: str) -> dict[str, FileState]:
    """Every path under ``root/relative`` (relative to ``root``) and its state."""
    states: dict[str, FileState] = {}
    top = root / relative
    for directory, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            link = os.readlink(path) if os.path.islink(path) else None
            states[os.path.relpath(path, root)] = FileState(
                info.st_mode, info.st_size, info.st_mtime_ns, link
            )
    return states


def changed_paths(before: Mapping[str, FileState], after: Mapping[str, FileState]) -> list[str]:
    """The paths that are new or changed in ``after``, parents before children.

    Paths that are gone are not in the list: a layer added with ``ADD`` cannot remove
    them, and the only ones the import removes are content blobs that no image refers
    to (containerd's garbage collection, which the node's containerd would do too)."""
    return sorted(path for path, state in after.items() if before.get(path) != state)


# -- steps ------------------------------------------------------------------------------


def _copy_containerd_root(node_image: str, root: Path) -> None:
    """The node image's /var/lib/containerd into ``root``, owners and modes kept."""
    container = _docker(["create", node_image], f"docker create {node_image}").strip()
    try:
        copy = subprocess.Popen(
            ["docker", "cp", f"{container}:/{CONTAINERD_ROOT}", "-"], stdout=subprocess.PIPE
        )
        try:
            untar = subprocess.run(
                ["tar", "--numeric-owner", "-C", str((root / CONTAINERD_ROOT).parent),
                 "-xf", "-"],
                stdin=copy.stdout, capture_output=True, text=True, check=False,
            )  # fmt: skip
        finally:
            if copy.stdout is not None:
                copy.stdout.close()
            copy.wait()
        if copy.returncode != 0 or untar.returncode != 0:
            raise NodeImageError(
                f"copying /{CONTAINERD_ROOT} out of {node_image} failed: {untar.stderr.strip()}"
            )
    finally:
        subprocess.run(["docker", "rm", container], capture_output=True, check=False)


def _docker_save(image: str, target: Path) -> LocalImage:
    _docker(["save", "-o", str(target), image], f"docker save {image}")
    return LocalImage(image.rsplit("/", 1)[-1].split(":", 1)[0], (image,), target)


def _write_layer(root: Path, paths: Sequence[str], target: Path) -> None:
    listing = target.with_suffix(".list")
    listing.write_text("".join(f"{path}\n" for path in paths))
    result = subprocess.run(
        ["tar", "--numeric-owner", "--no-recursion", "-C", str(root), "-cf", str(target),
         "-T", str(listing)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise NodeImageError(f"writing the images layer failed: {result.stderr.strip()}")


def _remove_other_bakes(node_image: str, *, keep: str) -> None:
    """Earlier baked images of ``node_image`` (about a gigabyte each); one still used by a
    container stays (``docker rmi`` refuses it)."""
    repository, _, base_tag = node_image.rpartition(":")
    listed = _docker(
        ["images", "--format", "{{.Repository}}:{{.Tag}}", repository], "docker images"
    )
    for image in listed.split():
        if image != keep and image.startswith(f"{repository}:{base_tag}{BAKED_TAG_SEPARATOR}"):
            subprocess.run(["docker", "rmi", image], capture_output=True, check=False)


# -- small pieces -----------------------------------------------------------------------


def _image_id(image: str) -> str:
    argv = ["image", "inspect", "--format", "{{.Id}}", image]
    return _docker(argv, f"docker inspect {image}").strip()


def _docker(argv: Sequence[str], what: str) -> str:
    result = subprocess.run(["docker", *argv], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NodeImageError(f"{what} failed: {result.stderr.strip()}")
    return result.stdout
