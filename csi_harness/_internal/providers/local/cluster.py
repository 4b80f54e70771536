"""The ``local`` provider: a real Kubernetes control plane, a real kubelet with
containerd and runc, simulated nodes and the csi-mock driver with its sidecars, all
as processes on this host, bound to 127.0.0.1.

``LocalCluster(config).up()`` brings it to Ready (nodes Ready, driver registered on
every node, capacity published) or fails naming the component and showing its log;
``down()`` removes every process, mount, cgroup, link and file it made. Once up (or
attached), it is a ``csi_harness._internal.providers.base.Cluster``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from lightkube import Client, KubeConfig

from csi_harness._internal.core.cluster_guard import refuse_cluster
from csi_harness._internal.core.processes import ComponentFailed, Supervisor, is_running, log_tail
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.waiting import WaitTimeout, socket_probe, wait_for
from csi_harness._internal.core.zygote import Zygote, zygote_argv
from csi_harness._internal.deploy.local import DriverNode, LocalDriver
from csi_harness._internal.deploy.readiness import (
    wait_deregistered,
)
from csi_harness._internal.deploy.spec import DriverDeployment, check_side_by_side
from csi_harness._internal.providers.base import ClusterNode, Driver
from csi_harness._internal.providers.local import component_metrics, restarts
from csi_harness._internal.providers.local import components as c
from csi_harness._internal.providers.local.config import (
    Component,
    LocalClusterConfig,
    NodeSpec,
    NodeType,
)
from csi_harness._internal.providers.local.control_plane import ClusterUpFailed, start_control_plane
from csi_harness._internal.providers.local.host import free_port, service_account_exists
from csi_harness._internal.providers.local.own_scheduler import own_scheduler
from csi_harness._internal.providers.local.socket_paths import check_socket_paths
from csi_harness._internal.providers.local.teardown import (
    TeardownReport,
    format_teardown,
    teardown,
)
from csi_mock.admin.client import AdminClient

ZYGOTE = "csi-mock-zygote"
DIAGNOSTICS_ADMIN_TIMEOUT = 5.0
"""Seconds an admin call of failure diagnostics may take: a hung instance must not
hold up the report."""


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
        self._zygote: Zygote | None = None
        self.attached = False
        """Attached to a cluster another process brought up (``attach``)."""
        self.up_result: UpResult | None = None
        """What the last ``up`` of this object measured (seconds, phases); None before."""

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
        return self.component_feature_gate(Component.SCHEDULER, gate)

    def kubelet_feature_gate(self, gate: str) -> bool | None:
        return self.component_feature_gate(Component.KUBELET, gate)

    def component_feature_gate(self, component: Component, gate: str) -> bool | None:
        """From the configuration every component was started with."""
        return self.config.feature_gates_for(component).get(gate)

    @property
    def scheduler_config(self) -> dict[str, object]:
        return dict(self.config.scheduler)

    def snapshot_controller_metrics(self) -> str:
        """Its snapshot-controller's ``/metrics`` on loopback (``component_metrics``)."""
        return component_metrics.snapshot_controller_metrics(self.layout, self.name)

    def controller_manager_metrics(self) -> str:
        """Its kube-controller-manager's ``/metrics`` on loopback (``component_metrics``)."""
        return component_metrics.controller_manager_metrics(self.layout, self.name)

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
        """Bring the cluster up from nothing (a previous run in its directory is
        removed first) and wait until it is ready; the result is also ``up_result``."""
        refuse_cluster(f"bring up local cluster {self.config.name!r}")
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
        check_socket_paths(self.config, self.layout)
        previous = RunState.load(root) if root.exists() else None
        if root.exists():
            report = teardown(root, previous)
            self.progress(f"cleaned up a previous run in {root} ({format_teardown(report)})")
        tools = Tools.locate(self.config.tools_bin)
        root.mkdir(parents=True)
        state = RunState(run_dir=root, cluster=self.config.name, started_at=time.time())
        state.config = self.config.model_dump(mode="json")
        state.cgroup_root = f"/csi-harness/{self.config.name}"
        state.bridge = self.network.bridge
        for name in (
            "etcd",
            "etcd-peer",
            "apiserver",
            "controller-manager",
            "scheduler",
            "snapshot-controller",
        ):
            state.ports[name] = free_port()
        nodes = self.config.nodes()
        for node in nodes:
            if node.type is NodeType.KUBELET:
                state.ports[f"kubelet-{node.name}"] = free_port()
                state.ports[f"kubelet-healthz-{node.name}"] = free_port()
            state.nodes[node.name] = node.model_dump(mode="json")
        state.save()
        supervisor = Supervisor(state, self.layout.logs)
        self._supervisor = supervisor
        self.progress(f"local cluster {self.config.name!r} in {root}")
        try:
            self._bring_up(tools, state, supervisor, phase)
        except (ComponentFailed, WaitTimeout, OSError, RuntimeError) as exc:
            state.phase = "failed"
            state.save()
            raise ClusterUpFailed(f"cluster up failed: {exc}\nlogs: {self.layout.logs}") from exc
        state.phase = "ready"
        state.ready_after = time.monotonic() - started
        state.save()
        self.progress(f"cluster ready in {state.ready_after:.1f}s; KUBECONFIG={self.kubeconfig}")
        self.up_result = UpResult(self.kubeconfig, nodes, state.ready_after, phases)
        return self.up_result

    def _bring_up(
        self,
        tools: Tools,
        state: RunState,
        supervisor: Supervisor,
        phase: Callable[[str], None],
    ) -> None:
        config = self.config
        kube = start_control_plane(
            config, self.layout, self.network, tools, state, supervisor, phase
        )

        self._tools, self.kube = tools, kube
        self._start_zygote(supervisor)
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

    def _start_zygote(self, supervisor: Supervisor) -> None:
        """The process that forks every driver's csi-mock instances (``csi_mock.zygote``):
        each then starts in milliseconds instead of importing csi-mock again."""
        socket_path = self.layout.zygote_socket
        supervisor.start(ZYGOTE, zygote_argv(socket_path))
        wait_for(
            f"the zygote to serve {socket_path}",
            partial(socket_probe, socket_path),
            timeout=30,
            interval=0.05,
            check=partial(supervisor.check_alive, [ZYGOTE]),
        )
        self._zygote = Zygote(socket_path)

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
            zygote=self._zygote,
        )

    @property
    def concurrent_drivers(self) -> bool:
        return True

    def deploy_driver(self, spec: DriverDeployment) -> LocalDriver:
        """Deploy a driver from ``spec`` beside the running ones (its name and suffix
        must be its own) and wait until it is ready, as at bring-up."""
        self._client_for("deploy_driver")
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
        kube = self._client_for("redeploy_driver")
        names = [n.name for n in self.config.nodes()]
        if self.driver is not None:
            self.driver.stop()
            wait_deregistered(
                kube, [self.driver.spec.name], names, timeout=self.config.timeout_seconds
            )
        self._set_config(self.config.model_copy(update={"driver": spec}))
        self.driver = self._new_driver(spec)
        self.driver.deploy()
        return self.driver

    def restart_scheduler(
        self, scheduler: Mapping[str, object], feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        """Restart kube-scheduler with ``scheduler`` merged into its configuration
        (e.g. a VolumeBinding shape) and ``feature_gates`` set over its own; wait until
        it serves /healthz."""
        supervisor = self._supervisor_for("restart_scheduler")
        update: dict[str, object] = {"scheduler": dict(scheduler)}
        if feature_gates:
            gates = dict(self.config.component_feature_gates)
            gates[Component.SCHEDULER] = {**gates.get(Component.SCHEDULER, {}), **feature_gates}
            update["component_feature_gates"] = gates
        self._set_config(self.config.model_copy(update=update))
        restarts.restart_scheduler(supervisor, self._tools, self.config, self.layout)

    def own_scheduler(
        self,
        name: str,
        profiles: Sequence[Mapping[str, object]],
        feature_gates: Mapping[str, bool] | None = None,
    ) -> AbstractContextManager[None]:
        """A kube-scheduler process of the caller's own beside the cluster's, serving
        ``profiles`` until the block ends (``own_scheduler.own_scheduler``)."""
        supervisor = self._supervisor_for("own_scheduler")
        return own_scheduler(
            supervisor, self._tools, self.config, self.layout, name, profiles, feature_gates
        )

    def restart_kubelet(self, node: str) -> None:
        """Stop ``node``'s kubelet and start it again with the same arguments, as a
        node's service manager would; wait until it serves /healthz and has posted the
        node's status again. Its pods' containers keep running under containerd
        meanwhile. A simulated node has no kubelet: Unsupported."""
        restarts.restart_kubelet(
            self._supervisor_for("restart_kubelet"),
            self._tools,
            self._client_for("restart_kubelet"),
            node,
            cluster=self.name,
            timeout=self.config.timeout_seconds,
        )

    def _supervisor_for(self, what: str) -> Supervisor:
        if self._supervisor is None:
            raise RuntimeError(f"{what} needs a cluster brought up or attached by this object")
        return self._supervisor

    def _client_for(self, what: str) -> Client:
        if self.kube is None:
            raise RuntimeError(f"{what} needs a cluster brought up or attached by this object")
        return self.kube

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
        if ZYGOTE in state.processes:  # (a cluster from before the zygote has none)
            cluster._zygote = Zygote(cluster.layout.zygote_socket)
        cluster.driver = cluster._new_driver(config.driver)
        cluster.attached = True
        return cluster

    # down / status -------------------------------------------------------------

    def down(self) -> TeardownReport:
        """Remove every process, mount, cgroup, link and file of the cluster."""
        refuse_cluster(f"tear down local cluster {self.config.name!r}")
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


__all__ = ["ClusterUpFailed", "LocalCluster", "UpResult", "format_teardown", "log_tail"]
