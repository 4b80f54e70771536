"""The driver on the local provider: csi-mock processes and the real CSI sidecars.

* central mode: one csi-mock controller (``mode: controller``) with
  external-provisioner (``--enable-capacity``), external-attacher and
  external-resizer, and one csi-mock node instance per node;
* distributed mode (node-local storage): no controller instance; every node's
  csi-mock serves controller and node of that node's pool (``mode: all``), with an
  external-provisioner of its own (``--node-deployment``), and no external-resizer
  (it has no per-node mode, see ``_start_sidecars``);
* every node instance serves its CSI socket in the node's kubelet directory and
  registers through the node's ``plugins_registry`` (csi-mock serves the kubelet's
  plugin-registration service itself);
* the CSIDriver object and StorageClasses from ``deploy/kubernetes/``.

All processes run under the cluster's Supervisor, so teardown finds them.
``LocalDriver`` is the local provider's ``csi_harness._internal.providers.base.Driver``.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import yaml
from lightkube import Client

from csi_harness._internal.core.processes import ComponentFailed, Supervisor
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.core.waiting import socket_probe, wait_for
from csi_harness._internal.core.zygote import Zygote
from csi_harness._internal.deploy import local_objects
from csi_harness._internal.deploy.local_instances import (
    SIMULATED_NODES_COMPONENT,
    DriverNode,
    node_component,
    node_instance_config,
)
from csi_harness._internal.deploy.readiness import drop_topology_labels, wait_driver_ready
from csi_harness._internal.deploy.sidecars import (
    DISTRIBUTED_PROVISIONER_FLAGS,
    attacher_flags,
    provisioner_flags,
    resizer_flags,
    snapshotter_flags,
)
from csi_harness._internal.deploy.spec import (
    CONTROLLER,
    DriverDeployment,
    ProvisionerMode,
    capacity_instance,
    check_same_driver,
    driver_config_for,
)
from csi_harness._internal.kube.nodes import ClusterNode
from csi_mock.admin.client import DEFAULT_TIMEOUT, AdminClient
from csi_mock.proto import csi_pb2, csi_pb2_grpc

__all__ = ["DriverNode", "LocalDriver"]

FIELD_MANAGER = "csi-harness"
CSI_CALL_TIMEOUT = 5.0
"""Seconds for a CSI call the harness makes itself (GetCapacity, NodeGetInfo)."""


class LocalDriver:
    def __init__(
        self,
        spec: DriverDeployment,
        *,
        root: Path,
        tools: Tools,
        supervisor: Supervisor,
        nodes: Sequence[DriverNode],
        kubeconfig: Path,
        kube: Client,
        progress: Callable[[str], None] = lambda _: None,
        ready_timeout: float = 120,
        zygote: Zygote | None = None,
    ) -> None:
        self.spec = spec
        self.ready_timeout = ready_timeout
        self.zygote = zygote
        """Forks the csi-mock instances when given; else each is a new interpreter."""
        self.root = root
        self.tools = tools
        self.supervisor = supervisor
        self.driver_nodes = sorted(nodes, key=lambda n: n.name)
        self.kubeconfig = kubeconfig
        self.kube = kube
        self._stopped: set[str] = set()
        """Components ``stop_component`` stopped."""
        self.progress = progress
        self._log_starts: dict[str, int] = {}
        """Component -> the size its log had when this deployment started it."""

    # What a test sees (csi_harness._internal.providers.base.Driver) -------------------------------

    def adopt_spec(self, spec: DriverDeployment) -> None:
        check_same_driver(self.spec, spec)
        self.spec = spec

    @property
    def nodes(self) -> list[ClusterNode]:
        return [n.node for n in self.driver_nodes]

    def instances(self) -> list[str]:
        nodes = [n.name for n in self.driver_nodes]
        return nodes if self.distributed else [CONTROLLER, *nodes]

    def admin(self, instance: str = CONTROLLER, *, timeout: float = DEFAULT_TIMEOUT) -> AdminClient:
        return AdminClient(self.admin_socket(instance), timeout=timeout)

    def get_capacity(
        self, segment: Mapping[str, str], parameters: Mapping[str, str]
    ) -> tuple[int, int]:
        """GetCapacity of the instance that answers for ``segment``
        (``capacity_instance``)."""
        instance = capacity_instance(self.spec, segment)
        socket = (
            self.controller_socket
            if instance == CONTROLLER
            else self._driver_node(instance).csi_socket
        )
        request = csi_pb2.GetCapacityRequest(
            parameters=dict(parameters), accessible_topology=csi_pb2.Topology(segments=segment)
        )
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            response = csi_pb2_grpc.ControllerStub(channel).GetCapacity(
                request, timeout=CSI_CALL_TIMEOUT
            )
        return int(response.available_capacity), int(response.maximum_volume_size.value)

    def node_get_info(self, node: str) -> tuple[str, dict[str, str]]:
        socket = self._driver_node(node).csi_socket
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            response = csi_pb2_grpc.NodeStub(channel).NodeGetInfo(
                csi_pb2.NodeGetInfoRequest(), timeout=CSI_CALL_TIMEOUT
            )
        return str(response.node_id), dict(response.accessible_topology.segments)

    def components(self) -> list[str]:
        nodes = [n.name for n in self.driver_nodes]
        instances = list(dict.fromkeys(self._instance_component(i) for i in self.instances()))
        if self.distributed:
            return [*instances, *(f"csi-provisioner-{node}" for node in nodes)]
        sidecars = ["csi-provisioner", "csi-attacher"]
        if self.spec.resizer:
            sidecars.append("csi-resizer")
        if self.spec.snapshots is not None:
            sidecars.append("csi-snapshotter")
        return [*instances, *sidecars]

    def component_log(self, component: str) -> str:
        """The component's log file from where it was when this deployment started it
        (the supervisor appends every start of a process to the same file)."""
        self._check_component(component)
        process = self.process(component)
        with self.supervisor.log_path(process).open("rb") as log:
            log.seek(self._log_starts.get(process, 0))
            return log.read().decode(errors="replace")

    def stop_component(self, component: str) -> None:
        self._check_component(component)
        self._stopped.add(component)
        self.supervisor.stop(self.process(component))

    def resume_paused(self) -> list[str]:
        """None to resume: a stopped process is gone (``stop_component``)."""
        return []

    def failed_component(self) -> str | None:
        if self._stopped:
            return "stopped: " + ", ".join(sorted(self._stopped))
        try:
            self.check_alive()
        except ComponentFailed as failed:
            return str(failed)
        return None

    def process(self, component: str) -> str:
        """The supervisor's name of one of ``components()``: the component's name with
        the deployment's suffix, so that the processes of concurrent drivers differ."""
        return component + self.spec.suffix

    def processes(self) -> list[str]:
        return [self.process(component) for component in self.components()]

    def stop_order(self) -> list[str]:
        """The processes, sidecars first: a sidecar whose CSI socket goes away exits by
        itself ("lost connection to CSI driver"), and until its own stop removed its
        record, another pytest worker attaching to the cluster would find a recorded
        process dead (ClusterNotRunning, seen in CI)."""
        instances = {self.process(self._instance_component(i)) for i in self.instances()}
        return sorted(self.processes(), key=lambda name: name in instances)

    def check_alive(self) -> None:
        """Raise ComponentFailed if a process of this driver has exited."""
        self.supervisor.check_alive(self.processes())

    # Paths -----------------------------------------------------------------

    @property
    def controller_socket(self) -> Path:
        return self.root / CONTROLLER / "csi.sock"

    @property
    def distributed(self) -> bool:
        return self.spec.provisioner_mode is ProvisionerMode.DISTRIBUTED

    def admin_socket(self, instance: str) -> Path:
        """``instance`` is one of ``instances()``: "controller" or a node name."""
        if instance == CONTROLLER and self.distributed:
            raise ValueError(
                "a distributed deployment has no controller instance: every node's csi-mock "
                "serves its own pool; use admin_socket(<node name>)"
            )
        if instance not in self.instances():
            raise ValueError(
                f"{instance!r} is no csi-mock instance of this driver: "
                f"{', '.join(self.instances())}"
            )
        return self.root / instance / "admin.sock"

    def _driver_node(self, name: str) -> DriverNode:
        for node in self.driver_nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.driver_nodes)
        raise ValueError(f"{name!r} is not a node of this driver: {known}")

    def _check_component(self, component: str) -> None:
        if component not in self.components():
            raise ValueError(
                f"{component!r} is no component of this driver: {', '.join(self.components())}"
            )

    @property
    def _topology(self) -> list[tuple[str, str | None]]:
        return [(n.name, n.zone) for n in self.driver_nodes]

    # Lifecycle -------------------------------------------------------------

    def deploy(self) -> None:
        """Start from empty state and wait until the driver is registered on every
        node and, when the CSIDriver asks for it, its complete capacity set is
        published; fails at once if one of its processes exits. A deployment that
        fails is removed again."""
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.start()
            self.wait_ready()
        except BaseException:
            self.remove()
            raise

    def wait_ready(self) -> None:
        """Registered on every node and, when the CSIDriver asks for it, the complete
        capacity set published; fails at once if one of its processes exits."""
        wait_driver_ready(
            self.kube,
            self.spec,
            [n.name for n in self.driver_nodes],
            timeout=self.ready_timeout,
            check=self.check_alive,
        )

    def remove(self) -> None:
        """Stop the driver and delete its objects, its topology labels and its state."""
        self.stop()
        self.remove_objects()
        drop_topology_labels(self.kube, self.spec, [n.name for n in self.driver_nodes])
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self) -> None:
        self.apply_objects()
        # The csi-mock processes start in parallel: the controller, one per node with
        # a kubelet, and one serving every simulated node's instance. Then wait for
        # every instance's socket.
        sockets = {} if self.distributed else {CONTROLLER: self._start_controller()}
        simulated = [node for node in self.driver_nodes if node.simulated]
        for node in self.driver_nodes:
            if not node.simulated:
                sockets[node.name] = self._start_instances(
                    node_component(node.name), {node.name: self._node_config(node)}
                )[node.name]
        if simulated:
            configs = {node.name: self._node_config(node) for node in simulated}
            sockets |= self._start_instances(SIMULATED_NODES_COMPONENT, configs)
        # A process starts its instances one after another (about 10 ms each).
        timeout = 30 + 0.05 * len(sockets)
        for instance, socket in sockets.items():
            process = self.process(self._instance_component(instance))
            wait_for(
                f"{process} to serve {socket}",
                partial(socket_probe, socket),
                timeout=timeout,
                interval=0.05,
                check=partial(self.supervisor.check_alive, [process]),
            )
        self._start_sidecars()

    def stop(self) -> None:
        """Stop every process of the driver and delete its CSIStorageCapacity objects
        (they have no owner on this provider)."""
        for name in self.stop_order():
            self.supervisor.stop(name)
        local_objects.delete_capacity_objects(self.kube, self.spec)

    def apply_objects(self) -> None:
        local_objects.apply_objects(self.kube, self.spec)

    def remove_objects(self) -> None:
        """Delete what ``apply_objects`` made and no other deployment shares
        (``local_objects.remove_objects``)."""
        local_objects.remove_objects(self.kube, self.spec)

    def _write_config(self, instance: str, config: dict[str, Any]) -> Path:
        path = self.root / instance / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _start_process(
        self,
        component: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        zygote: tuple[Zygote, list[str]] | None = None,
    ) -> None:
        process = self.process(component)
        log = self.supervisor.log_path(process)
        self._log_starts[process] = log.stat().st_size if log.exists() else 0
        self.supervisor.start(process, argv, env=env, zygote=zygote)

    def _start_instances(
        self, component: str, configs: Mapping[str, dict[str, Any]]
    ) -> dict[str, Path]:
        """One csi-mock process serving an instance per configuration (``serve
        --config a --config b ...``); each instance's CSI socket."""
        args = ["serve"]
        for instance, config in configs.items():
            args.append(f"--config={self._write_config(instance, config)}")
        argv = [sys.executable, "-m", "csi_mock", *args]
        forked = (self.zygote, args) if self.zygote is not None else None
        self._start_process(component, argv, zygote=forked)
        return {
            instance: Path(str(config["endpoint"]).removeprefix("unix://"))
            for instance, config in configs.items()
        }

    def _instance_component(self, instance: str) -> str:
        """The component (process) serving a csi-mock instance."""
        if instance == CONTROLLER:
            return "csi-mock-controller"
        return (
            SIMULATED_NODES_COMPONENT
            if self._driver_node(instance).simulated
            else (node_component(instance))
        )

    def _start_controller(self) -> Path:
        directory = self.root / CONTROLLER
        config = driver_config_for(
            self.spec,
            mode="controller",
            nodes=self._topology,
            endpoint=f"unix://{self.controller_socket}",
            state_dir=directory / "state",
            backend_dir=self.root / "backend",
            admin={"socket": str(self.admin_socket(CONTROLLER))},
        )
        return self._start_instances("csi-mock-controller", {CONTROLLER: config})[CONTROLLER]

    def _node_config(self, node: DriverNode) -> dict[str, Any]:
        return node_instance_config(
            self.spec,
            node,
            distributed=self.distributed,
            root=self.root,
            admin_socket=self.admin_socket(node.name),
        )

    def _sidecar_argv(self, sidecar: str, csi_socket: Path, flags: list[str]) -> list[str]:
        return [
            self.tools[sidecar],
            f"--csi-address={csi_socket}",
            f"--kubeconfig={self.kubeconfig}",
            *flags,
        ]

    def _start_sidecars(self) -> None:
        env = {"NAMESPACE": self.spec.namespace}
        # No pod owns these processes: CSIStorageCapacity objects get no owner.
        provisioner = provisioner_flags(self.spec, capacity_ownerref_level=-1)
        if self.distributed:
            for node in self.driver_nodes:
                argv = self._sidecar_argv(
                    "csi-provisioner",
                    node.csi_socket,
                    provisioner + DISTRIBUTED_PROVISIONER_FLAGS,
                )
                self._start_process(
                    f"csi-provisioner-{node.name}", argv, env={**env, "NODE_NAME": node.name}
                )
            # No attacher: the spec refuses attach_required with distributed provisioning.
            # No resizer: external-resizer has no --node-deployment, so one per node would
            # act on every claim of the driver and ask its own node's instance, which
            # knows only its own pool's volumes (NotFound, which the resizer takes as
            # infeasible); one central resizer has no controller to ask.
        else:
            socket = self.controller_socket
            self._start_process(
                "csi-provisioner",
                self._sidecar_argv("csi-provisioner", socket, provisioner),
                env=env,
            )
            self._start_process(
                "csi-attacher",
                self._sidecar_argv("csi-attacher", socket, attacher_flags(self.spec)),
            )
            if self.spec.resizer:
                self._start_process(
                    "csi-resizer",
                    self._sidecar_argv("csi-resizer", socket, resizer_flags(self.spec)),
                )
            if self.spec.snapshots is not None:
                self._start_process(
                    "csi-snapshotter",
                    self._sidecar_argv("csi-snapshotter", socket, snapshotter_flags(self.spec)),
                )
        time.sleep(0.2)
        self.check_alive()
