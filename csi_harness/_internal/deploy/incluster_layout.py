"""Names, labels, host paths and placement of one in-cluster deployment, and the csi-mock
configuration of each of its instances (``DeploymentLayout``).

A deployment is laid out for the nodes the harness found, or for any node
(``DeploymentLayout.nodes`` None): the kustomize base ``deploy/kubernetes/``, whose
nodes are not known when it is rendered. Then every node plugin reads one configuration
and takes its node's name from the downward API, and the controller's pod, with its
sidecars, goes where the scheduler puts it."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from lightkube.codecs import from_dict
from lightkube.core.resource import GlobalResource

from csi_harness._internal.deploy.spec import (
    DriverDeployment,
    ProvisionerMode,
    driver_config_for,
)

# lightkube's from_dict knows the VolumeSnapshotClass kind (a CRD's) once
# csi_harness._internal.kube.snapshots has defined it.
from csi_harness._internal.kube import snapshots  # noqa: F401
from csi_harness._internal.kube.nodes import ClusterNode

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
"""The driver name (DriverDeployment.name) of the deployment an object belongs to; on
cluster-scoped objects only a suffixed deployment's (see ``cluster_scoped_objects``)."""
COMPONENT_LABEL = "app.kubernetes.io/component"
APP = "csi-mock"

CONTROLLER_DEPLOYMENT = "csi-mock-controller"
"""csi-mock's controller and the central sidecars, one pod (central provisioning)."""
PROVISIONER_WORKLOAD = "csi-mock-provisioner"
"""The per-node provisioners' DaemonSet (distributed provisioning)."""
NODE_DAEMONSET = "csi-mock-node"
CONFIG_MAP = "csi-mock-config"
ADMIN_SECRET = "csi-mock-admin"

DRIVER_CONTAINER = "csi-mock"
PROVISIONER = "csi-provisioner"
ATTACHER = "csi-attacher"
RESIZER = "csi-resizer"
SNAPSHOTTER = "csi-snapshotter"
CENTRAL_SIDECARS = (PROVISIONER, ATTACHER, RESIZER)

ADMIN_PORT = 9809
SIDECAR_HTTP_PORTS = {PROVISIONER: 8080, ATTACHER: 8081, RESIZER: 8082, SNAPSHOTTER: 8083}
"""Each sidecar's --http-endpoint (metrics; its readiness probe): one port each, as the
controller's containers share the pod's network namespace."""
CSI_SOCKET_DIR = "/csi"
CSI_ENDPOINT = f"unix://{CSI_SOCKET_DIR}/csi.sock"
CONFIG_DIR = "/etc/csi-mock"
ADMIN_TOKEN_DIR = "/etc/csi-mock-admin"
STATE_DIR = "/var/lib/csi-mock"
"""Where csi-mock keeps its state in its container (and the host root of the nodes')."""
KUBELET_DIR = "/var/lib/kubelet"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
CONTROLLER_CONFIG_KEY = "controller.yaml"
ANY_NODE_CONFIG_KEY = "node.yaml"
"""The one node configuration of a deployment laid out for any node (its node ID from
``--nodeid``)."""

GENERATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

# Run in the node pod's init container: the host directory of this driver keeps one
# subdirectory per deployment, and only the current one is needed. The pods of earlier
# deployments are gone by then (InClusterDriver.deploy waits for that); a suffixed
# deployment's directory is its own (host_dir_name), so no other's is in it.
REMOVE_EARLIER_STATE = """\
import shutil, sys
from pathlib import Path
root, keep = Path(sys.argv[1]), sys.argv[2]
for entry in root.iterdir():
    if entry.name == keep:
        continue
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()
"""


@dataclass(frozen=True)
class Component:
    """Where one component of a deployment runs: the workload, and the node for a
    DaemonSet's pod."""

    name: str
    """As ``Driver.components()`` names it, e.g. "csi-mock-node-worker2"."""
    workload_kind: str
    """Deployment or DaemonSet."""
    workload: str
    role: str
    """The pod's COMPONENT_LABEL."""
    container: str
    node: str | None = None


