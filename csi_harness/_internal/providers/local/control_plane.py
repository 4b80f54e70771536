"""Starting the local cluster's control plane and nodes, in order, each waited for as
the next needs it: PKI and kubeconfigs, etcd, containerd, the API server, the snapshot
controller, the controller manager, the scheduler, the kubelets and the node simulator."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml
from lightkube import Client, KubeConfig

from csi_harness._internal.core.images import ensure_images, import_images
from csi_harness._internal.core.processes import Supervisor
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.waiting import socket_probe, wait_for
from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.kube.snapshots import install_crds
from csi_harness._internal.providers.local import components as c
from csi_harness._internal.providers.local.config import (
    ZONE_LABEL,
    LocalClusterConfig,
    NodeSpec,
    NodeType,
)
from csi_harness._internal.providers.local.host import (
    ApiProbe,
    create_bridge,
    create_cgroup,
    etcd_healthy,
    nodes_ready,
)
from csi_harness._internal.providers.local.pki import ClientIdentity, ClusterPKI, create_pki


class ClusterUpFailed(RuntimeError):
    """The cluster did not come up; the message names the component and its log."""


KUBERNETES_VERSION = "v1.37.1"
SIMULATED_CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def start_control_plane(
    config: LocalClusterConfig,
    layout: c.Layout,
    network: c.PodNetwork,
    tools: Tools,
    state: RunState,
    supervisor: Supervisor,
    phase: Callable[[str], None],
) -> Client:
    """Start etcd, containerd, the API server, the snapshot controller, the controller
    manager, the scheduler, the kubelets and the node simulator, each waited for as
    the next needs it, until every node is Ready; returns a client of the cluster."""
    ports = state.ports
    nodes = config.nodes()
    kubelet_nodes = [n for n in nodes if n.type is NodeType.KUBELET]
    pki = create_cluster_pki(layout, kubelet_nodes)
    write_kubeconfigs(layout, pki, ports["apiserver"], kubelet_nodes)
    layout.etcd.mkdir(mode=0o700)
    phase("PKI and kubeconfigs")

    supervisor.start("etcd", c.etcd_argv(tools, layout, ports))
    for node in kubelet_nodes:
        start_containerd(layout, network, tools, state, supervisor, node.name)
    images = ensure_images()
    phase("etcd and containerd started, images built")

    wait_for(
        "etcd to report healthy",
        lambda: etcd_healthy(ports["etcd"]),
        timeout=config.timeout_seconds,
        check=lambda: supervisor.check_alive(["etcd"]),
    )
    supervisor.start("kube-apiserver", c.apiserver_argv(tools, config, pki, ports))
    for node in kubelet_nodes:
        socket_path = layout.containerd_socket(node.name)
        wait_for(
            f"containerd of {node.name} to serve {socket_path}",
            partial(socket_probe, socket_path),
            timeout=config.timeout_seconds,
            check=partial(supervisor.check_alive, [f"containerd-{node.name}"]),
        )
        import_images(Path(tools["ctr"]), str(socket_path), images)
    phase("images imported into containerd")
    api = ApiProbe(ports["apiserver"], pki)
    wait_for(
        "kube-apiserver /readyz",
        api.ready,
        timeout=config.timeout_seconds,
        interval=0.2,
        check=lambda: supervisor.check_alive(["kube-apiserver"]),
    )
    phase("kube-apiserver ready")

    kube = Client(KubeConfig.from_file(layout.kubeconfig), field_manager="csi-harness")
    install_crds(kube, tools.snapshot_crds(), timeout=config.timeout_seconds)
    supervisor.start("snapshot-controller", c.snapshot_controller_argv(tools, layout, ports))
    phase("snapshot CRDs established")

    (layout.configs / "kube-scheduler.yaml").write_text(
        yaml.safe_dump(c.scheduler_configuration(config, layout), sort_keys=False)
    )
    supervisor.start(
        "kube-controller-manager", c.controller_manager_argv(tools, config, layout, pki, ports)
    )
    supervisor.start("kube-scheduler", c.scheduler_argv(tools, config, layout, ports))
    for node in kubelet_nodes:
        start_kubelet(config, layout, network, tools, state, supervisor, pki, node)
    simulated = [n for n in nodes if n.type is NodeType.SIMULATED]
    if simulated:
        start_simulator(layout, supervisor, simulated)
    wait_for(
        f"{len(nodes)} nodes to be Ready",
        lambda: nodes_ready(kube, [n.name for n in nodes]),
        timeout=config.timeout_seconds,
        interval=0.25,
        check=supervisor.check_alive,
    )
    phase("nodes Ready")
    return kube


def create_cluster_pki(layout: c.Layout, kubelet_nodes: list[NodeSpec]) -> ClusterPKI:
    """The cluster's CA and a client certificate for each component and kubelet."""
    clients = [
        ClientIdentity("admin", "csi-harness-admin", ("system:masters",)),
        ClientIdentity(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
        ),
        ClientIdentity("kube-controller-manager", "system:kube-controller-manager"),
        ClientIdentity("kube-scheduler", "system:kube-scheduler"),
        # The sidecars and the node simulator act with cluster-admin rights here;
        # the in-cluster manifests carry their real RBAC.
        ClientIdentity("csi-sidecars", "csi-harness-sidecars", ("system:masters",)),
    ]
    clients += [
        ClientIdentity(f"kubelet-{n.name}", f"system:node:{n.name}", ("system:nodes",))
        for n in kubelet_nodes
    ]
    return create_pki(layout.pki, clients=clients)


