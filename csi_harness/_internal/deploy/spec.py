"""What a driver deployment looks like, independent of where it runs.

One ``DriverDeployment`` value describes the driver as a test wants it (pools,
limits, attach mode, CSIDriver fields); ``driver_config_for`` turns it into the
csi-mock configuration of the controller and of each node instance, and
``csidriver_object`` / ``storage_class_objects`` into the Kubernetes objects, read
from the manifests every deployment starts from (``MANIFEST_SOURCES``).
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from csi_harness._internal.deploy.csidriver import (
    FsGroupPolicy,
    TokenRequest,
    VolumeLifecycleMode,
    check_lifecycle_modes,
    check_token_audiences,
)
from csi_harness._internal.deploy.feature_gates import SidecarFeatureGates, check_feature_gates

DRIVER_NAMESPACE = "csi-mock"
"""The namespace of the default driver (its CSIStorageCapacity objects, in-cluster: its pods)."""
NODE_TOPOLOGY_KEY = "topology.csi-mock.example/node"
"""The node topology key of the default driver (``DriverDeployment.node_topology_key``)."""
ZONE_TOPOLOGY_KEY = "topology.csi-mock.example/zone"
CONTROLLER = "controller"
"""The controller's instance name (the others are the nodes' names)."""
MANIFEST_SOURCES = Path(str(files("csi_harness._internal.deploy") / "manifests")).resolve()
"""The objects every deployment starts from, local and in-cluster: the Namespace, RBAC,
CSIDriver, StorageClasses and VolumeSnapshotClass (package data). The kustomize base
``deploy/kubernetes/`` is rendered from them (``scripts/gen_deploy.py``); the harness
never reads the base."""


class ProvisionerMode(enum.StrEnum):
    CENTRAL = "central"
    """One external-provisioner next to the csi-mock controller."""
    DISTRIBUTED = "distributed"
    """One external-provisioner per node (``--node-deployment``), each with its node's driver."""


