"""The kind configuration a cluster is created from: the user's (or csi-harness's)
file, with what this run needs on top, written beside the cluster's kubeconfig.

* kind's own CNI is kept when the node image carries it (every stock ``kindest/node``)
  and turned off when it does not (csi-mock's offline image: the harness networks the
  pods itself, ``csi_harness._internal.providers.kind.network``); such an image has no
  CoreDNS image either, so kubeadm is told to skip its CoreDNS addon: a CoreDNS pod
  would try to pull its image for about 50 s a try, and the kubelet pulls one image at
  a time, so every other pull on its node would wait behind it;
* with a registry mirror, every node mounts containerd's per-registry configuration
  (``csi_harness._internal.providers.kind.registry_mirror``);
* relative ``extraMounts`` host paths are made absolute against the original file's
  directory, since the written file lives elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from csi_harness._internal.providers.kind.registry_mirror import (
    MirrorAddress,
    with_mirror,
    write_certs_dir,
)

SKIP_COREDNS = "kind: InitConfiguration\nskipPhases:\n  - preflight\n  - addon/coredns\n"
"""A kubeadm patch (any API version) that leaves CoreDNS out of the cluster. kind runs
``kubeadm init --skip-phases=preflight``, and a configuration's ``skipPhases`` takes
the flag's place, so the list repeats ``preflight`` (without it kubeadm's preflight
checks run and fail on this VM's cgroup v1)."""


def effective_config(
    source: Path, *, kind_cni: bool, mirror: MirrorAddress | None, workdir: Path
) -> dict[str, Any]:
    """``source`` as this run creates it (see the module's docstring)."""
    config: dict[str, Any] = yaml.safe_load(source.read_text()) or {}
    networking = dict(config.get("networking") or {})
    if kind_cni:
        networking.pop("disableDefaultCNI", None)
    else:
        networking["disableDefaultCNI"] = True
    if networking:
        config["networking"] = networking
    else:
        config.pop("networking", None)
    if not kind_cni:
        patches = list(config.get("kubeadmConfigPatches") or [])
        config["kubeadmConfigPatches"] = [*patches, SKIP_COREDNS]
    nodes = []
    for node in config.get("nodes") or [{"role": "control-plane"}]:
        node = dict(node)
        mounts = []
        for mount in node.get("extraMounts") or []:
            mount = dict(mount)
            if "hostPath" in mount and not Path(mount["hostPath"]).is_absolute():
                mount["hostPath"] = str((source.parent / mount["hostPath"]).resolve())
            mounts.append(mount)
        if mounts:
            node["extraMounts"] = mounts
        nodes.append(node)
    config["nodes"] = nodes
    if mirror is not None:
        config = with_mirror(config, write_certs_dir(workdir / "certs.d", mirror))
    return config


def write_effective_config(
    source: Path, *, kind_cni: bool, mirror: MirrorAddress | None, workdir: Path
) -> Path:
    """Write ``effective_config`` to ``workdir/kind-config.yaml`` and return its path."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = effective_config(source, kind_cni=kind_cni, mirror=mirror, workdir=workdir)
    path = workdir / "kind-config.yaml"
    path.write_text(
        f"# made by csi-harness from {source}\n" + yaml.safe_dump(config, sort_keys=False)
    )
    return path
