"""Configuration of a local cluster: which nodes, which zones, which feature gates,
which scheduler configuration, and how the driver is deployed on it."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube.feature_gates import Component as Component

DEFAULT_RUN_ROOT = Path("/var/lib/csi-harness")
ZONE_LABEL = "topology.kubernetes.io/zone"
MAX_SIMULATED_NODES = 1000
"""What `csi-harness scale nodes` measured the local provider at (docs/scale.md)."""


class NodeType(enum.StrEnum):
    KUBELET = "kubelet"
    """A real kubelet with its own containerd: pods really run."""
    SIMULATED = "simulated"
    """A Node object kept Ready by the harness, with its own csi-mock node instance."""


class NodeSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    type: NodeType
    zone: str | None
    index: int


class LocalClusterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("csi-harness", pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
    run_dir: Path | None = None
    """Where everything of this cluster lives; default /var/lib/csi-harness/<name>."""
    kubelet_nodes: int = Field(1, ge=1, le=1)
    """Real kubelets. One: a second needs its own containerd and cgroup root (not yet)."""
    kubelet_root_dir: Path | None = None
    """The real kubelet's --root-dir; default <run dir>/<node>/kubelet. Kubernetes'
    e2e specs that look at the node through a host-exec pod assume /var/lib/kubelet.
    Removed with the cluster, so it must not be another kubelet's."""
    simulated_nodes: int = Field(2, ge=0, le=MAX_SIMULATED_NODES)
    zones: list[str] = Field(default_factory=lambda: ["zone-a", "zone-b"])
    """Node i is in zones[i % len(zones)]; empty: no zone labels."""
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    """Set on every component."""
    component_feature_gates: dict[Component, dict[str, bool]] = Field(default_factory=dict)
    scheduler: dict[str, Any] = Field(default_factory=dict)
    """Merged into the KubeSchedulerConfiguration (e.g. ``profiles`` with ``pluginConfig``)."""
    timeout_seconds: float = Field(120.0, gt=0)
    tools_bin: Path | None = None
    driver: DriverDeployment = Field(default_factory=DriverDeployment)

    @model_validator(mode="after")
    def _check(self) -> LocalClusterConfig:
        if len(set(self.zones)) != len(self.zones):
            raise ValueError("zones must be unique")
        return self

    @property
    def effective_run_dir(self) -> Path:
        return self.run_dir or DEFAULT_RUN_ROOT / self.name

    def feature_gates_for(self, component: Component) -> dict[str, bool]:
        gates = dict(self.feature_gates)
        gates.update(self.component_feature_gates.get(component, {}))
        return gates

    def nodes(self) -> list[NodeSpec]:
        specs = []
        total = self.kubelet_nodes + self.simulated_nodes
        for i in range(total):
            node_type = NodeType.KUBELET if i < self.kubelet_nodes else NodeType.SIMULATED
            zone = self.zones[i % len(self.zones)] if self.zones else None
            specs.append(NodeSpec(name=f"node-{i + 1}", type=node_type, zone=zone, index=i))
        return specs
