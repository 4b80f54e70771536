"""The baked images unpacked on every node while a new cluster comes up.

A baked node image stores the suites' images without unpacking them
(``baked_node_image`` says why), and containerd's CRI unpacks an image on a node the
first time it makes a container of it. On a new cluster that is every node at once, and
it fell on the first drivers: csi-mock's image alone is about 340 MB of files per node,
and the cluster's first driver took 23.5 s to be ready against 4-5 s for the next ones.

``Unpacking`` has each node's containerd unpack them as soon as the node's container
runs, during ``kind create`` (whose kubeadm steps mostly wait): ``ctr images mount``,
then ``unmount --rm``, the mount being only a way to have the layers unpacked into the
snapshotter the CRI uses. ``wait`` returns what failed: a node that could not unpack an
image only unpacks it later, as before, so a failure is reported, not raised.

    unpacking = Unpacking(cluster_name, images).start()
    try:
        kind_create()
    finally:
        unpacking.nodes_made()
    ...
    failures = unpacking.wait()
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence

UNPACK_TIMEOUT = 300.0
"""Seconds one node may take, from its container's start to its last image."""
SCAN_INTERVAL = 0.5
"""How often the nodes' containers are looked for while ``kind create`` makes them."""

_SCRIPT = """\
set -e
tries=0
until ctr --namespace k8s.io version >/dev/null 2>&1; do
  tries=$((tries + 1)); [ "$tries" -le 300 ] || { echo "containerd not up" >&2; exit 1; }
  sleep 0.2
done
for ref in "$@"; do
  target=$(mktemp -d)
  ctr --namespace k8s.io images mount "$ref" "$target" >/dev/null
  ctr --namespace k8s.io images unmount --rm "$target" >/dev/null
  rmdir "$target"
done
"""


class Unpacking:
    """Unpacking ``images`` on every node container of kind cluster ``cluster``: one
    thread per node, started as the node's container shows up."""

    def __init__(self, cluster: str, images: Sequence[str]) -> None:
        self.cluster = cluster
        self.images = list(images)
        self._nodes: dict[str, threading.Thread] = {}
        self._failures: dict[str, str] = {}
        self._made = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="unpack watcher", daemon=True)

    def start(self) -> Unpacking:
        self._watcher.start()
        return self

    def nodes_made(self) -> None:
        """``kind create`` has returned: look for nodes once more, then stop looking."""
        self._made.set()
        self._watcher.join()

    def wait(self) -> dict[str, str]:
        """Wait for every node; return node -> why it failed, for those that did."""
        self.nodes_made()
        for thread in list(self._nodes.values()):
            thread.join()
        return dict(self._failures)

    def _watch(self) -> None:
        while True:
            made = self._made.is_set()
            for node in kind_nodes(self.cluster):
                if node not in self._nodes:
                    thread = threading.Thread(
                        target=self._unpack, args=(node,), name=f"unpack {node}", daemon=True
                    )
                    self._nodes[node] = thread
                    thread.start()
            if made:
                return
            self._made.wait(SCAN_INTERVAL)

    def _unpack(self, node: str) -> None:
        argv = ["docker", "exec", node, "sh", "-c", _SCRIPT, "unpack", *self.images]
        try:
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=UNPACK_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            self._failures[node] = f"not done in {UNPACK_TIMEOUT:.0f} s"
            return
        if result.returncode != 0:
            self._failures[node] = result.stderr.strip() or f"exit {result.returncode}"


def kind_nodes(cluster: str) -> list[str]:
    """The running node containers of kind cluster ``cluster`` (kind labels them)."""
    result = subprocess.run(
        [
            "docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={cluster}",
            "--format", "{{.Names}}",
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return sorted(result.stdout.split())
