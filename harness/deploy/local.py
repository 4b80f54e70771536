"""The driver on the local provider: csi-mock processes and the real CSI sidecars.

* central mode: one csi-mock controller (``mode: controller``) with
  external-provisioner (``--enable-capacity``) and external-attacher, and one
  csi-mock node instance per node;
* distributed mode (node-local storage): no controller instance; every node's
  csi-mock serves controller and node of that node's pool (``mode: all``), with an
  external-provisioner of its own (``--node-deployment``);
* every node instance serves its CSI socket in the node's kubelet directory and
  registers through the node's ``plugins_registry`` (csi-mock serves the kubelet's
  plugin-registration service itself);
* the CSIDriver object and StorageClasses from ``deploy/kubernetes/``.

All processes run under the cluster's Supervisor, so teardown finds them.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity, StorageClass

from harness.deploy.spec import (
    DRIVER_NAMESPACE,
    DriverDeployment,
    ProvisionerMode,
    csidriver_object,
    driver_config_for,
    storage_class_objects,
)
from harness.local.processes import Supervisor
from harness.local.tools import Tools
from harness.local.waiting import socket_probe, wait_for

FIELD_MANAGER = "csi-harness"


@dataclass(frozen=True)
class DriverNode:
    name: str
    zone: str | None
    kubelet_root: Path
    simulated: bool

    @property
    def csi_socket(self) -> Path:
        return self.kubelet_root / "plugins" / "csi-mock" / "csi.sock"

    @property
    def plugins_registry(self) -> Path:
        return self.kubelet_root / "plugins_registry"


class LocalDriver:
    def __init__(
        self,
        spec: DriverDeployment,
        *,
        root: Path,
        tools: Tools,
        supervisor: Supervisor,
        nodes: list[DriverNode],
        kubeconfig: Path,
        kube: Client,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.spec = spec
        self.root = root
        self.tools = tools
        self.supervisor = supervisor
        self.nodes = nodes
        self.kubeconfig = kubeconfig
        self.kube = kube
        self.progress = progress

    # Paths -----------------------------------------------------------------

    @property
    def controller_socket(self) -> Path:
        return self.root / "controller" / "csi.sock"

    @property
    def distributed(self) -> bool:
        return self.spec.provisioner_mode is ProvisionerMode.DISTRIBUTED

    def admin_socket(self, instance: str) -> Path:
        """``instance`` is "controller" or a node name."""
        if instance == "controller" and self.distributed:
            raise ValueError(
                "a distributed deployment has no controller instance: every node's csi-mock "
                "serves its own pool; use admin_socket(<node name>)"
            )
        return self.root / instance / "admin.sock"

    def admin_sockets(self) -> dict[str, Path]:
        """Every csi-mock instance of the deployment ("controller", node names) -> its
        admin API socket."""
        instances = [n.name for n in self.nodes]
        if not self.distributed:
            instances.insert(0, "controller")
        return {instance: self.admin_socket(instance) for instance in instances}

    @property
    def _topology(self) -> list[tuple[str, str | None]]:
        return [(n.name, n.zone) for n in self.nodes]

    # Lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self.apply_objects()
        # csi-mock instances start in parallel (each is a Python interpreter that
        # takes about a second to import); then wait for all their sockets.
        sockets = {} if self.distributed else {"csi-mock-controller": self._start_controller()}
        for node in self.nodes:
            sockets[f"csi-mock-node-{node.name}"] = self._start_node(node)
        for process, socket in sockets.items():
            wait_for(
                f"{process} to serve {socket}",
                partial(socket_probe, socket),
                timeout=30,
                interval=0.05,
                check=partial(self.supervisor.check_alive, [process]),
            )
        self._start_sidecars()

    def stop(self) -> None:
        """Stop every process of the driver and delete its CSIStorageCapacity objects
        (they have no owner on this provider)."""
        for name in [n for n in list(self.supervisor.state.processes) if _is_driver_process(n)]:
            self.supervisor.stop(name)
        with contextlib.suppress(ApiError):
            for capacity in self.kube.list(CSIStorageCapacity, namespace=DRIVER_NAMESPACE):
                if capacity.metadata and capacity.metadata.name:
                    self.kube.delete(
                        CSIStorageCapacity, capacity.metadata.name, namespace=DRIVER_NAMESPACE
                    )

    def apply_objects(self) -> None:
        with contextlib.suppress(ApiError):
            self.kube.create(
                cast(Namespace, Namespace.from_dict({"metadata": {"name": DRIVER_NAMESPACE}}))
            )
        if self.spec.csidriver:
            # attachRequired is immutable: replace the object when it differs.
            with contextlib.suppress(ApiError):
                self.kube.delete(CSIDriver, self.spec.name)
            wait_for(
                "the old CSIDriver to be deleted",
                partial(_absent_probe, self.kube, CSIDriver, self.spec.name),
                timeout=10,
            )
            self.kube.create(cast(Any, from_dict(csidriver_object(self.spec))))
        else:
            with contextlib.suppress(ApiError):
                self.kube.delete(CSIDriver, self.spec.name)
        for obj in storage_class_objects(self.spec):
            name: str = obj["metadata"]["name"]
            with contextlib.suppress(ApiError):
                self.kube.delete(StorageClass, name)
            wait_for(
                f"StorageClass {name} to be deleted",
                partial(_absent_probe, self.kube, StorageClass, name),
                timeout=10,
            )
            self.kube.create(cast(Any, from_dict(obj)))

    def _write_config(self, instance: str, config: dict[str, Any]) -> Path:
        path = self.root / instance / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _csi_mock(self, process: str, instance: str, config: dict[str, Any], socket: Path) -> Path:
        path = self._write_config(instance, config)
        argv = [sys.executable, "-m", "csi_mock", "serve", f"--config={path}"]
        self.supervisor.start(process, argv)
        return socket

    def _start_controller(self) -> Path:
        directory = self.root / "controller"
        config = driver_config_for(
            self.spec,
            mode="controller",
            nodes=self._topology,
            endpoint=f"unix://{self.controller_socket}",
            state_dir=directory / "state",
            backend_dir=self.root / "backend",
            admin={"socket": str(self.admin_socket("controller"))},
        )
        return self._csi_mock("csi-mock-controller", "controller", config, self.controller_socket)

    def _start_node(self, node: DriverNode) -> Path:
        # Distributed: node-local storage, so every node's instance is controller and
        # node of its own pool, and its external-provisioner asks it alone.
        config = driver_config_for(
            self.spec,
            mode="all" if self.distributed else "node",
            nodes=[(node.name, node.zone)] if self.distributed else self._topology,
            node=(node.name, node.zone),
            endpoint=f"unix://{node.csi_socket}",
            state_dir=self.root / node.name / "state",
            backend_dir=self.root / "backend",
            admin={"socket": str(self.admin_socket(node.name))},
        )
        config["node"]["mount"] = "directory" if node.simulated else "bind"
        config["node"]["registration"] = {"plugins_registry": str(node.plugins_registry)}
        return self._csi_mock(f"csi-mock-node-{node.name}", node.name, config, node.csi_socket)

    def _provisioner_argv(self, csi_socket: Path) -> list[str]:
        return [
            self.tools["csi-provisioner"],
            f"--csi-address={csi_socket}",
            f"--kubeconfig={self.kubeconfig}",
            "--leader-election=false",
            "--enable-capacity",
            # No pod owns these processes: CSIStorageCapacity objects get no owner.
            "--capacity-ownerref-level=-1",
            f"--capacity-poll-interval={self.spec.capacity_poll_interval}",
            "--kube-api-capacity-qps=50",
            "--kube-api-capacity-burst=100",
            "--extra-create-metadata",
            *(["--strict-topology"] if self.spec.strict_topology else []),
            "--timeout=15s",
            "--retry-interval-start=500ms",
            "--retry-interval-max=5s",
            "--v=4",
        ]

    def _start_sidecars(self) -> None:
        env = {"NAMESPACE": DRIVER_NAMESPACE}
        if self.distributed:
            for node in self.nodes:
                argv = self._provisioner_argv(node.csi_socket)
                argv += ["--node-deployment", "--node-deployment-immediate-binding=false"]
                self.supervisor.start(
                    f"csi-provisioner-{node.name}", argv, env={**env, "NODE_NAME": node.name}
                )
            # No attacher: the spec refuses attach_required with distributed provisioning.
        else:
            self._start_central_sidecars(env)
        time.sleep(0.2)
        self.supervisor.check_alive()

    def _start_central_sidecars(self, env: dict[str, str]) -> None:
        self.supervisor.start(
            "csi-provisioner", self._provisioner_argv(self.controller_socket), env=env
        )
        self.supervisor.start(
            "csi-attacher",
            [
                self.tools["csi-attacher"],
                f"--csi-address={self.controller_socket}",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-election=false",
                "--timeout=15s",
                "--retry-interval-start=500ms",
                "--retry-interval-max=5s",
                "--v=4",
            ],
        )


def _is_driver_process(name: str) -> bool:
    return name.startswith(("csi-mock-", "csi-provisioner", "csi-attacher"))


def _absent_probe(kube: Client, resource: Any, name: str) -> tuple[bool, str]:
    return _absent(kube, resource, name), f"{name} still exists"


def _absent(kube: Client, resource: Any, name: str) -> bool:
    try:
        kube.get(resource, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return True
        raise
    return False
