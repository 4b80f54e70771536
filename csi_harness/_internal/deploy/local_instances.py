"""The csi-mock instances of a driver on the local provider: the node each serves
(``DriverNode``), the process that serves it, and a node instance's configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csi_harness._internal.deploy.spec import DriverDeployment, driver_config_for
from csi_harness._internal.kube.nodes import ClusterNode


@dataclass(frozen=True)
class DriverNode:
    """A node as this host holds it: the node, and its kubelet directory, where the
    node's csi-mock instance serves its CSI socket and registers with the kubelet."""

    node: ClusterNode
    kubelet_root: Path
    plugin_dir: str = "csi-mock"
    """The driver's directory under the kubelet's ``plugins`` (one per driver)."""

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def zone(self) -> str | None:
        return self.node.zone

    @property
    def simulated(self) -> bool:
        """No kubelet mounts anything here: the instance only makes directories."""
        return not self.node.runs_pods

    @property
    def csi_socket(self) -> Path:
        return self.kubelet_root / "plugins" / self.plugin_dir / "csi.sock"

    @property
    def plugins_registry(self) -> Path:
        return self.kubelet_root / "plugins_registry"


SIMULATED_NODES_COMPONENT = "csi-mock-simulated-nodes"
"""The one process that serves every simulated node's csi-mock instance (issue 30:
an instance costs its configuration, store and servers, not an interpreter)."""


def node_component(node: str) -> str:
    """The process of the csi-mock instance of a node with a kubelet."""
    return f"csi-mock-node-{node}"


def node_instance_config(
    spec: DriverDeployment, node: DriverNode, *, distributed: bool, root: Path, admin_socket: Path
) -> dict[str, Any]:
    """The csi-mock configuration of ``node``'s instance; ``root`` is the driver's
    directory, ``distributed`` whether every node's instance serves its own pool."""
    # Distributed: node-local storage, so every node's instance is controller and
    # node of its own pool, and its external-provisioner asks it alone. Central: a
    # node instance uses no pool (the controller's), so it is given only its own
    # node's, not the cluster's: at 1,000 nodes those would be a million entries.
    config = driver_config_for(
        spec,
        mode="all" if distributed else "node",
        nodes=[(node.name, node.zone)],
        node=(node.name, node.zone),
        endpoint=f"unix://{node.csi_socket}",
        state_dir=root / node.name / "state",
        backend_dir=root / "backend",
        admin={"socket": str(admin_socket)},
    )
    config["node"]["mount"] = "directory" if node.simulated else "bind"
    config["node"]["registration"] = {"plugins_registry": str(node.plugins_registry)}
    return config
