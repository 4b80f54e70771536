"""The workloads of one in-cluster deployment (``Workloads``): the controller's pod
(csi-mock and the central sidecars, one process namespace so that csi-mock can pause a
sidecar), the node plugin's DaemonSet, the distributed provisioners' DaemonSet, and the
patch that takes a DaemonSet's pod off stopped nodes (``excluding_nodes``).

Laid out for any node (the kustomize base), the node plugin runs on every node that
takes it and is updated as DaemonSets usually are, and the controller's pod goes where
the scheduler puts it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from csi_harness._internal.deploy.incluster_layout import (
    ADMIN_PORT,
    ADMIN_SECRET,
    ADMIN_TOKEN_DIR,
    ANY_NODE_CONFIG_KEY,
    ATTACHER,
    CONFIG_DIR,
    CONFIG_MAP,
    CONTROL_PLANE_TAINT,
    CONTROLLER_CONFIG_KEY,
    CONTROLLER_DEPLOYMENT,
    CSI_SOCKET_DIR,
    DRIVER_CONTAINER,
    KUBELET_DIR,
    NODE_DAEMONSET,
    PROVISIONER,
    PROVISIONER_WORKLOAD,
    REMOVE_EARLIER_STATE,
    RESIZER,
    SIDECAR_HTTP_PORTS,
    SNAPSHOTTER,
    STATE_DIR,
    DeploymentLayout,
    controller_node,
    host_driver_dir,
    labels,
    node_affinity,
    node_config_key,
    sidecars_of,
)
from csi_harness._internal.deploy.sidecars import (
    DISTRIBUTED_PROVISIONER_FLAGS,
    attacher_flags,
    provisioner_flags,
    resizer_flags,
    snapshotter_flags,
)
from csi_harness._internal.deploy.spec import (
    DriverDeployment,
)

# lightkube's from_dict knows the VolumeSnapshotClass kind (a CRD's) once
# csi_harness._internal.kube.snapshots has defined it.
from csi_harness._internal.kube import snapshots  # noqa: F401

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the API server's admission mounts a pod's service account token into every
container that has nothing mounted there."""


def _volume_mount(name: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "mountPath": path, **extra}


def _host_path(name: str, path: str, kind: str = "DirectoryOrCreate") -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": kind}}


def _field_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


