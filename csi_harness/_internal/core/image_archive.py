"""The one-layer image archives the harness builds without a registry, and their cache.

An archive is in ``docker save`` format (``manifest.json``, the config blob and one
uncompressed ``<diff-id>/layer.tar``), which ``ctr images import`` and registries'
clients accept. Archives are byte-for-byte deterministic (sorted entries, mtime 0, owner
0:0, canonical JSON), so their digests are stable. Each is cached as
``<name>-<key>.tar`` where the key hashes every input and the recipe version, and is
rebuilt only when an input changes. No OCI ``oci-layout`` is written on purpose:
containerd prefers it over ``manifest.json`` and would then ignore the full names in
``RepoTags``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.cache import user_cache_dir

# Bump when the way archives are laid out changes, to invalidate every cached image.
RECIPE = 1

_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_EPOCH = "1970-01-01T00:00:00Z"
_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class ImageBuildError(RuntimeError):
    """An image could not be built; the message says which input is missing or broken."""


@dataclass(frozen=True)
class LocalImage:
    """A built image archive and the names it carries."""

    name: str
    tags: tuple[str, ...]
    tarball: Path

    @property
    def reference(self) -> str:
        """The first tag, the one pods should use."""
        return self.tags[0]


@dataclass(frozen=True)
class LayerEntry:
    """One file, directory or symlink of a layer; ``path`` is relative, without a leading /."""

    path: str
    mode: int
    data: bytes = b""
    directory: bool = False
    link_target: str | None = None


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/csi-mock/images``, falling back to ``~/.cache/csi-mock/images``."""
    return user_cache_dir("images")


def layer_tar(entries: Iterable[LayerEntry]) -> bytes:
    """An uncompressed, deterministic layer tarball: sorted, mtime 0, owned by 0:0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(entries, key=lambda e: e.path.split("/")):
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if entry.directory:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.link_target is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = entry.link_target
                tar.addfile(info)
            else:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


def image_archive(
    layer: bytes,
    tags: Sequence[str],
    *,
    entrypoint: Sequence[str] | None = None,
    cmd: Sequence[str] | None = None,
    env: Sequence[str] = (_PATH_ENV,),
) -> bytes:
    """A one-layer ``docker save`` archive of ``layer`` carrying ``tags``."""
    diff_id = hashlib.sha256(layer).hexdigest()
    container_config: dict[str, object] = {"Env": list(env), "WorkingDir": "/"}
    if entrypoint is not None:
        container_config["Entrypoint"] = list(entrypoint)
    if cmd is not None:
        container_config["Cmd"] = list(cmd)
    config = _canonical_json(
        {
            "architecture": host_architecture(),
            "os": "linux",
            "created": _EPOCH,
            "config": container_config,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [
                # The module's name before image_archive.py was split from it: a new name
                # here would change every image's digest.
                {"created": _EPOCH, "created_by": "csi-mock csi_harness/_internal/core/images.py"}
            ],
        }
    )
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    layer_name = f"{diff_id}/layer.tar"
    manifest = _canonical_json(
        [{"Config": config_name, "RepoTags": list(tags), "Layers": [layer_name]}]
    )
    return layer_tar(
        [
            LayerEntry(diff_id, 0o755, directory=True),
            LayerEntry(layer_name, 0o644, layer),
            LayerEntry(config_name, 0o644, config),
            LayerEntry("manifest.json", 0o644, manifest),
        ]
    )


def host_architecture() -> str:
    """The host's architecture in OCI terms (``amd64``, ``arm64``)."""
    machine = platform.machine()
    try:
        return _GO_ARCH[machine]
    except KeyError:
        raise ImageBuildError(f"unsupported host architecture {machine!r}") from None


def resolve_cache_dir(cache_dir: Path | None) -> Path:
    return cache_dir if cache_dir is not None else default_cache_dir()


def content_key(name: str, *inputs: bytes) -> str:
    digest = hashlib.sha256(f"recipe={RECIPE} image={name} arch={host_architecture()}".encode())
    for part in inputs:
        # Length-prefixed so that no two different input lists hash alike.
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:16]


def cached_archive(cache_dir: Path, name: str, key: str, build: Callable[[], bytes]) -> Path:
    target = cache_dir / f"{name}-{key}.tar"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    data = build()
    fd, temporary = tempfile.mkstemp(dir=cache_dir, prefix=f".{name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