def write_kubeconfigs(
    layout: c.Layout, pki: ClusterPKI, port: int, kubelet_nodes: list[NodeSpec]
) -> None:
    """The admin kubeconfig and one per component and kubelet."""
    server = f"https://{c.LOOPBACK}:{port}"
    c.write_kubeconfig(
        layout.kubeconfig,
        server=server,
        ca=pki.ca.cert,
        client=pki.clients["admin"],
        user="admin",
    )
    names = ["kube-controller-manager", "kube-scheduler", "csi-sidecars"]
    names += [f"kubelet-{n.name}" for n in kubelet_nodes]
    for name in names:
        c.write_kubeconfig(
            layout.component_kubeconfig(name),
            server=server,
            ca=pki.ca.cert,
            client=pki.clients[name],
            user=name,
        )


def start_containerd(
    layout: c.Layout,
    network: c.PodNetwork,
    tools: Tools,
    state: RunState,
    supervisor: Supervisor,
    node: str,
) -> None:
    """containerd of a kubelet node, with its CNI configuration and the pod bridge."""
    directory = layout.containerd_dir(node)
    directory.mkdir(parents=True)
    state.extra_dirs.append(str(layout.shim_socket_dir(node)))
    state.save()
    (directory / "config.toml").write_text(c.containerd_config(tools, layout, node))
    conf_dir = layout.cni_conf_dir(node)
    conf_dir.mkdir(parents=True)
    (conf_dir / "10-csi-harness.conflist").write_text(
        json.dumps(c.cni_config(layout, node, network), indent=2)
    )
    create_bridge(network)
    env = {"PATH": f"{tools.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    supervisor.start(f"containerd-{node}", c.containerd_argv(tools, layout, node), env=env)


def start_kubelet(
    config: LocalClusterConfig,
    layout: c.Layout,
    network: c.PodNetwork,
    tools: Tools,
    state: RunState,
    supervisor: Supervisor,
    pki: ClusterPKI,
    node: NodeSpec,
) -> None:
    """A real kubelet, in a cgroup of its own, labelled with its node type and zone."""
    cgroup_root = f"{state.cgroup_root}/{node.name}"
    create_cgroup(cgroup_root)
    root = layout.kubelet_root(node.name)
    if config.kubelet_root_dir is not None:
        # Outside the run directory: refuse another kubelet's, and remove it with us.
        # Every kubelet makes /var/lib/kubelet/device-plugins, whatever its root.
        if root.exists() and any(p.name != "device-plugins" for p in root.iterdir()):
            raise ClusterUpFailed(
                f"kubelet_root_dir {root} is not empty: another kubelet's, or a run"
                " that was not removed (`csi-harness cluster down`)"
            )
        state.extra_dirs.append(str(root))
        state.save()
    root.mkdir(parents=True, exist_ok=True)
    (layout.configs / f"kubelet-{node.name}.yaml").write_text(
        yaml.safe_dump(
            c.kubelet_configuration(
                config, layout, pki, node.name, state.ports, cgroup_root, network
            ),
            sort_keys=False,
        )
    )
    labels = {NODE_TYPE_LABEL: NodeType.KUBELET.value}
    if node.zone:
        labels[ZONE_LABEL] = node.zone
    argv = c.kubelet_argv(tools, layout, node.name, network)
    argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    env = {"PATH": f"{tools.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    supervisor.start(f"kubelet-{node.name}", argv, env=env)


def start_simulator(layout: c.Layout, supervisor: Supervisor, nodes: list[NodeSpec]) -> None:
    """One node-simulator process for every simulated node."""
    spec = {
        "kubeconfig": str(layout.component_kubeconfig("csi-sidecars")),
        "kubelet_version": KUBERNETES_VERSION,
        "nodes": [
            {
                "name": n.name,
                "labels": {NODE_TYPE_LABEL: NodeType.SIMULATED.value}
                | ({ZONE_LABEL: n.zone} if n.zone else {}),
                "plugins_registry": str(layout.plugins_registry(n.name)),
                "capacity": SIMULATED_CAPACITY,
            }
            for n in nodes
        ],
    }
    path = layout.configs / "node-simulator.json"
    path.write_text(json.dumps(spec, indent=2))
    supervisor.start(
        "node-simulator",
        [
            sys.executable,
            "-m",
            "csi_harness._internal.providers.local.node_simulator",
            str(path),
        ],
    )