def is_distributed(spec: DriverDeployment) -> bool:
    return spec.provisioner_mode is ProvisionerMode.DISTRIBUTED


def instance_component(instance: str) -> str:
    """The component name of a csi-mock instance ("controller" or a node name)."""
    return "csi-mock-controller" if instance == "controller" else f"csi-mock-node-{instance}"


def sidecars_of(spec: DriverDeployment) -> tuple[str, ...]:
    """The sidecars of the deployment: central ones in the controller's pod, or the
    per-node provisioner."""
    # Distributed provisioning has no attacher (the spec refuses attach_required there)
    # and no resizer (each node's instance is its own controller).
    if is_distributed(spec):
        return (PROVISIONER,)
    central = (
        CENTRAL_SIDECARS if spec.resizer else tuple(s for s in CENTRAL_SIDECARS if s != RESIZER)
    )
    return central + ((SNAPSHOTTER,) if spec.snapshots is not None else ())


def deployment_components(spec: DriverDeployment, nodes: Sequence[str]) -> dict[str, Component]:
    """Every component of the deployment by name, in the order of
    ``csi_harness._internal.providers.base.Driver.components``: a central sidecar is a
    container of the controller's pod."""
    found: list[Component] = []
    if not is_distributed(spec):
        found.append(
            Component(
                "csi-mock-controller",
                "Deployment",
                CONTROLLER_DEPLOYMENT,
                "controller",
                DRIVER_CONTAINER,
            )
        )
    found += [
        Component(
            instance_component(node), "DaemonSet", NODE_DAEMONSET, "node", DRIVER_CONTAINER, node
        )
        for node in nodes
    ]
    if is_distributed(spec):
        found += [
            Component(
                f"{PROVISIONER}-{node}",
                "DaemonSet",
                PROVISIONER_WORKLOAD,
                "provisioner",
                PROVISIONER,
                node,
            )
            for node in nodes
        ]
    else:
        found += [
            Component(sidecar, "Deployment", CONTROLLER_DEPLOYMENT, "controller", sidecar)
            for sidecar in sidecars_of(spec)
        ]
    return {component.name: component for component in found}


def labels(spec: DriverDeployment, role: str) -> dict[str, str]:
    return {NAME_LABEL: APP, INSTANCE_LABEL: spec.name, COMPONENT_LABEL: role}


def node_config_key(node: str) -> str:
    return f"node-{node}.yaml"


def host_dir_name(spec: DriverDeployment) -> str:
    """The name of the deployment's directories on the nodes (its state, its sockets):
    the driver name, which the kubelets need unique among running drivers anyway, and
    the suffix, so that no two deployments meet there even with the same name."""
    return spec.name + spec.suffix


def host_driver_dir(spec: DriverDeployment) -> str:
    """The host directory of this driver's state on every node it runs on."""
    return f"{STATE_DIR}/{host_dir_name(spec)}"


def is_cluster_scoped(obj: Mapping[str, Any]) -> bool:
    """Whether the API keeps an object of this kind outside any namespace."""
    return isinstance(from_dict(dict(obj)), GlobalResource)


def controller_node(nodes: Sequence[ClusterNode]) -> str:
    """The node the central controller and its sidecars share (the first by name)."""
    return min(n.name for n in nodes)


def node_affinity(nodes: Sequence[str], *, stopped: Collection[str] = ()) -> dict[str, Any]:
    """A pod's required node affinity: exactly ``nodes``, except the ``stopped`` ones.

    A metadata.name field requirement takes one value, so there is one (ORed) term per
    node; a stopped node's term also excludes that node, so it matches nothing.
    """
    terms = []
    for node in nodes:
        fields = [{"key": "metadata.name", "operator": "In", "values": [node]}]
        if node in stopped:
            fields.append({"key": "metadata.name", "operator": "NotIn", "values": [node]})
        terms.append({"matchFields": fields})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


