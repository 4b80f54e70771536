"""The driver deployed into a cluster (kind or an existing one): ``InClusterDriver`` is
that cluster's ``csi_harness._internal.providers.base.Driver``.

Everything of a deployment is in its spec's namespace (``DriverDeployment.namespace``)
or named after it (``csi_harness._internal.deploy.incluster_objects``). ``deploy`` first
clears the way (``incluster_removal``): the unsuffixed deployment, in the shared
``csi-mock`` namespace, removes whatever csi-mock deployment that namespace holds (this
one or an earlier one), waits until its pods are gone and the kubelets have dropped its
CSINode entries; a suffixed one, whose names are its own, only removes leftovers of its
own and leaves every other deployment alone, so several run side by side. Then it
applies the objects of ``csi_harness._internal.deploy.incluster_objects`` and waits for
readiness as the local provider does: every driver pod ready, the driver registered on
every node, the complete CSIStorageCapacity set published. A pod that cannot start (an
image missing from the node, a crash loop) ends the wait at once with its container
states.

A test reaches each csi-mock instance's admin API through the API server's pod proxy
(the token in ``X-CSI-Mock-Token``, as the API server keeps ``Authorization``), and its
CSI socket with ``kubectl exec`` (``csi_harness._internal.deploy.pod_csi``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.client import LabelSelector
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import DaemonSet, Deployment
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.deploy.incluster_layout import (
    ADMIN_PORT,
    APP,
    COMPONENT_LABEL,
    CONTROLLER_DEPLOYMENT,
    CSI_ENDPOINT,
    DRIVER_CONTAINER,
    INSTANCE_LABEL,
    NAME_LABEL,
    Component,
    deployment_components,
    instance_component,
    is_distributed,
)
from csi_harness._internal.deploy.incluster_objects import render_objects
from csi_harness._internal.deploy.incluster_removal import DeploymentRemoval
from csi_harness._internal.deploy.incluster_workloads import excluding_nodes
from csi_harness._internal.deploy.pod_csi import CommandRunner, PodCsiCaller, run_exec
from csi_harness._internal.deploy.readiness import wait_driver_ready
from csi_harness._internal.deploy.spec import (
    CONTROLLER,
    DriverDeployment,
    capacity_instance,
    check_same_driver,
)
from csi_harness._internal.kube.apiproxy import ApiServerAccess, api_server_access
from csi_harness._internal.kube.describe import describe_pod
from csi_harness._internal.kube.nodes import ClusterNode
from csi_harness._internal.kube.pod_status import pod_name, pod_ready
from csi_harness._internal.kube.snapshots import has_snapshot_api
from csi_harness._internal.kube.start_failures import StartHistory, sandbox_failure_events
from csi_mock.admin.client import DEFAULT_TIMEOUT, AdminClient
from csi_mock.admin.views import TOKEN_HEADER
from csi_mock.proto import csi_pb2

__all__ = ["DriverPodsFailed", "InClusterDriver", "render_objects"]

FIELD_MANAGER = "csi-harness"
DEFAULT_DEPLOY_TIMEOUT = 180.0
"""Seconds for each phase of deploy/remove (pods gone, pods ready, registered, capacity)."""


class DriverPodsFailed(RuntimeError):
    """A driver pod cannot become ready (image missing, or a crash loop: a container
    that ran and exited ``CRASH_LOOP_RESTARTS`` times; the runtime failing to start one
    is waited for); the message says which container and why, lists every driver pod
    and the runtime's start failures."""