class DriverDeployment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "csi-mock.example"
    """The CSI driver name; the topology keys are derived from it."""
    suffix: str = Field("", pattern=r"^(-[a-z0-9]{1,12})?$")
    """Appended to the names a deployment would otherwise share with others in one
    cluster: its StorageClasses and its namespace. With a ``name`` of its own too, a
    deployment is isolated from every other, so tests can run at the same time
    (the pytest plugin gives every test's driver both)."""
    csidriver: bool = True
    """Create the CSIDriver object at all (Kubernetes then defaults to attach required)."""
    attach_required: bool = False
    """CSIDriver.spec.attachRequired, and whether csi-mock advertises PUBLISH_UNPUBLISH."""
    storage_capacity: bool | None = True
    """CSIDriver.spec.storageCapacity; None leaves the field unset."""
    pod_info_on_mount: bool = True
    """CSIDriver.spec.podInfoOnMount: the kubelet passes the pod's name, namespace, UID
    and service account in NodePublishVolume's volume_context."""
    fs_group_policy: FsGroupPolicy | None = FsGroupPolicy.FILE
    """CSIDriver.spec.fsGroupPolicy; None leaves it unset (Kubernetes' default is
    ReadWriteOnceWithFSType)."""
    token_requests: list[TokenRequest] | None = None
    """CSIDriver.spec.tokenRequests (audience, expiration_seconds >= 600); None: unset."""
    requires_republish: bool | None = None
    """CSIDriver.spec.requiresRepublish; None: unset (false)."""
    journal_requests: Literal["keys", "whole"] = "keys"
    """csi-mock ``admin.journal_requests`` of every instance: ``whole`` keeps each
    request and reply whole in the journal (secrets hashed), for tests that assert on
    ``volume_context``, tokens or mount flags (``where=PATH=GLOB`` queries)."""
    service_account_token_in_secrets: bool | None = None
    """CSIDriver.spec.serviceAccountTokenInSecrets: the kubelet passes the tokens in
    NodePublishVolume's secrets instead of its volume_context; None: unset. Kubernetes
    allows it only with token_requests."""
    se_linux_mount: bool | None = None
    """CSIDriver.spec.seLinuxMount; None: unset (false)."""
    volume_lifecycle_modes: list[VolumeLifecycleMode] = Field(
        default_factory=lambda: [VolumeLifecycleMode.PERSISTENT, VolumeLifecycleMode.EPHEMERAL]
    )
    """CSIDriver.spec.volumeLifecycleModes: Persistent and/or Ephemeral."""
    controller_expansion: bool = True
    """csi-mock ``controller.expansion``: ControllerExpandVolume, controller EXPAND_VOLUME."""
    node_expansion: bool | None = None
    """csi-mock ``node.expansion``: NodeExpandVolume; None: as controller_expansion."""
    node_expansion_required: bool = True
    """csi-mock ``controller.node_expansion_required``."""
    online_expansion: bool = True
    """csi-mock ``online_expansion``: VolumeExpansion ONLINE, else OFFLINE."""
    resizer: bool = True
    """Run external-resizer next to the central controller. False: nothing grows a claim
    of the driver, whatever it advertises (upstream's ``resizingOnDriver=off``: a class
    that allows expansion, a driver deployed without the resizer)."""
    volume_stats: bool = True
    """csi-mock ``node.volume_stats``: NodeGetVolumeStats, GET_VOLUME_STATS."""
    controller_volume_condition: bool = False
    """csi-mock ``controller.volume_condition``: ListVolumes and ControllerGetVolume report
    volume conditions (NodeGetVolumeStats always does while volume_stats is on)."""
    volume_mount_group: bool = False
    """csi-mock ``node.volume_mount_group``: VOLUME_MOUNT_GROUP."""
    volume_health: bool = False
    """csi-mock ``node.volume_health`` (GET_VOLUME_HEALTH, NodeGetVolumeHealth) and
    ``controller.volume_health`` (GET/LIST_VOLUME_HEALTH): CSI v1.13 volume health, set
    per volume through the admin API."""
    storage_health: bool = False
    """csi-mock ``node.storage_health``: GET_STORAGE_HEALTH, NodeGetStorageHealth (CSI
    v1.13), set per node through the admin API."""
    sidecar_feature_gates: SidecarFeatureGates = Field(default_factory=dict)
    """``--feature-gates`` per sidecar, e.g. ``{"csi-provisioner": {"Gate": True}}``, on
    its command line wherever it runs."""
    node_pool_size: str | None = "10Gi"
    """A pool on every node, reachable only from it (local disk)."""
    node_pool_sizes: dict[str, str] = Field(default_factory=dict)
    """Per-node overrides of node_pool_size, by node name."""
    zone_pool_size: str | None = None
    """A pool per zone, reachable from every node of the zone (network-attached)."""
    max_volume_size: str | None = None
    max_volumes_per_node: int = Field(32, ge=0)
    """NodeGetInfo max_volumes_per_node of every node (CSINode allocatable.count); 0: none."""
    attach_limit: int = Field(0, ge=0)
    kinds: dict[str, float] = Field(default_factory=lambda: {"striped": 1.0, "mirrored": 2.0})
    default_kind: str = "striped"
    provisioner_mode: ProvisionerMode = ProvisionerMode.CENTRAL
    strict_topology: bool = True
    """external-provisioner --strict-topology: with a selected node, CreateVolume's
    requisite topology is that node's segment only, as node-local storage needs;
    without it the driver may place the volume elsewhere and binding then fails."""
    capacity_poll_interval: str = "2s"
    publish_capacity: bool = True
    """external-provisioner --enable-capacity: publish CSIStorageCapacity objects. False
    with ``storage_capacity`` true is a cluster where the scheduler asks for capacity and
    finds none (or only what a test creates)."""
    provisioner_api_qps: float | None = Field(None, gt=0)
    """external-provisioner --kube-api-qps (burst twice that); None: its default, 5
    QPS. Every provisioned volume costs it about three API writes (the PV and two
    events), so the default caps one central provisioner at ~2 volumes a second."""
    snapshots: Literal["full", "used", "copy_on_write"] | None = None
    """csi-mock's snapshots with this accounting (``controller.snapshots``), the
    csi-snapshotter sidecar next to the controller and the VolumeSnapshotClass
    ``snapshot_class()``; None: no snapshots (the CRDs and the cluster's
    snapshot-controller do not depend on it)."""
    clones: bool = False
    """``controller.clones``: claims may name another claim as their dataSource."""
    mutable_parameters: dict[str, list[str]] | None = None
    """``controller.modify.mutable_parameters`` (name -> allowed values, [] for any):
    ControllerModifyVolume, so VolumeAttributesClasses of the driver apply; None: off."""
    storage_classes: list[str] | None = None
    """Names from storageclasses.yaml (``MANIFEST_SOURCES``) to create; None: all."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Deep-merged into every csi-mock configuration (e.g. ``{"log_level": "debug"}``)."""

    _token_audiences = field_validator("token_requests")(check_token_audiences)
    _lifecycle_modes = field_validator("volume_lifecycle_modes")(check_lifecycle_modes)
    _feature_gates = field_validator("sidecar_feature_gates")(check_feature_gates)

    @model_validator(mode="after")
    def _check_token_in_secrets(self) -> DriverDeployment:
        # As the API server validates CSIDriverSpec (pkg/apis/storage/validation).
        if self.service_account_token_in_secrets is not None and not self.token_requests:
            raise ValueError(
                "service_account_token_in_secrets is set but no token_requests are specified"
            )
        return self

    @model_validator(mode="after")
    def _check_resizer(self) -> DriverDeployment:
        if not self.resizer and self.mutable_parameters is not None:
            raise ValueError(
                "resizer is false but mutable_parameters is set: external-resizer is what "
                "applies VolumeAttributesClasses (ControllerModifyVolume)"
            )
        return self

    @model_validator(mode="after")
    def _check_distributed(self) -> DriverDeployment:
        if self.provisioner_mode is ProvisionerMode.DISTRIBUTED:
            # Each node's csi-mock owns only its node's pool and volumes.
            if self.attach_required:
                raise ValueError(
                    "provisioner_mode distributed needs attach_required false: no central "
                    "controller knows the volumes to publish them"
                )
            if self.zone_pool_size is not None:
                raise ValueError(
                    "provisioner_mode distributed cannot have zone pools: every node's "
                    "instance would count the shared pool as its own"
                )
            if self.snapshots is not None or self.mutable_parameters is not None:
                raise ValueError(
                    "provisioner_mode distributed cannot have snapshots or mutable_parameters: "
                    "csi-snapshotter and external-resizer run next to a central controller only"
                )
        return self

    @property
    def node_topology_key(self) -> str:
        return f"topology.{self.name}/node"

    @property
    def zone_topology_key(self) -> str:
        return f"topology.{self.name}/zone"

    @property
    def namespace(self) -> str:
        """Where its CSIStorageCapacity objects (and in-cluster, its pods) live."""
        return DRIVER_NAMESPACE + self.suffix

    def storage_class(self, base: str = "csi-mock") -> str:
        """The name of the StorageClass ``base`` of storageclasses.yaml
        (``MANIFEST_SOURCES``) as this deployment creates it."""
        return base + self.suffix

    def snapshot_class(self) -> str:
        """The name of its VolumeSnapshotClass (snapshotclass.yaml of ``MANIFEST_SOURCES``)."""
        return "csi-mock" + self.suffix

    def segment(self, node: str, zone: str | None) -> dict[str, str]:
        """The topology segment of ``node`` (in ``zone``) that csi-mock reports."""
        segment = {self.node_topology_key: node}
        if zone is not None:
            segment[self.zone_topology_key] = zone
        return segment

    def pool_configs(self, nodes: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
        """Pools of the whole deployment; ``nodes`` is (node name, zone) pairs."""
        pools: list[dict[str, Any]] = []
        for node, _zone in nodes:
            size = self.node_pool_sizes.get(node, self.node_pool_size)
            if size is not None:
                segment = {self.node_topology_key: node}
                pools.append(self._pool(node_pool_name(node), size, segment))
        if self.zone_pool_size is not None:
            for zone in sorted({z for _, z in nodes if z is not None}):
                pools.append(
                    self._pool(
                        f"{zone}-shared", self.zone_pool_size, {self.zone_topology_key: zone}
                    )
                )
        return pools

    def _pool(self, name: str, size: str, segment: dict[str, str]) -> dict[str, Any]:
        pool: dict[str, Any] = {"name": name, "size": size, "segment": segment}
        if self.max_volume_size is not None:
            pool["max_volume_size"] = self.max_volume_size
        return pool


def capacity_instance(spec: DriverDeployment, segment: Mapping[str, str]) -> str:
    """The instance whose GetCapacity answers for ``segment``: the controller; with
    distributed provisioning, the instance of the segment's node (each answers for its
    own pool only). ValueError for a segment without the node topology key then."""
    if spec.provisioner_mode is not ProvisionerMode.DISTRIBUTED:
        return CONTROLLER
    key = spec.node_topology_key
    node = segment.get(key)
    if node is None:
        raise ValueError(
            f"{dict(segment)}: a distributed deployment answers GetCapacity per node; "
            f"the segment needs {key}"
        )
    return node


def node_pool_name(node: str) -> str:
    """The name of ``node``'s own pool (what the admin API's pool knobs take)."""
    return f"{node}-local"


def driver_config_for(
    spec: DriverDeployment,
    *,
    mode: str,
    nodes: list[tuple[str, str | None]],
    node: tuple[str, str | None] | None = None,
    **paths: Any,
) -> dict[str, Any]:
    """The csi-mock configuration (as a YAML-ready mapping) of one driver process."""
    config: dict[str, Any] = {
        "name": spec.name,
        "mode": mode,
        "attach_required": spec.attach_required,
        "node_topology_key": spec.node_topology_key,
        "kinds": {k: {"cost": v} for k, v in spec.kinds.items()},
        "default_kind": spec.default_kind,
        "pools": spec.pool_configs(nodes),
        "controller": controller_config(spec),
        **{k: str(v) if isinstance(v, Path) else v for k, v in paths.items()},
    }
    if spec.online_expansion is not True:
        config["online_expansion"] = spec.online_expansion
    if spec.journal_requests != "keys":
        config["admin"] = {**config.get("admin", {}), "journal_requests": spec.journal_requests}
    # The node's switches go to every process: the plugin's VolumeExpansion capability,
    # which the controller's socket answers too, depends on node expansion.
    node_section = node_switches(spec)
    if node is not None:
        name, zone = node
        node_section = {
            "id": name,
            "segment": spec.segment(name, zone),
            "max_volumes_per_node": spec.max_volumes_per_node,
            **node_section,
        }
    if node_section:
        config["node"] = node_section
    return deep_merge(config, spec.overrides)


def node_switches(spec: DriverDeployment) -> dict[str, Any]:
    """The ``node`` keys of the knobs that differ from csi-mock's defaults."""
    section: dict[str, Any] = {}
    if spec.node_expansion is not None:
        section["expansion"] = spec.node_expansion
    if not spec.volume_stats:
        section["volume_stats"] = False
    if spec.volume_mount_group:
        section["volume_mount_group"] = True
    if spec.volume_health:
        section["volume_health"] = True
    if spec.storage_health:
        section["storage_health"] = True
    return section


def controller_config(spec: DriverDeployment) -> dict[str, Any]:
    """The ``controller`` section: the attach limit and the optional features."""
    controller: dict[str, Any] = {"attach_limit": spec.attach_limit}
    if not spec.controller_expansion:
        controller["expansion"] = False
    if not spec.node_expansion_required:
        controller["node_expansion_required"] = False
    if spec.controller_volume_condition:
        controller["volume_condition"] = True
    if spec.volume_health:
        controller["volume_health"] = True
    if spec.snapshots is not None:
        controller["snapshots"] = {"accounting": spec.snapshots}
    if spec.clones:
        controller["clones"] = True
    if spec.mutable_parameters is not None:
        controller["modify"] = {"mutable_parameters": spec.mutable_parameters}
    return controller


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_manifests(file_name: str) -> list[dict[str, Any]]:
    """The objects of one file of ``MANIFEST_SOURCES`` (a fresh copy on every call)."""
    path = MANIFEST_SOURCES / file_name
    try:
        return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    except OSError as exc:
        raise RuntimeError(f"cannot read the driver manifests: {exc}") from exc


def csidriver_object(spec: DriverDeployment) -> dict[str, Any]:
    """The CSIDriver of a deployment: csidriver.yaml (``MANIFEST_SOURCES``) with every
    field the deployment chooses (the one definition, local and in-cluster)."""
    (obj,) = read_manifests("csidriver.yaml")
    obj["metadata"]["name"] = spec.name
    fields: dict[str, Any] = {
        "attachRequired": spec.attach_required,
        "storageCapacity": spec.storage_capacity,
        "podInfoOnMount": spec.pod_info_on_mount,
        "fsGroupPolicy": None if spec.fs_group_policy is None else str(spec.fs_group_policy),
        "tokenRequests": None
        if spec.token_requests is None
        else [request.to_object() for request in spec.token_requests],
        "requiresRepublish": spec.requires_republish,
        "serviceAccountTokenInSecrets": spec.service_account_token_in_secrets,
        "seLinuxMount": spec.se_linux_mount,
        "volumeLifecycleModes": [str(mode) for mode in spec.volume_lifecycle_modes],
    }
    for name, value in fields.items():
        if value is None:
            obj["spec"].pop(name, None)
        else:
            obj["spec"][name] = value
    return obj


def snapshot_class_object(spec: DriverDeployment) -> dict[str, Any]:
    """The VolumeSnapshotClass of a deployment with snapshots."""
    (obj,) = read_manifests("snapshotclass.yaml")
    obj["metadata"]["name"] = spec.snapshot_class()
    obj["driver"] = spec.name
    return obj


def storage_class_objects(spec: DriverDeployment) -> list[dict[str, Any]]:
    manifests = read_manifests("storageclasses.yaml")
    unknown = set(spec.storage_classes or []) - {m["metadata"]["name"] for m in manifests}
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ValueError(f"storage_classes: {names} not in {MANIFEST_SOURCES}/storageclasses.yaml")
    objects = []
    for obj in manifests:
        if spec.storage_classes is not None and obj["metadata"]["name"] not in spec.storage_classes:
            continue
        obj["provisioner"] = spec.name
        obj["metadata"]["name"] = spec.storage_class(obj["metadata"]["name"])
        objects.append(obj)
    return objects


def check_side_by_side(spec: DriverDeployment, running: DriverDeployment | None) -> None:
    """A driver deployed beside others (``Cluster.deploy_driver``) needs a suffix and
    a name of its own; ValueError saying which it lacks."""
    if not spec.suffix:
        raise ValueError(
            "deploy_driver: a driver beside others needs a suffix of its own "
            "(redeploy_driver replaces the cluster's unsuffixed driver)"
        )
    if running is not None and running.name == spec.name:
        raise ValueError(
            f"deploy_driver: {spec.name} is the name of the cluster's driver; a driver "
            "beside it needs a name of its own"
        )


def check_same_driver(current: DriverDeployment, adopted: DriverDeployment) -> None:
    """ValueError unless ``adopted`` names the same deployment as ``current`` (a driver
    can take a changed spec, never another driver's name)."""
    if (adopted.name, adopted.suffix) != (current.name, current.suffix):
        raise ValueError(
            f"a driver deployed as {current.name!r} (suffix {current.suffix!r}) cannot "
            f"adopt the spec of {adopted.name!r} (suffix {adopted.suffix!r})"
        )
