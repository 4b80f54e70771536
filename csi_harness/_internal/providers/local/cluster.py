"""The ``local`` provider: a real Kubernetes control plane, a real kubelet with
containerd and runc, simulated nodes and the csi-mock driver with its sidecars, all
as processes on this host, bound to 127.0.0.1.

``LocalCluster(config).up()`` brings it to Ready (nodes Ready, driver registered on
every node, capacity published) or fails naming the component and showing its log;
``down()`` removes every process, mount, cgroup, link and file it made. Once up (or
attached), it is a ``csi_harness._internal.providers.base.Cluster``.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
import yaml
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, ServiceAccount

from csi_harness._internal.core.images import ensure_images, import_images
from csi_harness._internal.core.processes import ComponentFailed, Supervisor, is_running, log_tail
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.waiting import WaitTimeout, socket_probe, wait_for
from csi_harness._internal.deploy.local import DriverNode, LocalDriver
from csi_harness._internal.deploy.readiness import (
    wait_deregistered,
)
from csi_harness._internal.deploy.spec import DriverDeployment, check_side_by_side
from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.kube.snapshots import install_crds
from csi_harness._internal.providers.base import ClusterNode, Driver
from csi_harness._internal.providers.local import components as c
from csi_harness._internal.providers.local.config import (
    ZONE_LABEL,
    Component,
    LocalClusterConfig,
    NodeSpec,
    NodeType,
)
from csi_harness._internal.providers.local.pki import ClientIdentity, ClusterPKI, create_pki
from csi_harness._internal.providers.local.teardown import TeardownReport, teardown
from csi_mock.admin.client import AdminClient

KUBERNETES_VERSION = "v1.37.1"
SIMULATED_CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}


_MAX_SOCKET_PATH = 107
DIAGNOSTICS_ADMIN_TIMEOUT = 5.0
"""Seconds an admin call of failure diagnostics may take: a hung instance must not
hold up the report."""


class ClusterUpFailed(RuntimeError):
    pass


class ClusterNotRunning(RuntimeError):
    """``LocalCluster.attach`` found no Ready cluster in the run directory."""


@dataclass
class Phase:
    name: str
    seconds: float


@dataclass
class UpResult:
    kubeconfig: Path
    nodes: list[NodeSpec]
    seconds: float
    phases: list[Phase] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((c.LOOPBACK, 0))
        return int(s.getsockname()[1])


class LocalCluster:
    def __init__(
        self, config: LocalClusterConfig, progress: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        self.layout = c.Layout(config.effective_run_dir, config.kubelet_root_dir)
        self.progress = progress or (lambda message: print(message, file=sys.stderr, flush=True))
        self.network = c.PodNetwork.for_cluster(config.name)
        self.driver: LocalDriver | None = None
        self.kube: Client | None = None
        self.default_driver = config.driver
        """The driver the cluster came up with; tests redeploy variations of it."""
        self._tools = Tools(Path("."))
        self._supervisor: Supervisor | None = None
        self.attached = False
        """Attached to a cluster another process brought up (``attach``)."""

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    # as a csi_harness._internal.providers.base.Cluster
    # ---------------------------------------------

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def log_dir(self) -> Path:
        return self.layout.logs

    def nodes(self) -> list[ClusterNode]:
        """Every configured node, sorted by name; only those with a real kubelet run pods."""
        return sorted((_cluster_node(spec) for spec in self.config.nodes()), key=lambda n: n.name)

    def scheduler_feature_gate(self, gate: str) -> bool | None:
        return self.config.feature_gates_for(Component.SCHEDULER).get(gate)

    @property
    def scheduler_config(self) -> dict[str, object]:
        return dict(self.config.scheduler)

    def admin_instances(self) -> dict[str, AdminClient]:
        driver = self.driver
        if driver is None:
            return {}
        return {
            instance: driver.admin(instance, timeout=DIAGNOSTICS_ADMIN_TIMEOUT)
            for instance in driver.instances()
        }

    # up ----------------------------------------------------------------------

    def up(self) -> UpResult:
        started = time.monotonic()
        phases: list[Phase] = []
        mark = started

        def phase(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            phases.append(Phase(name, now - mark))
            self.progress(f"  {name:<44} {now - mark:5.1f}s  (total {now - started:5.1f}s)")
            mark = now

        root = self.layout.root
        self._check_socket_paths()
        previous = RunState.load(root) if root.exists() else None
        if root.exists():
            report = teardown(root, previous)
            self.progress(f"cleaned up a previous run in {root} ({_summary(report)})")
        tools = Tools.locate(self.config.tools_bin)
        root.mkdir(parents=True)
        state = RunState(run_dir=root, cluster=self.config.name, started_at=time.time())
        state.config = self.config.model_dump(mode="json")
        state.cgroup_root = f"/csi-harness/{self.config.name}"
        state.bridge = self.network.bridge
        for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler"):
            state.ports[name] = _free_port()
        nodes = self.config.nodes()
        for node in nodes:
            if node.type is NodeType.KUBELET:
                state.ports[f"kubelet-{node.name}"] = _free_port()
                state.ports[f"kubelet-healthz-{node.name}"] = _free_port()
            state.nodes[node.name] = node.model_dump(mode="json")
        state.save()
        supervisor = Supervisor(state, self.layout.logs)
        self._supervisor = supervisor
        self.progress(f"local cluster {self.config.name!r} in {root}")
        try:
            self._bring_up(tools, state, supervisor, nodes, phase)
        except (ComponentFailed, WaitTimeout, OSError, RuntimeError) as exc:
            state.phase = "failed"
            state.save()
            raise ClusterUpFailed(f"cluster up failed: {exc}\nlogs: {self.layout.logs}") from exc
        state.phase = "ready"
        state.ready_after = time.monotonic() - started
        state.save()
        self.progress(f"cluster ready in {state.ready_after:.1f}s; KUBECONFIG={self.kubeconfig}")
        return UpResult(self.kubeconfig, nodes, state.ready_after, phases)

    def _bring_up(
        self,
        tools: Tools,
        state: RunState,
        supervisor: Supervisor,
        nodes: list[NodeSpec],
        phase: Callable[[str], None],
    ) -> None:
        layout, config, ports = self.layout, self.config, state.ports
        kubelet_nodes = [n for n in nodes if n.type is NodeType.KUBELET]
        pki = self._create_pki(kubelet_nodes)
        self._write_kubeconfigs(pki, ports["apiserver"], kubelet_nodes)
        layout.etcd.mkdir(mode=0o700)
        phase("PKI and kubeconfigs")

        supervisor.start("etcd", c.etcd_argv(tools, layout, ports))
        for node in kubelet_nodes:
            self._start_containerd(tools, state, supervisor, node.name)
        images = ensure_images()
        phase("etcd and containerd started, images built")

        wait_for(
            "etcd to report healthy",
            lambda: _etcd_healthy(ports["etcd"]),
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
        api = _ApiProbe(ports["apiserver"], pki)
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
        supervisor.start("snapshot-controller", c.snapshot_controller_argv(tools, layout))
        phase("snapshot CRDs established")

        (layout.configs / "kube-scheduler.yaml").write_text(
            yaml.safe_dump(c.scheduler_configuration(config, layout), sort_keys=False)
        )
        supervisor.start(
            "kube-controller-manager", c.controller_manager_argv(tools, config, layout, pki, ports)
        )
        supervisor.start("kube-scheduler", c.scheduler_argv(tools, config, layout, ports))
        for node in kubelet_nodes:
            self._start_kubelet(tools, state, supervisor, pki, node)
        simulated = [n for n in nodes if n.type is NodeType.SIMULATED]
        if simulated:
            self._start_simulator(supervisor, simulated)
        wait_for(
            f"{len(nodes)} nodes to be Ready",
            lambda: _nodes_ready(kube, [n.name for n in nodes]),
            timeout=config.timeout_seconds,
            interval=0.25,
            check=supervisor.check_alive,
        )
        phase("nodes Ready")

        self._tools, self.kube = tools, kube
        self.driver = self._new_driver(config.driver)
        self.driver.start()
        phase("driver and sidecars started")
        self.driver.wait_ready()
        phase("driver registered, capacity published")
        # Pods are refused until the controller manager made the namespace's default
        # service account (it comes a few seconds after start; the driver meanwhile).
        wait_for(
            "the default service account",
            partial(service_account_exists, kube, "default", "default"),
            timeout=config.timeout_seconds,
            interval=0.2,
            check=supervisor.check_alive,
        )
        phase("default service account")

    def _new_driver(self, spec: DriverDeployment) -> LocalDriver:
        layout = self.layout
        assert self._supervisor is not None and self.kube is not None
        return LocalDriver(
            spec,
            root=layout.driver_root(spec.suffix),
            tools=self._tools,
            supervisor=self._supervisor,
            nodes=[
                DriverNode(
                    _cluster_node(node), layout.kubelet_root(node.name), "csi-mock" + spec.suffix
                )
                for node in self.config.nodes()
            ],
            kubeconfig=layout.component_kubeconfig("csi-sidecars"),
            kube=self.kube,
            ready_timeout=self.config.timeout_seconds,
        )

    @property
    def concurrent_drivers(self) -> bool:
        return True

    def deploy_driver(self, spec: DriverDeployment) -> LocalDriver:
        """Deploy a driver from ``spec`` beside the running ones (its name and suffix
        must be its own) and wait until it is ready, as at bring-up."""
        if self.kube is None:
            raise RuntimeError(
                "deploy_driver needs a cluster brought up or attached by this object"
            )
        check_side_by_side(spec, self.driver.spec if self.driver is not None else None)
        driver = self._new_driver(spec)
        driver.deploy()
        return driver

    def remove_driver(self, driver: Driver | None = None) -> None:
        """Stop a driver (None: the cluster's own) and delete its objects and state."""
        if driver is None or driver is self.driver:
            driver, self.driver = self.driver, None
            if driver is None:
                return
        if not isinstance(driver, LocalDriver):
            raise TypeError(f"{driver!r} was not deployed by this cluster")
        driver.remove()

    def redeploy_driver(self, spec: DriverDeployment) -> LocalDriver:
        """Replace the running driver with a fresh one deployed from ``spec``: its
        processes stopped, its CSINode entries gone, its state wiped, then started
        and waited for like at bring-up. Volumes must have been deleted before."""
        if self.kube is None:
            raise RuntimeError(
                "redeploy_driver needs a cluster brought up or attached by this object"
            )
        names = [n.name for n in self.config.nodes()]
        if self.driver is not None:
            self.driver.stop()
            wait_deregistered(
                self.kube, [self.driver.spec.name], names, timeout=self.config.timeout_seconds
            )
        self._set_config(self.config.model_copy(update={"driver": spec}))
        self.driver = self._new_driver(spec)
        self.driver.deploy()
        return self.driver

    def restart_scheduler(self, scheduler: Mapping[str, object]) -> None:
        """Restart kube-scheduler with ``scheduler`` merged into its configuration
        (e.g. a VolumeBinding shape); wait until it serves /healthz."""
        if self._supervisor is None:
            raise RuntimeError(
                "restart_scheduler needs a cluster brought up or attached by this object"
            )
        self._set_config(self.config.model_copy(update={"scheduler": dict(scheduler)}))
        (self.layout.configs / "kube-scheduler.yaml").write_text(
            yaml.safe_dump(c.scheduler_configuration(self.config, self.layout), sort_keys=False)
        )
        self._supervisor.stop("kube-scheduler")
        self._supervisor.start(
            "kube-scheduler",
            c.scheduler_argv(self._tools, self.config, self.layout, self._supervisor.state.ports),
        )
        port = self._supervisor.state.ports["scheduler"]
        wait_for(
            "kube-scheduler /healthz",
            partial(_https_ok, port, "/healthz"),
            timeout=self.config.timeout_seconds,
            interval=0.2,
            check=partial(self._supervisor.check_alive, ["kube-scheduler"]),
        )

    def _set_config(self, config: LocalClusterConfig) -> None:
        self.config = config
        if self._supervisor is not None:
            with self._supervisor.state.locked() as state:
                state.config = config.model_dump(mode="json")

    # attach --------------------------------------------------------------------

    @classmethod
    def attach(cls, run_dir: Path, progress: Callable[[str], None] | None = None) -> LocalCluster:
        """The running cluster whose run directory is ``run_dir`` (brought up by
        ``csi-harness cluster up`` or a kept pytest session), ready to redeploy its
        driver and restart its scheduler. Fails, saying why, unless it is Ready with
        every process alive."""
        state = RunState.load(run_dir)
        if state is None:
            raise ClusterNotRunning(f"{run_dir}: no local cluster here (no {run_dir}/run.json)")
        if state.phase != "ready":
            raise ClusterNotRunning(
                f"{run_dir}: cluster {state.cluster!r} is {state.phase!r}, not ready; "
                f"run `csi-harness cluster up --name {state.cluster}` again"
            )
        if not state.config:
            raise ClusterNotRunning(
                f"{run_dir}: the run state has no configuration (made by an older harness); "
                "bring the cluster up again"
            )
        dead = sorted(name for name, record in state.processes.items() if not is_running(record))
        if dead:
            raise ClusterNotRunning(
                f"{run_dir}: cluster {state.cluster!r} has stopped processes: {', '.join(dead)}; "
                f"run `csi-harness cluster up --name {state.cluster}` again"
            )
        config = LocalClusterConfig.model_validate(state.config)
        cluster = cls(config, progress=progress)
        if cluster.layout.root.resolve() != run_dir.resolve():
            raise ClusterNotRunning(f"{run_dir}: run state names another directory")
        cluster._supervisor = Supervisor(state, cluster.layout.logs)
        cluster._tools = Tools.locate(config.tools_bin)
        cluster.kube = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="csi-harness")
        cluster.driver = cluster._new_driver(config.driver)
        cluster.attached = True
        return cluster

    def _check_socket_paths(self) -> None:
        """Unix socket paths are limited to 107 bytes; fail before starting anything
        when the run directory is too deep for the sockets inside it."""
        # The longest names a driver gets: the cluster's own, or a test's
        # (csi_harness._internal.pytest_plugin: "<7 characters>.csi-mock", suffix "-<7>").
        drivers = [(self.config.driver.name, ""), ("x" * 7 + ".csi-mock", "-" + "x" * 7)]
        longest = max(
            (
                path
                for node in self.config.nodes()
                for driver, suffix in drivers
                for path in (
                    self.layout.plugins_registry(node.name) / f"{driver}-reg.sock",
                    self.layout.kubelet_root(node.name)
                    / "plugins"
                    / f"csi-mock{suffix}"
                    / "csi.sock",
                    self.layout.driver_root(suffix) / node.name / "admin.sock",
                    Path(f"{self.layout.containerd_socket(node.name)}.ttrpc"),
                )
            ),
            key=lambda p: len(str(p)),
        )
        if len(str(longest).encode()) > _MAX_SOCKET_PATH:
            raise ClusterUpFailed(
                f"run_dir {self.layout.root} is too long: the socket path {longest} has "
                f"{len(str(longest))} bytes, more than the {_MAX_SOCKET_PATH} unix sockets "
                "allow; choose a shorter cluster name or run_dir"
            )

    def _create_pki(self, kubelet_nodes: list[NodeSpec]) -> ClusterPKI:
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
        return create_pki(self.layout.pki, clients=clients)

    def _write_kubeconfigs(self, pki: ClusterPKI, port: int, kubelet_nodes: list[NodeSpec]) -> None:
        server = f"https://{c.LOOPBACK}:{port}"
        c.write_kubeconfig(
            self.layout.kubeconfig,
            server=server,
            ca=pki.ca.cert,
            client=pki.clients["admin"],
            user="admin",
        )
        names = ["kube-controller-manager", "kube-scheduler", "csi-sidecars"]
        names += [f"kubelet-{n.name}" for n in kubelet_nodes]
        for name in names:
            c.write_kubeconfig(
                self.layout.component_kubeconfig(name),
                server=server,
                ca=pki.ca.cert,
                client=pki.clients[name],
                user=name,
            )

    def _start_containerd(
        self, tools: Tools, state: RunState, supervisor: Supervisor, node: str
    ) -> None:
        layout = self.layout
        directory = layout.containerd_dir(node)
        directory.mkdir(parents=True)
        state.extra_dirs.append(str(layout.shim_socket_dir(node)))
        state.save()
        (directory / "config.toml").write_text(c.containerd_config(tools, layout, node))
        conf_dir = layout.cni_conf_dir(node)
        conf_dir.mkdir(parents=True)
        (conf_dir / "10-csi-harness.conflist").write_text(
            json.dumps(c.cni_config(layout, node, self.network), indent=2)
        )
        _create_bridge(self.network)
        env = {"PATH": f"{tools.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        supervisor.start(f"containerd-{node}", c.containerd_argv(tools, layout, node), env=env)

    def _start_kubelet(
        self, tools: Tools, state: RunState, supervisor: Supervisor, pki: ClusterPKI, node: NodeSpec
    ) -> None:
        layout = self.layout
        cgroup_root = f"{state.cgroup_root}/{node.name}"
        _create_cgroup(cgroup_root)
        root = layout.kubelet_root(node.name)
        if self.config.kubelet_root_dir is not None:
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
                    self.config, layout, pki, node.name, state.ports, cgroup_root, self.network
                ),
                sort_keys=False,
            )
        )
        labels = {NODE_TYPE_LABEL: NodeType.KUBELET.value}
        if node.zone:
            labels[ZONE_LABEL] = node.zone
        argv = c.kubelet_argv(tools, layout, node.name, self.network)
        argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        env = {"PATH": f"{tools.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        supervisor.start(f"kubelet-{node.name}", argv, env=env)

    def _start_simulator(self, supervisor: Supervisor, nodes: list[NodeSpec]) -> None:
        spec = {
            "kubeconfig": str(self.layout.component_kubeconfig("csi-sidecars")),
            "kubelet_version": KUBERNETES_VERSION,
            "nodes": [
                {
                    "name": n.name,
                    "labels": {NODE_TYPE_LABEL: NodeType.SIMULATED.value}
                    | ({ZONE_LABEL: n.zone} if n.zone else {}),
                    "plugins_registry": str(self.layout.plugins_registry(n.name)),
                    "capacity": SIMULATED_CAPACITY,
                }
                for n in nodes
            ],
        }
        path = self.layout.configs / "node-simulator.json"
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

    # down / status -------------------------------------------------------------

    def down(self) -> TeardownReport:
        root = self.layout.root
        state = RunState.load(root) if root.exists() else None
        return teardown(root, state)

    def status(self) -> dict[str, object]:
        root = self.layout.root
        state = RunState.load(root) if root.exists() else None
        if state is None:
            return {"cluster": self.config.name, "run_dir": str(root), "phase": "absent"}
        processes = {
            name: {"pid": r.pid, "running": is_running(r), "log": r.log}
            for name, r in sorted(state.processes.items())
        }
        return {
            "cluster": state.cluster,
            "run_dir": str(root),
            "phase": state.phase,
            "ready_after_seconds": state.ready_after,
            "kubeconfig": str(self.kubeconfig),
            "nodes": state.nodes,
            "processes": processes,
            "ports": state.ports,
        }


def _cluster_node(spec: NodeSpec) -> ClusterNode:
    return ClusterNode(spec.name, spec.zone, runs_pods=spec.type is NodeType.KUBELET)


class _ApiProbe:
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


def _https_ok(port: int, path: str) -> tuple[bool, str]:
    # Health endpoints of the scheduler answer anonymous requests; its certificate
    # is self-signed.
    response = httpx.get(f"https://{c.LOOPBACK}:{port}{path}", verify=False, timeout=1)
    return response.status_code == 200, f"HTTP {response.status_code}"


def _etcd_healthy(port: int) -> tuple[bool, str]:
    response = httpx.get(f"http://{c.LOOPBACK}:{port}/health", timeout=1)
    return response.status_code == 200 and '"true"' in response.text, response.text


def _nodes_ready(kube: Client, names: list[str]) -> tuple[bool, str]:
    ready = set()
    for node in kube.list(Node):
        conditions = node.status.conditions or [] if node.status else []
        if any(cond.type == "Ready" and cond.status == "True" for cond in conditions):
            ready.add(node.metadata.name)  # type: ignore[union-attr]
    missing = sorted(set(names) - ready)
    return not missing, f"not Ready yet: {', '.join(missing)}"


def _create_cgroup(path: str) -> None:
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


def _create_bridge(network: c.PodNetwork) -> None:
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


def _summary(report: TeardownReport) -> str:
    parts = [f"{len(report.stopped)} processes stopped"]
    if report.killed:
        parts.append(f"killed after timeout: {', '.join(report.killed)}")
    if report.stray_processes:
        parts.append(f"{report.stray_processes} stray processes left")
    parts.append(f"{report.unmounted} mounts removed")
    if report.loop_devices:
        parts.append(f"{report.loop_devices} loop devices detached")
    parts += report.problems
    parts.append(f"{report.seconds:.1f}s")
    return "; ".join(parts)


def format_teardown(report: TeardownReport) -> str:
    return _summary(report)


__all__ = ["ClusterUpFailed", "LocalCluster", "UpResult", "format_teardown", "log_tail"]