class InClusterDriver:
    """One csi-mock deployment in a cluster, in the namespace of its spec."""

    def __init__(
        self,
        spec: DriverDeployment,
        *,
        nodes: Sequence[ClusterNode],
        kube: Client,
        kubeconfig: Path,
        kubectl: str,
        image: str,
        sidecar_images: Mapping[str, str],
        generation: str,
        controller_host: str | None = None,
        timeout: float = DEFAULT_DEPLOY_TIMEOUT,
        progress: Callable[[str], None] = lambda _: None,
        run: CommandRunner = run_exec,
    ) -> None:
        self._spec = spec
        self._nodes = sorted(nodes, key=lambda n: n.name)
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.image = image
        self.sidecar_images = dict(sidecar_images)
        # The caller counts deployments per session; the host directories of a cluster
        # that outlives the session must not meet an earlier session's same count.
        self.generation = f"{generation}-{secrets.token_hex(4)}"
        self.controller_host = controller_host
        self.admin_token = secrets.token_urlsafe(32)
        self.timeout = timeout
        self.progress = progress
        self._starts = StartHistory()
        self.namespace = spec.namespace
        self._csi = PodCsiCaller(
            kubectl, kubeconfig, self.namespace, DRIVER_CONTAINER, CSI_ENDPOINT, run
        )
        self._components = deployment_components(spec, [n.name for n in self._nodes])
        self._access: ApiServerAccess | None = None
        self._stopped: dict[str, str] = {}
        """Stopped component -> its log, read just before it was stopped."""
        self._paused: set[str] = set()
        """The stopped components that are paused sidecars (``resume_paused``)."""
        self._restarts_when_ready: dict[str, int] = {}
        """"pod/container" -> its restart count when the deployment became ready: the
        restarts before that (a sidecar that exited while the driver was still
        starting, a start the runtime failed) are part of being deployed."""

    # -- what a test sees (csi_harness._internal.providers.base.Driver) --

    @property
    def spec(self) -> DriverDeployment:
        return self._spec

    def adopt_spec(self, spec: DriverDeployment) -> None:
        check_same_driver(self._spec, spec)
        self._spec = spec

    @property
    def nodes(self) -> list[ClusterNode]:
        return list(self._nodes)

    def instances(self) -> list[str]:
        names = [n.name for n in self._nodes]
        return names if is_distributed(self._spec) else [CONTROLLER, *names]

    def components(self) -> list[str]:
        return list(self._components)

    def admin(self, instance: str = CONTROLLER, *, timeout: float = DEFAULT_TIMEOUT) -> AdminClient:
        """A client of ``instance``'s admin API through the API server's pod proxy."""
        pod = self._pod(self._instance(instance))
        access = self._api_access()
        return AdminClient(
            url=access.pod_proxy_url(self.namespace, pod, ADMIN_PORT),
            token=self.admin_token,
            token_header=TOKEN_HEADER,
            headers=access.headers,
            verify=access.ssl_context,
            timeout=timeout,
        )

    def get_capacity(
        self, segment: Mapping[str, str], parameters: Mapping[str, str]
    ) -> tuple[int, int]:
        """GetCapacity of the instance that answers for ``segment``
        (``capacity_instance``)."""
        instance = capacity_instance(self._spec, segment)
        request = csi_pb2.GetCapacityRequest(
            parameters=dict(parameters), accessible_topology=csi_pb2.Topology(segments=segment)
        )
        reply = self._csi.call(
            self._pod(self._instance(instance)),
            "Controller",
            "GetCapacity",
            request,
            csi_pb2.GetCapacityResponse,
        )
        return int(reply.available_capacity), int(reply.maximum_volume_size.value)

    def node_get_info(self, node: str) -> tuple[str, dict[str, str]]:
        reply = self._csi.call(
            self._pod(self._instance(node)),
            "Node",
            "NodeGetInfo",
            csi_pb2.NodeGetInfoRequest(),
            csi_pb2.NodeGetInfoResponse,
        )
        return str(reply.node_id), dict(reply.accessible_topology.segments)

    def component_log(self, component: str) -> str:
        """The component's container log (its pod is new with this deployment; a
        restarted container's earlier log is not included). A stopped component's
        log is as it was when it was stopped."""
        found = self._component(component)
        if component in self._stopped:
            return self._stopped[component]
        return "".join(
            self.kube.log(self._pod(found), namespace=self.namespace, container=found.container)
        )

    def failed_component(self) -> str | None:
        if self._stopped:
            return "stopped: " + ", ".join(sorted(self._stopped))
        restarted = sorted(
            container
            for container, count in self._restart_counts().items()
            if count > self._restarts_when_ready.get(container, 0)
        )
        return "restarted: " + ", ".join(restarted) if restarted else None

    def _restart_counts(self) -> dict[str, int]:
        """Restart count of every container of the deployment, by "pod/container"."""
        return {
            f"{pod_name(pod)}/{status.name}": status.restartCount
            for pod in self.kube.list(Pod, namespace=self.namespace)
            for status in (pod.status.containerStatuses or [] if pod.status else [])
        }

    def stop_component(self, component: str) -> None:
        """Stop one component for the rest of the deployment. A sidecar of the
        controller's pod is paused by csi-mock (SIGSTOP, returning once it shows as
        stopped); the controller's pod is scaled to zero (its sidecars with it), and a
        DaemonSet's pod is taken off its node, both waited for until the pod is gone.
        Nothing else restarts, so the other instances keep their state and faults."""
        found = self._component(component)
        if component in self._stopped:
            return
        if found.workload == CONTROLLER_DEPLOYMENT and found.container != DRIVER_CONTAINER:
            log = self._last_log(component)
            with self.admin(CONTROLLER) as admin:
                admin.pause_neighbour(found.container)
            self._stopped[component] = log
            self._paused.add(component)
            return
        # The pod goes: a DaemonSet's on one node, or the controller's with its sidecars.
        going = [
            c
            for c in self._components.values()
            if c == found or (found.workload_kind == "Deployment" and c.workload == found.workload)
        ]
        logs = {c.name: self._last_log(c.name) for c in going if c.name not in self._stopped}
        self._paused.difference_update(c.name for c in going)  # gone with the pod
        if found.workload_kind == "Deployment":
            self.kube.patch(
                Deployment, found.workload, {"spec": {"replicas": 0}}, namespace=self.namespace
            )
        else:
            stopped = {
                c.node
                for name, c in self._components.items()
                if (name in self._stopped or name == component)
                and c.workload == found.workload
                and c.node is not None
            }
            self.kube.patch(
                DaemonSet,
                found.workload,
                excluding_nodes([n.name for n in self._nodes], stopped),
                namespace=self.namespace,
                patch_type=PatchType.MERGE,
            )
        self._stopped.update(logs)

        def gone() -> tuple[bool, str]:
            left = self._pods_of(found, include_terminating=True)
            return not left, "; ".join(describe_pod(p) for p in left)

        wait_for(f"the pod of {component} to be gone", gone, timeout=self.timeout, interval=0.5)

    def resume_paused(self) -> list[str]:
        """Let the paused sidecars go on where they stopped (SIGCONT through csi-mock);
        the components whose pod went stay stopped. The resumed ones, sorted."""
        resumed = sorted(self._paused)
        for component in resumed:
            with self.admin(CONTROLLER) as admin:
                admin.resume_neighbour(self._component(component).container)
            self._paused.discard(component)
            del self._stopped[component]
        return resumed

    def _last_log(self, component: str) -> str:
        try:
            return self.component_log(component)
        except (ApiError, ComponentNotRunning) as exc:
            return f"(no log: {exc})\n"

    # -- lifecycle ---------------------------------------------------------------------

    def deploy(self) -> None:
        """Clear the way (see the module docstring), apply this deployment and wait
        until it is ready."""
        if self._spec.suffix:
            self._removal().remove_own_leftovers()
        else:
            self._removal().remove_deployment()
        if self._spec.snapshots is not None and not has_snapshot_api(self.kube):
            raise Unsupported(
                f"{self._spec.name} takes snapshots, and the cluster has no "
                "snapshot.storage.k8s.io CRDs: install external-snapshotter's CRDs and "
                "snapshot-controller (the kind provider does)"
            )
        self.progress(f"deploying {self._spec.name} in-cluster (generation {self.generation})")
        objects = render_objects(
            self._spec,
            self._nodes,
            image=self.image,
            sidecar_images=self.sidecar_images,
            admin_token=self.admin_token,
            generation=self.generation,
            controller_host=self.controller_host,
        )
        for obj in objects:
            self.kube.apply(cast(Any, from_dict(obj)), field_manager=FIELD_MANAGER, force=True)
        self.progress(f"waiting for {self._spec.name} to be ready on {len(self._nodes)} nodes")
        self._wait_ready()
        self._restarts_when_ready = self._restart_counts()
        restarted = sorted(c for c, count in self._restarts_when_ready.items() if count)
        if restarted:
            restarts = ", ".join(restarted)
            self.progress(f"{self._spec.name} ready; restarted while starting: {restarts}")

    def handover(self) -> dict[str, object]:
        """What ``take_over`` needs in another process (JSON-able): the spec as it is
        now, the nodes it was deployed on, the generation and admin token the pods were
        made with, and the restart counts at readiness."""
        return {
            "spec": self._spec.model_dump(mode="json"),
            "nodes": [[n.name, n.zone, n.runs_pods] for n in self._nodes],
            "generation": self.generation,
            "admin_token": self.admin_token,
            "restarts_when_ready": dict(self._restarts_when_ready),
        }

    def take_over(self, state: Mapping[str, Any]) -> None:
        """Become the deployed driver ``handover`` described (this object was made for
        its spec and deployed nothing)."""
        check_same_driver(self._spec, DriverDeployment.model_validate(state["spec"]))
        self.generation = str(state["generation"])
        self.admin_token = str(state["admin_token"])
        self._restarts_when_ready = {
            str(name): int(count) for name, count in dict(state["restarts_when_ready"]).items()
        }

    def remove(self) -> None:
        """Delete the deployment, then, even when a delete failed, take a suffixed
        driver's topology labels off the nodes (``DeploymentRemoval.remove``)."""
        self._removal().remove()

    def _removal(self) -> DeploymentRemoval:
        return DeploymentRemoval(
            self.kube,
            self._spec,
            [n.name for n in self._nodes],
            timeout=self.timeout,
            progress=self.progress,
        )

    def describe_pods(self) -> str:
        """One line per pod of the namespace's csi-mock deployment (for failures)."""
        pods = list(self.kube.list(Pod, namespace=self.namespace, labels={NAME_LABEL: APP}))
        return "\n".join(f"  {describe_pod(p)}" for p in pods) or "  (no csi-mock pods)"

    # -- readiness ---------------------------------------------------------------------

    def _wait_ready(self) -> None:
        nodes = [n.name for n in self._nodes]
        self._starts = StartHistory()
        try:
            wait_for(
                f"the pods of {self._spec.name} to be ready",
                self._pods_ready,
                timeout=self.timeout,
                interval=1,
                check=self._check_pods,
            )
            wait_driver_ready(
                self.kube, self._spec, nodes, timeout=self.timeout, check=self._check_pods
            )
        except WaitTimeout as exc:
            raise WaitTimeout(
                f"{exc}\ncsi-mock pods:\n{self.describe_pods()}\n{self._runtime_summary()}"
            ) from None

    def _pods_ready(self) -> tuple[bool, str]:
        waiting = []
        for component in self._components.values():
            pods = self._pods_of(component)
            if not any(_is_ready(p) for p in pods):
                seen = "; ".join(describe_pod(p) for p in pods) or "no pod"
                waiting.append(f"{component.name} ({seen})")
        return not waiting, "not ready: " + ", ".join(waiting)

    def _check_pods(self) -> None:
        pods = list(self.kube.list(Pod, namespace=self.namespace, labels=self._selector()))
        # The runtime failing to start a container is retried by the kubelet: said
        # as it happens, waited for, and not counted as the container crashing.
        for line in self._starts.observe(pods, sandbox_failure_events(self.kube, self.namespace)):
            self.progress(f"{self._spec.name}: {line}; the kubelet retries")
        for pod in pods:
            reason = self._starts.unrecoverable(pod)
            if reason is not None:
                raise DriverPodsFailed(
                    f"{self._spec.name} cannot start: {reason}\ncsi-mock pods:\n"
                    + self.describe_pods()
                    + f"\n{self._runtime_summary()}"
                )

    def _runtime_summary(self) -> str:
        pods = self.kube.list(Pod, namespace=self.namespace, labels=self._selector())
        return self._starts.summary(pods)

    @property
    def start_history(self) -> StartHistory:
        """The container runtime's start failures seen while waiting for the pods of
        the last ``deploy`` (empty before one)."""
        return self._starts

    # -- finding things ----------------------------------------------------------------

    def _selector(self, role: str | None = None) -> LabelSelector:
        selector: LabelSelector = {NAME_LABEL: APP, INSTANCE_LABEL: self._spec.name}
        if role is not None:
            selector[COMPONENT_LABEL] = role
        return selector

    def _component(self, component: str) -> Component:
        found = self._components.get(component)
        if found is None:
            raise ValueError(
                f"{component!r} is no component of this driver: {', '.join(self._components)}"
            )
        return found

    def _instance(self, instance: str) -> Component:
        if instance not in self.instances():
            raise ValueError(
                f"{instance!r} is no csi-mock instance of this driver: "
                f"{', '.join(self.instances())}"
            )
        return self._components[instance_component(instance)]

    def _pods_of(self, component: Component, *, include_terminating: bool = False) -> list[Pod]:
        pods = self.kube.list(Pod, namespace=self.namespace, labels=self._selector(component.role))
        return [
            pod
            for pod in pods
            if (
                component.node is None
                or (pod.spec is not None and pod.spec.nodeName == component.node)
            )
            and (include_terminating or not (pod.metadata and pod.metadata.deletionTimestamp))
        ]

    def _pod(self, component: Component) -> str:
        """The name of the running pod of ``component``."""
        pods = self._pods_of(component)
        running = [p for p in pods if p.status is not None and p.status.phase == "Running"]
        if not running:
            seen = "; ".join(describe_pod(p) for p in pods) or "no pod"
            stopped = " (stopped by stop_component)" if component.name in self._stopped else ""
            raise ComponentNotRunning(f"{component.name} has no running pod{stopped}: {seen}")
        return pod_name(running[0])

    def _api_access(self) -> ApiServerAccess:
        if self._access is None:
            self._access = api_server_access(self.kubeconfig)
        return self._access


class ComponentNotRunning(RuntimeError):
    """The component has no running pod (not started yet, crashed, or stopped)."""


def _is_ready(pod: Pod) -> bool:
    terminating = pod.metadata is not None and pod.metadata.deletionTimestamp is not None
    return not terminating and pod_ready(pod)
