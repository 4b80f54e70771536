"""Any running cluster reached by a kubeconfig, with csi-mock deployed in it as pods.

``KubeconfigCluster`` implements ``csi_harness._internal.providers.base.Cluster`` for
a cluster the harness reaches only through its API server: its nodes are read from
the API (control-plane nodes that take no pods are left out), the driver is deployed
in-cluster (``csi_harness._internal.deploy.incluster``), and the feature gates of its
kube-scheduler and kubelets are read from their pods and ``/configz``
(``FeatureGates``). It has none of the capabilities that need the cluster's making
(restarts, component metrics). The driver and sidecar images must be on the nodes
already or pullable by them (``csi-harness images`` prints how they are built).
Drivers with names and suffixes of their own run side by side (``deploy_driver``),
each in its own namespace, so tests can run at the same time; ``redeploy_driver``
replaces the cluster's own driver in the ``csi-mock`` namespace.

Shared by the providers that deploy csi-mock this way, and by no other module of
theirs: the existing provider's clusters are ``KubeconfigCluster`` themselves, kind's
(``csi_harness._internal.providers.kind.cluster``) a subclass with the capabilities
a cluster the harness made has. The providers stay independent of each other (the
import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node, Pod

from csi_harness._internal.deploy.images import DRIVER_IMAGE, default_sidecar_images
from csi_harness._internal.deploy.incluster import InClusterDriver
from csi_harness._internal.deploy.spec import DriverDeployment, check_side_by_side
from csi_harness._internal.kube.apiproxy import KubeconfigUnsupported, api_server_access
from csi_harness._internal.kube.scheduler_pod import scheduler_pod
from csi_harness._internal.providers.base import ClusterNode, Driver, Unsupported
from csi_mock.admin.client import AdminClient

ZONE_LABEL = "topology.kubernetes.io/zone"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


class KubeconfigCluster:
    """A cluster known by its kubeconfig; the suites deploy csi-mock into it."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        name: str | None = None,
        default_driver: DriverDeployment | None = None,
        driver_image: str = DRIVER_IMAGE,
        sidecar_images: Mapping[str, str] | None = None,
        kubectl: str = "kubectl",
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.name = name or kubeconfig.parent.name
        self.default_driver = default_driver or DriverDeployment()
        self.driver_image = driver_image
        self.sidecar_images = dict(sidecar_images or default_sidecar_images())
        self.kubectl = kubectl
        self.progress = progress
        self.controller_host: str | None = None
        """Node for the controller Deployments; None: the first driver node."""
        self.driver: InClusterDriver | None = None
        self._kube: Client | None = None
        self._generation = 0

    @property
    def kube(self) -> Client:
        if self._kube is None:
            self._kube = Client(KubeConfig.from_file(self.kubeconfig), field_manager="csi-harness")
        return self._kube

    def check_reachable(self) -> None:
        """Raise Unsupported (with the API's answer) unless the API server answers and
        at least one node takes pods."""
        try:
            nodes = self.nodes()
        except Exception as exc:  # ApiError, or any httpx transport error
            raise Unsupported(
                f"the API server of {self.kubeconfig} does not answer: {exc}"
            ) from exc
        if not nodes:
            raise Unsupported(f"the cluster of {self.kubeconfig} has no node that takes pods")

    def nodes(self) -> list[ClusterNode]:
        nodes = []
        for node in self.kube.list(Node):
            labels = (node.metadata.labels if node.metadata else None) or {}
            if CONTROL_PLANE_LABEL in labels and _has_no_schedule_taint(node):
                continue
            name = str(node.metadata.name if node.metadata else "")
            nodes.append(ClusterNode(name, labels.get(ZONE_LABEL), runs_pods=True))
        return sorted(nodes, key=lambda n: n.name)

    def redeploy_driver(self, spec: DriverDeployment) -> InClusterDriver:
        if self.driver is not None:
            self.driver.remove()
        self.driver = self._new_driver(spec)
        self.driver.deploy()
        return self.driver

    def _new_driver(
        self, spec: DriverDeployment, nodes: Sequence[ClusterNode] | None = None
    ) -> InClusterDriver:
        self._generation += 1
        return InClusterDriver(
            spec,
            nodes=self.nodes() if nodes is None else nodes,
            kube=self.kube,
            kubeconfig=self.kubeconfig,
            kubectl=self.kubectl,
            image=self.driver_image,
            sidecar_images=self.sidecar_images,
            generation=str(self._generation),
            controller_host=self.controller_host,
            progress=self.progress,
        )

    def scheduler_feature_gate(self, gate: str) -> bool | None:
        """From the kube-scheduler pod's ``--feature-gates`` (kubeadm-style clusters);
        None when it is not set there or the pod is not visible."""
        try:
            pods = list(
                self.kube.list(Pod, namespace="kube-system", labels={"component": "kube-scheduler"})
            )
        except ApiError:
            return None
        for pod in pods:
            for container in pod.spec.containers if pod.spec else []:
                for arg in (container.command or []) + (container.args or []):
                    value = _gate_value(arg, gate)
                    if value is not None:
                        return value
        return None

    def kubelet_feature_gate(self, gate: str) -> bool | None:
        """From every kubelet's running configuration (``/configz`` through the API
        server's node proxy); None when a kubelet does not set it, the kubelets
        disagree, or one cannot be asked."""
        values: set[bool | None] = set()
        try:
            access = api_server_access(self.kubeconfig)
            with access.client(timeout=10) as http:
                for node in self.kube.list(Node):
                    name = node.metadata.name if node.metadata else None
                    response = http.get(f"{access.node_proxy_url(name or '')}/configz")
                    response.raise_for_status()
                    config = response.json().get("kubeletconfig") or {}
                    values.add((config.get("featureGates") or {}).get(gate))
        except (ApiError, httpx.HTTPError, KubeconfigUnsupported, ValueError, AttributeError):
            return None
        return values.pop() if len(values) == 1 else None

    def own_scheduler(
        self,
        name: str,
        profiles: Sequence[Mapping[str, object]],
        feature_gates: Mapping[str, bool] | None = None,
    ) -> AbstractContextManager[None]:
        """A kube-scheduler pod of the caller's own beside the cluster's, serving
        ``profiles`` until the block ends (``scheduler_pod.scheduler_pod``): on a
        cluster whose scheduler runs as a pod (kubeadm, kind)."""
        return scheduler_pod(self.kube, name, profiles, feature_gates=feature_gates)

    @property
    def log_dir(self) -> Path | None:
        """None: component logs come from the pods (``Driver.component_log``)."""
        return None

    def admin_instances(self) -> Mapping[str, AdminClient]:
        if self.driver is None:
            return {}
        return {instance: self.driver.admin(instance) for instance in self.driver.instances()}

    @property
    def concurrent_drivers(self) -> bool:
        """Yes: a suffixed in-cluster deployment has its own namespace, cluster-scoped
        names and host directories (``csi_harness._internal.deploy.incluster_objects``)."""
        return True

    def deploy_driver(self, spec: DriverDeployment) -> InClusterDriver:
        """Deploy a driver from ``spec`` beside the running ones (its name and suffix
        must be its own) and wait until it is ready; ``driver`` stays as it is. A
        deployment that fails is removed again."""
        check_side_by_side(spec, self.driver.spec if self.driver is not None else None)
        driver = self._new_driver(spec)
        try:
            driver.deploy()
        except BaseException:
            self.remove_driver(driver)
            raise
        return driver

    def handover(self, driver: Driver) -> dict[str, object]:
        """``DriverHandover``: see ``InClusterDriver.handover``."""
        if not isinstance(driver, InClusterDriver):
            raise TypeError(f"{driver!r} was not deployed by this cluster")
        return driver.handover()

    def adopt_driver(self, state: Mapping[str, Any]) -> InClusterDriver:
        """``DriverHandover``: a driver another process deployed on this cluster, on the
        nodes it was deployed on (no API call: nothing here can fail on a busy cluster)."""
        nodes = [ClusterNode(str(name), zone, bool(pods)) for name, zone, pods in state["nodes"]]
        driver = self._new_driver(DriverDeployment.model_validate(state["spec"]), nodes)
        driver.take_over(state)
        return driver

    def remove_driver(self, driver: Driver | None = None) -> None:
        """Delete a driver (None: the cluster's own, ``driver``): its workloads, its
        objects, its CSIStorageCapacity and its topology labels
        (``InClusterDriver.remove``)."""
        if driver is None or driver is self.driver:
            driver, self.driver = self.driver, None
            if driver is None:
                return
        if not isinstance(driver, InClusterDriver):
            raise TypeError(f"{driver!r} was not deployed by this cluster")
        with contextlib.suppress(ApiError):
            driver.remove()


def _has_no_schedule_taint(node: Any) -> bool:
    taints = (node.spec.taints if node.spec else None) or []
    return any(t.effect == "NoSchedule" for t in taints)


def _gate_value(arg: str, gate: str) -> bool | None:
    match = re.match(r"--feature-gates=(.*)", arg)
    if not match:
        return None
    for item in match.group(1).split(","):
        name, _, value = item.partition("=")
        if name.strip() == gate:
            return value.strip().lower() == "true"
    return None
