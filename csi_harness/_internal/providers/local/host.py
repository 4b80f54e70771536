"""Host-side probes and set-up of the local cluster: health endpoints, node readiness, the
cgroup of a kubelet and the pod bridge."""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path

import httpx
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, ServiceAccount

from csi_harness._internal.providers.local import components as c
from csi_harness._internal.providers.local.pki import ClusterPKI


class ApiProbe:
    """kube-apiserver's /readyz, asked with the admin client certificate."""

    def __init__(self, port: int, pki: ClusterPKI) -> None:
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        context.load_cert_chain(str(pki.clients["admin"].cert), str(pki.clients["admin"].key))
        self.client = httpx.Client(
            base_url=f"https://{c.LOOPBACK}:{port}", verify=context, timeout=2
        )

    def ready(self) -> tuple[bool, str]:
        response = self.client.get("/readyz")
        return response.status_code == 200, f"HTTP {response.status_code}: {response.text[-300:]}"


def service_account_exists(kube: Client, namespace: str, name: str) -> tuple[bool, str]:
    try:
        kube.get(ServiceAccount, name, namespace=namespace)
    except ApiError as exc:
        return False, f"{namespace}/{name}: {exc.status.message}"
    return True, "present"


def https_ok(port: int, path: str) -> tuple[bool, str]:
    # Health endpoints of the scheduler answer anonymous requests; its certificate
    # is self-signed.
    response = httpx.get(f"https://{c.LOOPBACK}:{port}{path}", verify=False, timeout=1)
    return response.status_code == 200, f"HTTP {response.status_code}"


def free_port() -> int:
    """A TCP port on loopback that no one listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((c.LOOPBACK, 0))
        return int(s.getsockname()[1])


def http_ok(port: int, path: str) -> tuple[bool, str]:
    """A plain-HTTP health endpoint on loopback (the kubelet's healthz port)."""
    response = httpx.get(f"http://{c.LOOPBACK}:{port}{path}", timeout=1)
    return response.status_code == 200, f"HTTP {response.status_code}"


def etcd_healthy(port: int) -> tuple[bool, str]:
    response = httpx.get(f"http://{c.LOOPBACK}:{port}/health", timeout=1)
    return response.status_code == 200 and '"true"' in response.text, response.text


def nodes_ready(kube: Client, names: list[str]) -> tuple[bool, str]:
    ready = set()
    for node in kube.list(Node):
        conditions = node.status.conditions or [] if node.status else []
        if any(cond.type == "Ready" and cond.status == "True" for cond in conditions):
            ready.add(node.metadata.name)  # type: ignore[union-attr]
    missing = sorted(set(names) - ready)
    return not missing, f"not Ready yet: {', '.join(missing)}"


def create_cgroup(path: str) -> None:
    """Create ``path`` in every cgroup v1 hierarchy (the kubelet requires its cgroup
    root to exist); cpuset directories need cpus and mems copied from the parent."""
    root = Path("/sys/fs/cgroup")
    for hierarchy in sorted(root.iterdir()):
        if hierarchy.name == "unified" or not (hierarchy / "cgroup.procs").exists():
            continue
        current = hierarchy
        for part in path.strip("/").split("/"):
            parent, current = current, current / part
            if not current.exists():
                current.mkdir()
                for name in ("cpuset.cpus", "cpuset.mems"):
                    if (parent / name).exists():
                        (current / name).write_text((parent / name).read_text())


def create_bridge(network: c.PodNetwork) -> None:
    """The pod bridge, created up front with the node's address; the CNI bridge
    plugin then attaches pods to it."""
    name = network.bridge
    commands = [
        ["ip", "link", "add", "name", name, "type", "bridge"],
        ["ip", "addr", "add", f"{network.node_ip}/24", "dev", name],
        ["ip", "link", "set", name, "up"],
    ]
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
