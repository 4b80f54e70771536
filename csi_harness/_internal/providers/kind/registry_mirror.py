"""A kind cluster whose nodes pull public names through one registry mirror.

The pattern kind documents for local registries: every node's containerd reads
per-registry ``hosts.toml`` files under ``/etc/containerd/certs.d`` and tries the
mirror listed there before the registry itself. Here the directory is written on the
host and mounted read-only into every node (an ``extraMounts`` entry added to the
cluster's kind configuration), so the nodes have it from their first pull on:

* ``docker.io`` is mirrored at the registry's root, as Docker's own ``registry-mirrors``
  expects a Docker Hub mirror (``library/busybox``, ``kindest/node``);
* every other registry (``registry.k8s.io``) under a path named after it
  (``/v2/registry.k8s.io/sig-storage/csi-provisioner/...``, containerd's
  ``override_path``), the layout ``--csi-images HOST:PORT`` names too.

``csi-harness registry serve`` starts such a mirror on this machine, and
``csi-harness images push --stand-ins`` fills it (docs/images.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CERTS_DIR = "/etc/containerd/certs.d"
DOCKER_HUB = "docker.io"
MIRRORED_REGISTRIES = (DOCKER_HUB, "registry.k8s.io")
UPSTREAM_SERVERS = {
    DOCKER_HUB: "https://registry-1.docker.io",
    "registry.k8s.io": "https://registry.k8s.io",
}

# kind's node images write containerd's configuration in version 2 (containerd 2 migrates
# it), where the CRI plugin is "io.containerd.grpc.v1.cri"; kind merges this into it.
CONTAINERD_PATCHES = (
    '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "' + CERTS_DIR + '"\n',
)

_ADDRESS = re.compile(r"^(?P<host>[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>[0-9]{1,5})$")


class RegistryMirrorError(ValueError):
    """A mirror address that is not ``HOST:PORT``."""


@dataclass(frozen=True)
class MirrorAddress:
    """Where the nodes reach the mirror (plain HTTP, as kind's local-registry guide)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def parse_mirror_address(text: str) -> MirrorAddress:
    match = _ADDRESS.match(text.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        raise RegistryMirrorError(
            f"{text!r} is not HOST:PORT of a registry the nodes can reach (e.g. "
            "csi-mock-registry:5000, the container `csi-harness registry serve` starts)"
        )
    return MirrorAddress(match["host"], int(match["port"]))


LOCAL_NAME = "localhost:5001"
"""The name this machine pushes to (``csi-harness images push --registry localhost:5001``);
the nodes resolve it to the mirror's root, as in kind's guide to local registries."""


def hosts_toml(registry: str, mirror: MirrorAddress) -> str:
    """containerd's ``hosts.toml`` for ``registry``: the mirror first, for pulls and
    resolving, then the registry itself."""
    server = UPSTREAM_SERVERS.get(registry, f"http://{registry}")
    if registry in (DOCKER_HUB, LOCAL_NAME):
        host = f'[host."{mirror.url}"]\n  capabilities = ["pull", "resolve"]\n'
    else:
        host = (
            f'[host."{mirror.url}/v2/{registry}"]\n  capabilities = ["pull", "resolve"]\n'
            "  override_path = true\n"
        )
    return f'server = "{server}"\n\n{host}'


def write_certs_dir(directory: Path, mirror: MirrorAddress) -> Path:
    """Write ``<registry>/hosts.toml`` for every mirrored registry under ``directory``."""
    for registry in (*MIRRORED_REGISTRIES, LOCAL_NAME):
        (directory / registry).mkdir(parents=True, exist_ok=True)
        (directory / registry / "hosts.toml").write_text(hosts_toml(registry, mirror))
    return directory


def with_mirror(config: dict[str, Any], certs_dir: Path) -> dict[str, Any]:
    """``config`` (a kind Cluster configuration) with every node mounting ``certs_dir``
    as containerd's registry configuration, and containerd told to read it."""
    result = dict(config)
    patches = list(result.get("containerdConfigPatches") or [])
    result["containerdConfigPatches"] = [*patches, *CONTAINERD_PATCHES]
    mount = {"hostPath": str(certs_dir), "containerPath": CERTS_DIR, "readOnly": True}
    nodes = [dict(node) for node in (result.get("nodes") or [{"role": "control-plane"}])]
    for node in nodes:
        node["extraMounts"] = [*(node.get("extraMounts") or []), mount]
    result["nodes"] = nodes
    return result
