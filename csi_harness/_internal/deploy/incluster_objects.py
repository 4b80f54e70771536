"""The Kubernetes objects of csi-mock deployed into a cluster (kind or any other).

``render_objects`` is a pure function from a ``DriverDeployment`` and the nodes to the
objects of one deployment in the spec's namespace (``csi-mock`` + its suffix):

* the Namespace and RBAC of ``deploy/kubernetes/`` moved to that namespace, the
  CSIDriver and StorageClasses as ``csi_harness._internal.deploy.spec`` makes them;
* a ConfigMap with one csi-mock configuration per instance (``controller.yaml``,
  ``node-<node>.yaml``) and a Secret with the admin API token;
* the node DaemonSet: csi-mock (node mode; distributed: mode all) registering itself
  with the kubelet, as no node-driver-registrar or livenessprobe image exists here;
* central provisioning: the csi-mock controller, external-provisioner,
  external-attacher, external-resizer (and with snapshots csi-snapshotter, next to
  the VolumeSnapshotClass) as Deployments pinned to one node,
  sharing the controller's CSI socket through a directory on that node; distributed:
  an external-provisioner DaemonSet sharing each node's socket directory, and no
  resizer (it has no per-node mode: each node's copy would act on every claim of the
  driver and ask an instance that knows only its own node's volumes).

Every sidecar is a workload of its own so that one of them can be stopped (its
Deployment scaled to zero, or its node taken out of its DaemonSet, see
``excluding_nodes``) while the csi-mock instances keep their volumes, fault rules and
journal, as the local provider stops a single process. A sidecar container in the
controller's pod could only be removed by replacing the pod, which loses them all.

Deployments with suffixes (and names) of their own share nothing, so they can run side
by side: each has its namespace, its cluster-scoped objects (RBAC, CSIDriver,
StorageClasses) named after it and labelled with its driver name
(``cluster_scoped_objects``), and its host directories (``host_dir_name``). The
unsuffixed deployment renders as ``deploy/kubernetes/`` names things.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from lightkube.codecs import from_dict
from lightkube.core.resource import GlobalResource

from csi_harness._internal.deploy.sidecars import (
    DISTRIBUTED_PROVISIONER_FLAGS,
    attacher_flags,
    provisioner_flags,
    resizer_flags,
    snapshotter_flags,
)
from csi_harness._internal.deploy.spec import (
    DriverDeployment,
    ProvisionerMode,
    csidriver_object,
    driver_config_for,
    read_manifests,
    snapshot_class_object,
    storage_class_objects,
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
PROVISIONER_WORKLOAD = "csi-mock-provisioner"
"""A Deployment (central) or a DaemonSet (distributed)."""
ATTACHER_DEPLOYMENT = "csi-mock-attacher"
RESIZER_DEPLOYMENT = "csi-mock-resizer"
SNAPSHOTTER_DEPLOYMENT = "csi-mock-snapshotter"
NODE_DAEMONSET = "csi-mock-node"
CONFIG_MAP = "csi-mock-config"
ADMIN_SECRET = "csi-mock-admin"

DRIVER_CONTAINER = "csi-mock"
PROVISIONER = "csi-provisioner"
ATTACHER = "csi-attacher"
RESIZER = "csi-resizer"
SNAPSHOTTER = "csi-snapshotter"
_CENTRAL_SIDECARS = (PROVISIONER, ATTACHER, RESIZER)

ADMIN_PORT = 9809
CSI_SOCKET_DIR = "/csi"
CSI_ENDPOINT = f"unix://{CSI_SOCKET_DIR}/csi.sock"
CONFIG_DIR = "/etc/csi-mock"
ADMIN_TOKEN_DIR = "/etc/csi-mock-admin"
STATE_DIR = "/var/lib/csi-mock"
"""Where csi-mock keeps its state in its container (and the host root of the nodes')."""
KUBELET_DIR = "/var/lib/kubelet"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
CONTROLLER_CONFIG_KEY = "controller.yaml"

_GENERATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")

# Run in the node pod's init container: the host directory of this driver keeps one
# subdirectory per deployment, and only the current one is needed. The pods of earlier
# deployments are gone by then (InClusterDriver.deploy waits for that); a suffixed
# deployment's directory is its own (host_dir_name), so no other's is in it.
_REMOVE_EARLIER_STATE = """\
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


def deployment_components(spec: DriverDeployment, nodes: Sequence[str]) -> dict[str, Component]:
    """Every component of the deployment by name, in the order of
    ``csi_harness._internal.providers.base.Driver.components``."""
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
        found.append(
            Component(PROVISIONER, "Deployment", PROVISIONER_WORKLOAD, "provisioner", PROVISIONER)
        )
        found.append(Component(ATTACHER, "Deployment", ATTACHER_DEPLOYMENT, "attacher", ATTACHER))
        found.append(Component(RESIZER, "Deployment", RESIZER_DEPLOYMENT, "resizer", RESIZER))
        if spec.snapshots is not None:
            found.append(
                Component(
                    SNAPSHOTTER, "Deployment", SNAPSHOTTER_DEPLOYMENT, "snapshotter", SNAPSHOTTER
                )
            )
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


def namespace_and_rbac(spec: DriverDeployment) -> list[dict[str, Any]]:
    """The Namespace and RBAC of ``deploy/kubernetes/`` for this deployment: in its
    namespace, the cluster-scoped roles and bindings named with its suffix, every
    binding granting to the ServiceAccounts of its namespace."""
    objects = [*read_manifests("namespace.yaml"), *read_manifests("rbac.yaml")]
    for obj in objects:
        metadata = obj["metadata"]
        if obj["kind"] == "Namespace":
            metadata["name"] = spec.namespace
        elif "namespace" in metadata:
            metadata["namespace"] = spec.namespace
        else:
            metadata["name"] += spec.suffix
        for subject in obj.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject["namespace"] = spec.namespace
        role = obj.get("roleRef")
        if role is not None and role["kind"] == "ClusterRole":
            role["name"] += spec.suffix
    return [_owned(obj, spec) for obj in objects]


def cluster_scoped_objects(spec: DriverDeployment) -> list[dict[str, Any]]:
    """The objects of the deployment that its namespace does not hold, in the order
    ``render_objects`` applies them: the Namespace itself, the ClusterRoles and
    ClusterRoleBindings, the CSIDriver (if any) and the StorageClasses. A suffixed
    deployment labels them with its driver name (INSTANCE_LABEL), which tells them
    from the unsuffixed deployment's (unlabelled, as ``kubectl apply -k`` makes them)."""
    return [o for o in namespace_and_rbac(spec) if is_cluster_scoped(o)] + _driver_objects(spec)


def _driver_objects(spec: DriverDeployment) -> list[dict[str, Any]]:
    """The CSIDriver (if any), the StorageClasses and the VolumeSnapshotClass (with
    snapshots: the cluster must have the snapshot CRDs)."""
    objects = [csidriver_object(spec)] if spec.csidriver else []
    objects += storage_class_objects(spec)
    if spec.snapshots is not None:
        objects.append(snapshot_class_object(spec))
    return [_owned(obj, spec) for obj in objects]


def _owned(obj: dict[str, Any], spec: DriverDeployment) -> dict[str, Any]:
    """``obj``, labelled as the suffixed deployment's when it is cluster-scoped."""
    if spec.suffix and is_cluster_scoped(obj):
        obj["metadata"].setdefault("labels", {})[INSTANCE_LABEL] = spec.name
    return obj


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


def render_objects(
    spec: DriverDeployment,
    nodes: Sequence[ClusterNode],
    *,
    image: str,
    sidecar_images: Mapping[str, str],
    admin_token: str,
    generation: str,
    controller_host: str | None = None,
) -> list[dict[str, Any]]:
    """The objects of one deployment, in the order to apply them.

    ``generation`` names this deployment's state on the nodes
    (``/var/lib/csi-mock/<driver>/<generation>``): it must differ from every earlier
    deployment's on the same nodes, so that no volume or pool usage carries over.
    """
    if not nodes:
        raise ValueError("an in-cluster deployment needs at least one node")
    if not _GENERATION.match(generation):
        raise ValueError(
            f"generation {generation!r} is not a directory name of letters, digits, '.', '_'"
            " and '-' (at most 63)"
        )
    missing = sorted(s for s in _sidecars_of(spec) if s not in sidecar_images)
    if missing:
        raise ValueError(f"sidecar_images has no image for {', '.join(missing)}")
    layout = _Layout(spec, sorted(nodes, key=lambda n: n.name), generation, controller_host)
    objects: list[dict[str, Any]] = [
        *namespace_and_rbac(spec),
        _admin_secret(spec, admin_token),
        layout.config_map(),
        *_driver_objects(spec),
    ]
    workloads = _Workloads(layout, image, sidecar_images)
    if is_distributed(spec):
        objects += [workloads.node_daemonset(), workloads.distributed_provisioner()]
    else:
        objects += [
            workloads.controller(),
            workloads.central_provisioner(),
            workloads.attacher(),
            workloads.resizer(),
            *([workloads.snapshotter()] if spec.snapshots is not None else []),
            workloads.node_daemonset(),
        ]
    return objects


def _sidecars_of(spec: DriverDeployment) -> tuple[str, ...]:
    # Distributed provisioning has no attacher (the spec refuses attach_required there)
    # and no resizer (see the module's docstring).
    if is_distributed(spec):
        return (PROVISIONER,)
    return _CENTRAL_SIDECARS + ((SNAPSHOTTER,) if spec.snapshots is not None else ())


def _admin_secret(spec: DriverDeployment, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": ADMIN_SECRET,
            "namespace": spec.namespace,
            "labels": {NAME_LABEL: APP},
        },
        "type": "Opaque",
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


@dataclass(frozen=True)
class _Layout:
    """Names and paths of one deployment, and the csi-mock configurations."""

    spec: DriverDeployment
    nodes: list[ClusterNode]
    generation: str
    controller_host: str | None = None
    """Where the controller Deployments run when not on the first driver node (kind: the
    control plane, so that the workers, which tests compare, stay alike)."""

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    @property
    def host_generation_dir(self) -> str:
        return f"{host_driver_dir(self.spec)}/{self.generation}"

    @property
    def host_controller_socket_dir(self) -> str:
        return f"{self.host_generation_dir}/controller"

    @property
    def host_node_socket_dir(self) -> str:
        return f"{KUBELET_DIR}/plugins/{host_dir_name(self.spec)}"

    def config_map(self) -> dict[str, Any]:
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

    def _admin(self) -> dict[str, Any]:
        # The API server's pod proxy reaches the pod's IP, hence all addresses.
        return {"tcp": f"0.0.0.0:{ADMIN_PORT}", "token_file": f"{ADMIN_TOKEN_DIR}/token"}

    def controller_config(self) -> dict[str, Any]:
        return driver_config_for(
            self.spec,
            mode="controller",
            nodes=[(n.name, n.zone) for n in self.nodes],
            endpoint=CSI_ENDPOINT,
            state_dir=STATE_DIR,
            admin=self._admin(),
        )

    def node_config(self, node: ClusterNode) -> dict[str, Any]:
        distributed = is_distributed(self.spec)
        # Distributed: node-local storage, so each node's instance is controller and
        # node of its own pool, and its provisioner asks it alone.
        topology = (
            [(node.name, node.zone)] if distributed else [(n.name, n.zone) for n in self.nodes]
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
        config["node"]["mount"] = "bind"
        # The kubelet asks for staging and target paths below its root directory only.
        config["node"]["allowed_roots"] = [KUBELET_DIR]
        config["node"]["registration"] = {
            "plugins_registry": f"{KUBELET_DIR}/plugins_registry",
            # The socket as the kubelet sees it: the host directory mounted on /csi.
            "kubelet_endpoint": f"{self.host_node_socket_dir}/csi.sock",
        }
        if not distributed:
            # The controller keeps the volumes in its own pod: a node never finds a
            # volume's backing directory and creates it on first use.
            config["node"]["materialize_missing_volumes"] = True
        return config


def _yaml(config: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(config), sort_keys=False)


def _volume_mount(name: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "mountPath": path, **extra}


def _host_path(name: str, path: str, kind: str = "DirectoryOrCreate") -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": kind}}


def _field_env(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


@dataclass(frozen=True)
class _Workloads:
    layout: _Layout
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
            "args": ["serve", f"--config={CONFIG_DIR}/{config_file}"],
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
        return {
            "name": sidecar,
            "image": self.sidecar_images[sidecar],
            "imagePullPolicy": "IfNotPresent",
            "args": [f"--csi-address={CSI_SOCKET_DIR}/csi.sock", *args],
            "env": env,
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

    def _deployment(self, name: str, role: str, pod: dict[str, Any]) -> dict[str, Any]:
        pinned = self.layout.controller_host or controller_node(self.layout.nodes)
        pod = {
            **pod,
            "affinity": node_affinity([pinned]),
            "terminationGracePeriodSeconds": 10,
        }
        if self.layout.controller_host is not None:
            # A control-plane node keeps its NoSchedule taint; only these pods go there.
            pod["tolerations"] = [{"key": CONTROL_PLANE_TAINT, "effect": "NoSchedule"}]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": self._metadata(name, role),
            "spec": {
                "replicas": 1,
                # Never two of them at once: one socket directory, no leader election.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels(self.spec, role)},
                "template": {"metadata": {"labels": labels(self.spec, role)}, "spec": pod},
            },
        }

    def _daemonset(self, name: str, role: str, pod: dict[str, Any]) -> dict[str, Any]:
        pod = {
            **pod,
            # Only the nodes that have a configuration; a node is taken out of the set
            # by patching this affinity (excluding_nodes).
            "affinity": node_affinity(self.layout.node_names),
            "terminationGracePeriodSeconds": 10,
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": self._metadata(name, role),
            "spec": {
                # A changed template (a node taken out) must not replace the other pods.
                "updateStrategy": {"type": "OnDelete"},
                "selector": {"matchLabels": labels(self.spec, role)},
                "template": {"metadata": {"labels": labels(self.spec, role)}, "spec": pod},
            },
        }

    def _controller_socket_dir(self) -> dict[str, Any]:
        return _host_path("socket-dir", self.layout.host_controller_socket_dir)

    def controller(self) -> dict[str, Any]:
        pod = {
            "serviceAccountName": "csi-mock-controller",
            # csi-mock itself never talks to the API server.
            "automountServiceAccountToken": False,
            "containers": [self._driver_container(CONTROLLER_CONFIG_KEY)],
            "volumes": [
                self._controller_socket_dir(),
                # State lives as long as the pod: a deployment's volumes die with it.
                {"name": "state", "emptyDir": {}},
                {"name": "config", "configMap": {"name": CONFIG_MAP}},
                {
                    "name": "admin-token",
                    "secret": {"secretName": ADMIN_SECRET, "defaultMode": 0o400},
                },
            ],
        }
        return self._deployment(CONTROLLER_DEPLOYMENT, "controller", pod)

    def central_provisioner(self) -> dict[str, Any]:
        # Owner of the CSIStorageCapacity objects: Pod -> ReplicaSet -> this Deployment,
        # which outlives a stopped provisioner (scaled to zero), as on the local provider.
        pod = {
            "serviceAccountName": "csi-mock-controller",
            "containers": [self._provisioner(ownerref_level=2, per_node=False)],
            "volumes": [self._controller_socket_dir()],
        }
        return self._deployment(PROVISIONER_WORKLOAD, "provisioner", pod)

    def attacher(self) -> dict[str, Any]:
        pod = {
            "serviceAccountName": "csi-mock-controller",
            "containers": [self._sidecar(ATTACHER, attacher_flags(), [])],
            "volumes": [self._controller_socket_dir()],
        }
        return self._deployment(ATTACHER_DEPLOYMENT, "attacher", pod)

    def resizer(self) -> dict[str, Any]:
        pod = {
            "serviceAccountName": "csi-mock-controller",
            "containers": [self._sidecar(RESIZER, resizer_flags(), [])],
            "volumes": [self._controller_socket_dir()],
        }
        return self._deployment(RESIZER_DEPLOYMENT, "resizer", pod)

    def snapshotter(self) -> dict[str, Any]:
        pod = {
            "serviceAccountName": "csi-mock-controller",
            "containers": [self._sidecar(SNAPSHOTTER, snapshotter_flags(), [])],
            "volumes": [self._controller_socket_dir()],
        }
        return self._deployment(SNAPSHOTTER_DEPLOYMENT, "snapshotter", pod)

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
        driver = self._driver_container(
            node_config_key("$(NODE_NAME)"),  # expanded by the kubelet from env
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
            "command": ["python3", "-c", _REMOVE_EARLIER_STATE, STATE_DIR, self.layout.generation],
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