@dataclass(frozen=True)
class Workloads:
    layout: DeploymentLayout
    image: str
    sidecar_images: Mapping[str, str]

    @property
    def spec(self) -> DriverDeployment:
        return self.layout.spec

    # -- containers --------------------------------------------------------------------

    def _driver_container(
        self,
        config_file: str,
        *,
        extra_args: Sequence[str] = (),
        extra_mounts: Sequence[dict[str, Any]] = (),
        **fields: Any,
    ) -> dict[str, Any]:
        mounts = [
            _volume_mount("socket-dir", CSI_SOCKET_DIR),
            _volume_mount("config", CONFIG_DIR, readOnly=True),
            _volume_mount("admin-token", ADMIN_TOKEN_DIR, readOnly=True),
            _volume_mount("state", STATE_DIR),
            *extra_mounts,
        ]
        return {
            "name": DRIVER_CONTAINER,
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "args": ["serve", f"--config={CONFIG_DIR}/{config_file}", *extra_args],
            "ports": [{"name": "admin", "containerPort": ADMIN_PORT, "protocol": "TCP"}],
            # The admin API starts once the CSI socket serves and the state is loaded.
            "readinessProbe": {
                "tcpSocket": {"port": ADMIN_PORT},
                "periodSeconds": 1,
                "failureThreshold": 3,
            },
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": mounts,
            **fields,
        }

    def _sidecar(self, sidecar: str, args: list[str], env: list[dict[str, Any]]) -> dict[str, Any]:
        port = SIDECAR_HTTP_PORTS[sidecar]
        return {
            "name": sidecar,
            "image": self.sidecar_images[sidecar],
            "imagePullPolicy": "IfNotPresent",
            "args": [
                f"--csi-address={CSI_SOCKET_DIR}/csi.sock",
                f"--http-endpoint=:{port}",
                *args,
            ],
            "env": env,
            # Port names are unique in a pod: the sidecar's name without "csi-".
            "ports": [
                {"name": sidecar.removeprefix("csi-"), "containerPort": port, "protocol": "TCP"}
            ],
            # Every sidecar starts its HTTP server only once it reaches the driver's
            # socket: until then the pod is not ready, and neither is the driver.
            "readinessProbe": {
                "httpGet": {"path": "/metrics", "port": port},
                "periodSeconds": 1,
                "failureThreshold": 3,
            },
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [_volume_mount("socket-dir", CSI_SOCKET_DIR)],
        }

    def _provisioner(self, *, ownerref_level: int, per_node: bool) -> dict[str, Any]:
        args = provisioner_flags(self.spec, capacity_ownerref_level=ownerref_level)
        # NAMESPACE: where the CSIStorageCapacity objects go; POD_NAME: the start of
        # their owner chain; NODE_NAME: the node a per-node provisioner serves.
        env = [
            _field_env("NAMESPACE", "metadata.namespace"),
            _field_env("POD_NAME", "metadata.name"),
        ]
        if per_node:
            args += DISTRIBUTED_PROVISIONER_FLAGS
            env.append(_field_env("NODE_NAME", "spec.nodeName"))
        return self._sidecar(PROVISIONER, args, env)

    # -- workloads ---------------------------------------------------------------------

    def _metadata(self, name: str, role: str) -> dict[str, Any]:
        return {"name": name, "namespace": self.spec.namespace, "labels": labels(self.spec, role)}

    def _controller_deployment(self, pod: dict[str, Any]) -> dict[str, Any]:
        pod = {**pod, "terminationGracePeriodSeconds": 10}
        if self.layout.nodes is not None:
            pinned = self.layout.controller_host or controller_node(self.layout.nodes)
            pod["affinity"] = node_affinity([pinned])
        if self.layout.controller_host is not None:
            # A control-plane node keeps its NoSchedule taint; only this pod goes there.
            pod["tolerations"] = [{"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"}]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._metadata(CONTROLLER_DEPLOYMENT, "controller"),
            "spec": {
                "replicas": 1,
                # Never two of them at once: no leader election among the sidecars.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels(self.spec, "controller")},
                "template": {
                    "metadata": {"labels": labels(self.spec, "controller")},
                    "spec": pod,
                },
            },
        }

    def _daemonset(self, name: str, role: str, pod: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "selector": {"matchLabels": labels(self.spec, role)},
            "template": {
                "metadata": {"labels": labels(self.spec, role)},
                "spec": {**pod, "terminationGracePeriodSeconds": 10},
            },
        }
        if self.layout.nodes is not None:
            # Only the nodes that have a configuration; a node is taken out of the set
            # by patching this affinity (excluding_nodes), and that changed template
            # must not replace the other pods.
            spec["template"]["spec"]["affinity"] = node_affinity(self.layout.node_names)
            spec = {"updateStrategy": {"type": "OnDelete"}, **spec}
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": self._metadata(name, role),
            "spec": spec,
        }

    def _central_sidecar(self, sidecar: str) -> dict[str, Any]:
        if sidecar == PROVISIONER:
            return self._provisioner(ownerref_level=2, per_node=False)
        flags = {ATTACHER: attacher_flags, RESIZER: resizer_flags, SNAPSHOTTER: snapshotter_flags}
        return self._sidecar(sidecar, flags[sidecar](self.spec), [])

    def controller(self) -> dict[str, Any]:
        """csi-mock's controller and the central sidecars in one pod, as upstream's
        deployments run them. The CSIStorageCapacity objects' owner is Pod ->
        ReplicaSet -> this Deployment. The pod shares one process namespace, so that
        csi-mock can pause a sidecar (admin.neighbours; ``stop_component``) while the
        others go on."""
        # csi-mock itself never talks to the API server: an empty directory where the
        # pod's service account token would be mounted means none is mounted into its
        # container. (In the shared process namespace a root process could still read
        # another container's files through /proc/<pid>/root.)
        driver = self._driver_container(
            CONTROLLER_CONFIG_KEY,
            extra_mounts=[_volume_mount("no-api-token", SERVICE_ACCOUNT_DIR, readOnly=True)],
        )
        pod = {
            "serviceAccountName": "csi-mock-controller",
            "shareProcessNamespace": True,
            "containers": [driver, *map(self._central_sidecar, sidecars_of(self.spec))],
            "volumes": [
                {"name": "socket-dir", "emptyDir": {}},
                # State lives as long as the pod: a deployment's volumes die with it.
                {"name": "state", "emptyDir": {}},
                {"name": "no-api-token", "emptyDir": {}},
                {"name": "config", "configMap": {"name": CONFIG_MAP}},
                {
                    "name": "admin-token",
                    "secret": {"secretName": ADMIN_SECRET, "defaultMode": 0o400},
                },
            ],
        }
        return self._controller_deployment(pod)

    def distributed_provisioner(self) -> dict[str, Any]:
        # Owner: Pod -> this DaemonSet, so a node's objects outlive its stopped provisioner.
        pod = {
            # rbac.yaml binds the provisioner's roles to this account only.
            "serviceAccountName": "csi-mock-controller",
            "containers": [self._provisioner(ownerref_level=1, per_node=True)],
            "volumes": [_host_path("socket-dir", self.layout.host_node_socket_dir)],
        }
        return self._daemonset(PROVISIONER_WORKLOAD, "provisioner", pod)

    def node_daemonset(self) -> dict[str, Any]:
        host_dir = host_driver_dir(self.spec)
        # $(NODE_NAME) is expanded by the kubelet from the environment.
        if self.layout.nodes is None:
            config_file, node_args = ANY_NODE_CONFIG_KEY, ["--nodeid=$(NODE_NAME)"]
        else:
            config_file, node_args = node_config_key("$(NODE_NAME)"), []
        driver = self._driver_container(
            config_file,
            extra_args=node_args,
            env=[_field_env("NODE_NAME", "spec.nodeName")],
            # Bind mounts into the kubelet's pod directories (mount(2) needs CAP_SYS_ADMIN).
            securityContext={"privileged": True},
            extra_mounts=[
                # Volume targets and staging paths: the mounts made here must reach the
                # host (and the kubelet), hence Bidirectional. plugins_registry is in it.
                _volume_mount("kubelet-dir", KUBELET_DIR, mountPropagation="Bidirectional"),
            ],
        )
        remove_earlier_state = {
            "name": "remove-earlier-state",
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-c", REMOVE_EARLIER_STATE, STATE_DIR, self.layout.generation],
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [_volume_mount("state", STATE_DIR)],
        }
        pod = {
            "serviceAccountName": "csi-mock-node",
            "initContainers": [remove_earlier_state],
            "containers": [driver],
            "volumes": [
                _host_path("socket-dir", self.layout.host_node_socket_dir),
                _host_path("kubelet-dir", KUBELET_DIR, "Directory"),
                _host_path("state", host_dir),
                {"name": "config", "configMap": {"name": CONFIG_MAP}},
                {
                    "name": "admin-token",
                    "secret": {"secretName": ADMIN_SECRET, "defaultMode": 0o400},
                },
            ],
        }
        return self._daemonset(NODE_DAEMONSET, "node", pod)


def excluding_nodes(nodes: Sequence[str], stopped: Collection[str]) -> dict[str, Any]:
    """A JSON merge patch of a DaemonSet rendered here that removes its pods from the
    ``stopped`` nodes (the DaemonSet controller deletes a pod whose node no longer
    matches; OnDelete keeps the other pods as they are)."""
    affinity = node_affinity(nodes, stopped=stopped)
    return {"spec": {"template": {"spec": {"affinity": affinity}}}}
