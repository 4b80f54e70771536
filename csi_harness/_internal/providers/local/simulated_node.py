"""One simulated node (``node_simulator``): what it holds of the drivers registered on
it, the Node object and status it shows, and the plugin sockets in its registry."""

from __future__ import annotations

import asyncio
import datetime
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ATTACH_DETACH_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"


def plugin_sockets(registry: Path) -> dict[Path, tuple[int, int]]:
    """The sockets in a plugins registry, each with its (inode, ctime): what tells a
    socket made anew at the same path from the one registered before."""
    sockets: dict[Path, tuple[int, int]] = {}
    for path in registry.iterdir():
        try:
            info = path.lstat()
        except FileNotFoundError:  # removed since the listing
            continue
        if stat.S_ISSOCK(info.st_mode):
            sockets[path] = (info.st_ino, info.st_ctime_ns)
    return sockets


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SimulatedNode:
    name: str
    labels: dict[str, str]
    plugins_registry: Path
    capacity: dict[str, str]
    kubelet_version: str
    registered: dict[Path, str] = field(default_factory=dict)  # socket -> driver name
    socket_ids: dict[Path, tuple[int, int]] = field(default_factory=dict)
    """Socket -> (inode, ctime) when it was registered: a socket made anew at the same
    path (a plugin registering again) is registered again, as the kubelet does."""
    endpoints: dict[str, str] = field(default_factory=dict)  # driver name -> CSI endpoint
    allocatable_checked: dict[str, float] = field(default_factory=dict)
    """Driver name -> monotonic time NodeGetInfo was last asked for allocatable.count."""
    csinode_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held over each read-modify-write of the CSINode's driver list: the plugin watch
    and the allocatable refresh both rewrite it, and a merge patch replaces the list."""

    def node_object(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **self.labels,
                },
                "annotations": {ATTACH_DETACH_ANNOTATION: "true"},
            },
            "spec": {},
        }

    def status(self) -> dict[str, Any]:
        now = _now()

        def condition(kind: str, value: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": kind,
                "status": value,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }

        return {
            "status": {
                "capacity": self.capacity,
                "allocatable": self.capacity,
                "conditions": [
                    condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated"),
                    condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated"),
                    condition("PIDPressure", "False", "KubeletHasSufficientPID", "simulated"),
                    condition("Ready", "True", "KubeletReady", "simulated node (csi-harness)"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": self.name},
                ],
                "nodeInfo": {
                    "machineID": self.name,
                    "systemUUID": self.name,
                    "bootID": self.name,
                    "kernelVersion": "simulated",
                    "osImage": "csi-harness simulated node",
                    "containerRuntimeVersion": "simulated://0",
                    "kubeletVersion": self.kubelet_version,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            }
        }