@dataclass(frozen=True)
class DeploymentLayout:
    """Names and paths of one deployment, and the csi-mock configurations."""

    spec: DriverDeployment
    nodes: list[ClusterNode] | None
    """None: any node of the cluster, not known when rendering (the kustomize base)."""
    generation: str
    controller_host: str | None = None
    """Where the controller's pod runs when not on the first driver node (kind: the
    control plane, so that the workers, which tests compare, stay alike)."""

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes or []]

    @property
    def host_node_socket_dir(self) -> str:
        return f"{KUBELET_DIR}/plugins/{host_dir_name(self.spec)}"

    def config_map(self) -> dict[str, Any]:
        if self.nodes is None:
            data = {ANY_NODE_CONFIG_KEY: _yaml(self.any_node_config())}
        else:
            data = {node_config_key(n.name): _yaml(self.node_config(n)) for n in self.nodes}
        if not is_distributed(self.spec):
            data = {CONTROLLER_CONFIG_KEY: _yaml(self.controller_config()), **data}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CONFIG_MAP,
                "namespace": self.spec.namespace,
                "labels": {NAME_LABEL: APP, INSTANCE_LABEL: self.spec.name},
            },
            "data": data,
        }

    def _admin(self, **extra: Any) -> dict[str, Any]:
        # The API server's pod proxy reaches the pod's IP, hence all addresses.
        return {
            "tcp": f"0.0.0.0:{ADMIN_PORT}",
            "token_file": f"{ADMIN_TOKEN_DIR}/token",
            **extra,
        }

    def controller_config(self) -> dict[str, Any]:
        # The sidecars of its pod, which it pauses for stop_component.
        admin = self._admin(neighbours=list(sidecars_of(self.spec)))
        return driver_config_for(
            self.spec,
            mode="controller",
            nodes=[(n.name, n.zone) for n in self.nodes or []],
            endpoint=CSI_ENDPOINT,
            state_dir=STATE_DIR,
            admin=admin,
        )

    def node_config(self, node: ClusterNode) -> dict[str, Any]:
        distributed = is_distributed(self.spec)
        # Distributed: node-local storage, so each node's instance is controller and
        # node of its own pool, and its provisioner asks it alone.
        topology = (
            [(node.name, node.zone)]
            if distributed
            else [(n.name, n.zone) for n in self.nodes or []]
        )
        config = driver_config_for(
            self.spec,
            mode="all" if distributed else "node",
            nodes=topology,
            node=(node.name, node.zone),
            endpoint=CSI_ENDPOINT,
            state_dir=f"{STATE_DIR}/{self.generation}/node",
            admin=self._admin(),
        )
        return self._node_plugin(config)

    def any_node_config(self) -> dict[str, Any]:
        """The configuration of every node plugin of a deployment laid out for any node:
        no node ID (``--nodeid`` gives it) and so no zone, and the segment csi-mock
        derives from the ID. Pools named after nodes cannot be given (``render_objects``
        refuses a spec with them)."""
        config = driver_config_for(
            self.spec,
            mode="node",
            nodes=[],
            endpoint=CSI_ENDPOINT,
            state_dir=f"{STATE_DIR}/{self.generation}/node",
            admin=self._admin(),
        )
        # NodeGetInfo's limit, as driver_config_for sets it for a node it is given;
        # the spec's overrides still win.
        config["node"] = {
            "max_volumes_per_node": self.spec.max_volumes_per_node,
            **config.get("node", {}),
        }
        return self._node_plugin(config)

    def _node_plugin(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with what every node plugin pod needs: bind mounts below the
        kubelet's directory, and its own registration with the kubelet."""
        config["node"]["mount"] = "bind"
        # The kubelet asks for staging and target paths below its root directory only.
        config["node"]["allowed_roots"] = [KUBELET_DIR]
        config["node"]["registration"] = {
            "plugins_registry": f"{KUBELET_DIR}/plugins_registry",
            # The socket as the kubelet sees it: the host directory mounted on /csi.
            "kubelet_endpoint": f"{self.host_node_socket_dir}/csi.sock",
        }
        if not is_distributed(self.spec):
            # The controller keeps the volumes in its own pod: a node never finds a
            # volume's backing directory and creates it on first use.
            config["node"]["materialize_missing_volumes"] = True
        return config


def _yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False)
