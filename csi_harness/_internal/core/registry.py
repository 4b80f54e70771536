"""A container registry on loopback, and pushing images into registries.

``serve`` runs go-containerregistry's registry (``crane registry serve``, the pinned
``crane`` of ``tools/crane``) as a Docker container named ``csi-mock-registry``:

* built ``FROM scratch`` here (one layer: the static ``crane`` binary), since no image
  can be pulled on a machine without a registry;
* on a network of its own, its port 5000 published on ``127.0.0.1:5001`` for the host
  (pushes, and Docker's own ``registry-mirrors``); ``connect`` joins it to kind's
  network, where the nodes reach it as ``csi-mock-registry:5000``;
* blobs on disk in the user's cache (``~/.cache/csi-mock/registry``), so a second run
  pushes only what changed; manifests live in the process and are pushed again.

Every request is in the container's log (``pulls``: the pulls by path), which is how
a run shows that an image came from the registry and not from ``kind load``.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from csi_harness._internal.core.cache import user_cache_dir
from csi_harness._internal.core.image_archive import (
    LayerEntry,
    cached_archive,
    content_key,
    image_archive,
    layer_tar,
    resolve_cache_dir,
)

CONTAINER = "csi-mock-registry"
NETWORK = "csi-mock-registry"
HOST_PORT = 5001
PORT = 5000
IMAGE_REPOSITORY = "csi-mock.local/registry"
DATA_DIR = "/var/lib/registry"
KIND_NETWORK = "kind"
PUSHED_MARK = "pushed-until"


class RegistryError(RuntimeError):
    """The registry could not be started, reached or pushed to; the message says why."""


@dataclass(frozen=True)
class Registry:
    """A running registry: ``host_address`` for this machine, ``node_address`` for
    containers on its networks."""

    host_address: str = f"127.0.0.1:{HOST_PORT}"
    node_address: str = f"{CONTAINER}:{PORT}"


def _docker(argv: list[str], *, timeout: float = 120.0, check: bool = True) -> str:
    result = subprocess.run(
        ["docker", *argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise RegistryError(f"`docker {' '.join(argv)}` failed: {result.stderr.strip()}")
    return result.stdout


def registry_image(crane: Path, cache_dir: Path | None = None) -> str:
    """Load the registry image (cached archive keyed by the binary) and return its tag."""
    binary = crane.resolve().read_bytes()
    key = content_key("registry", binary)
    tag = f"{IMAGE_REPOSITORY}:{key[:12]}"

    def build() -> bytes:
        layer = layer_tar([LayerEntry("crane", 0o755, binary)])
        return image_archive(
            layer,
            [tag],
            entrypoint=["/crane", "registry", "serve", "--address", f":{PORT}"],
            cmd=["--disk", DATA_DIR],
        )

    archive = cached_archive(resolve_cache_dir(cache_dir), "registry", key, build)
    if not _docker(["image", "ls", "-q", tag]).strip():
        _docker(["load", "-i", str(archive)])
    return tag


def running() -> bool:
    state = _docker(
        ["container", "inspect", "-f", "{{.State.Running}}", CONTAINER], check=False
    ).strip()
    return state == "true"


def serve(crane: Path, *, data_dir: Path | None = None, timeout: float = 30.0) -> Registry:
    """Start the registry container (or keep the running one) and wait until it
    answers ``/v2/``."""
    registry = Registry()
    if running():
        return registry
    _docker(["rm", "-f", CONTAINER], check=False)
    image = registry_image(crane)
    data = data_dir or user_cache_dir("registry")
    data.mkdir(parents=True, exist_ok=True)
    if not _docker(["network", "ls", "-q", "--filter", f"name=^{NETWORK}$"]).strip():
        _docker(["network", "create", NETWORK])
    _docker(
        [
            "run", "-d", "--name", CONTAINER, "--network", NETWORK,
            "-p", f"127.0.0.1:{HOST_PORT}:{PORT}", "-v", f"{data}:{DATA_DIR}", image,
        ]
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        probe = subprocess.run(
            ["curl", "-fsS", "-o", "/dev/null", f"http://{registry.host_address}/v2/"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            return registry
        last = probe.stderr.strip()
        time.sleep(0.3)
    raise RegistryError(
        f"the registry did not answer on {registry.host_address} within {timeout:.0f}s "
        f"({last}); its log:\n{log()[-2000:]}"
    )


def stop() -> None:
    """Remove the registry container and its network (the blobs stay on disk)."""
    _docker(["rm", "-f", CONTAINER], check=False)
    _docker(["network", "rm", NETWORK], check=False)


def connect(network: str = KIND_NETWORK) -> None:
    """Join the registry to ``network`` (kind's), so that its nodes reach it by name."""
    inspect = _docker(
        ["container", "inspect", "-f", "{{json .NetworkSettings.Networks}}", CONTAINER]
    )
    if f'"{network}"' not in inspect:
        _docker(["network", "connect", network, CONTAINER])


def mark_pushed(data_dir: Path | None = None) -> None:
    """Remember now as the end of the last push, so that ``pulls`` counts only the
    requests after it (a push asks for manifests too)."""
    directory = data_dir or user_cache_dir("registry")
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (directory / PUSHED_MARK).write_text(stamp + "\n")


def pushed_until(data_dir: Path | None = None) -> str | None:
    """The end of the last push, as ``mark_pushed`` wrote it, or None."""
    mark = (data_dir or user_cache_dir("registry")) / PUSHED_MARK
    return mark.read_text().strip() if mark.is_file() else None


def log(since: str | None = None) -> str:
    """The container's output (the registry logs to stderr), from ``since`` on."""
    result = subprocess.run(
        ["docker", "logs", *(["--since", since] if since else []), CONTAINER],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return result.stdout


def pulls(text: str) -> list[str]:
    """The references whose manifests were asked for (``HEAD`` or ``GET``, as containerd
    resolves a tag before it fetches), in order, once each; a fetch by digest is listed
    by its digest."""
    found: dict[str, None] = {}
    for line in text.splitlines():
        for method in ("GET /v2/", "HEAD /v2/"):
            if method in line and "/manifests/" in line:
                # containerd asks a mirror with ?ns=<registry>: the path is what counts.
                path = line.split(method, 1)[1].split()[0].split("?", 1)[0]
                repository, _, tag = path.partition("/manifests/")
                found.setdefault(f"{repository}:{tag}" if ":" not in tag else f"{repository}@{tag}")
    return list(found)


def push_archive(crane: Path, archive: Path, reference: str) -> None:
    """Push a ``docker save`` archive as ``reference`` (plain HTTP on loopback)."""
    result = subprocess.run(
        [str(crane), "push", "--insecure", str(archive), reference],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DOCKER_CONFIG": os.environ.get("DOCKER_CONFIG", "/nonexistent")},
    )
    if result.returncode != 0:
        raise RegistryError(f"crane push {reference} failed: {result.stderr.strip()}")


def push_docker_image(image: str, reference: str) -> None:
    """Push an image of the Docker engine as ``reference``."""
    _docker(["tag", image, reference])
    _docker(["push", "-q", reference], timeout=1800)
