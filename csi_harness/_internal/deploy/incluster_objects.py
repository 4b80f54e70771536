"""The Kubernetes objects of csi-mock deployed into a cluster (kind or any other).

``render_objects`` is a pure function from a ``DriverDeployment`` and the nodes to the
objects of one deployment in the spec's namespace (``csi-mock`` + its suffix); without
nodes, of a deployment for any node (the kustomize base ``deploy/kubernetes/``, which
``csi_harness._internal.deploy.kustomize_base`` renders from it):

* the Namespace and RBAC of ``spec.MANIFEST_SOURCES`` moved to that namespace, the
  CSIDriver and StorageClasses as ``csi_harness._internal.deploy.spec`` makes them;
* a ConfigMap with one csi-mock configuration per instance (``controller.yaml``,
  ``node-<node>.yaml``) and a Secret with the admin API token;
* the node DaemonSet: csi-mock (node mode; distributed: mode all) registering itself
  with the kubelet, as no node-driver-registrar or livenessprobe image exists here;
* central provisioning: one Deployment whose pod runs the csi-mock controller,
  external-provisioner, external-attacher, external-resizer (and with snapshots
  csi-snapshotter, next to the VolumeSnapshotClass), sharing the CSI socket through an
  empty directory, as upstream's deployments run them; distributed: an
  external-provisioner DaemonSet sharing each node's socket directory, and no resizer
  (it has no per-node mode: each node's copy would act on every claim of the driver and
  ask an instance that knows only its own node's volumes).

A central sidecar is stopped by pausing it (``stop_component``): the controller's pod
shares one process namespace and csi-mock's admin API sends the sidecar SIGSTOP
(``admin.neighbours``), so the csi-mock instances keep their volumes, fault rules and
journal, as the local provider stops a single process. A distributed provisioner is
stopped by taking its node out of its DaemonSet (``excluding_nodes``). One pod instead
of one per sidecar makes a driver on kind three pods fewer to start and to keep
(docs/benchmarks.md).

Deployments with suffixes (and names) of their own share nothing, so they can run side
by side: each has its namespace, its cluster-scoped objects (RBAC, CSIDriver,
StorageClasses) named after it and labelled with its driver name
(``cluster_scoped_objects``), and its host directories (``host_dir_name``). The
unsuffixed deployment names things as the kustomize base does.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from csi_harness._internal.deploy.incluster_layout import (
    ADMIN_SECRET,
    APP,
    GENERATION,
    INSTANCE_LABEL,
    NAME_LABEL,
    DeploymentLayout,
    is_cluster_scoped,
    is_distributed,
    sidecars_of,
)
from csi_harness._internal.deploy.incluster_workloads import Workloads
from csi_harness._internal.deploy.spec import (
    DriverDeployment,
    csidriver_object,
    read_manifests,
    snapshot_class_object,
    storage_class_objects,
)

# lightkube's from_dict knows the VolumeSnapshotClass kind (a CRD's) once
# csi_harness._internal.kube.snapshots has defined it.
from csi_harness._internal.kube import snapshots  # noqa: F401
from csi_harness._internal.kube.nodes import ClusterNode


def namespace_and_rbac(spec: DriverDeployment) -> list[dict[str, Any]]:
    """The Namespace and RBAC of ``MANIFEST_SOURCES`` for this deployment: in its
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
    from the unsuffixed deployment's (unlabelled, as ``kubectl apply -k deploy/kubernetes``
    makes them)."""
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


def render_objects(
    spec: DriverDeployment,
    nodes: Sequence[ClusterNode] | None,
    *,
    image: str,
    sidecar_images: Mapping[str, str],
    admin_token: str,
    generation: str,
    controller_host: str | None = None,
) -> list[dict[str, Any]]:
    """The objects of one deployment, in the order to apply them.

    ``nodes`` None: for any node of any cluster, named when the pods start
    (``any_node_problems`` says which specs cannot be). ``generation`` names this
    deployment's state on the nodes (``/var/lib/csi-mock/<driver>/<generation>``): it
    must differ from every earlier deployment's on the same nodes, so that no volume or
    pool usage carries over.
    """
    if nodes is None:
        problems = any_node_problems(spec)
        if problems:
            raise ValueError("a deployment for any node cannot have " + "; ".join(problems))
    elif not nodes:
        raise ValueError("an in-cluster deployment needs at least one node")
    if not GENERATION.match(generation):
        raise ValueError(
            f"generation {generation!r} is not a directory name of letters, digits, '.', '_'"
            " and '-' (at most 63)"
        )
    missing = sorted(s for s in sidecars_of(spec) if s not in sidecar_images)
    if missing:
        raise ValueError(f"sidecar_images has no image for {', '.join(missing)}")
    layout = DeploymentLayout(
        spec,
        None if nodes is None else sorted(nodes, key=lambda n: n.name),
        generation,
        controller_host,
    )
    objects: list[dict[str, Any]] = [
        *namespace_and_rbac(spec),
        _admin_secret(spec, admin_token),
        layout.config_map(),
        *_driver_objects(spec),
    ]
    workloads = Workloads(layout, image, sidecar_images)
    if is_distributed(spec):
        objects += [workloads.node_daemonset(), workloads.distributed_provisioner()]
    else:
        objects += [workloads.controller(), workloads.node_daemonset()]
    return objects


def any_node_problems(spec: DriverDeployment) -> list[str]:
    """What ``spec`` needs to know the nodes for, which a deployment for any node
    cannot know: its pools named after nodes or zones, and a node's own provisioner."""
    problems = []
    if spec.node_pool_size is not None or spec.node_pool_sizes:
        problems.append(
            "node pools (node_pool_size, node_pool_sizes: set them to None and {}, and give "
            "pools without a node through overrides)"
        )
    if spec.zone_pool_size is not None:
        problems.append("zone pools (zone_pool_size: the zones are not known)")
    if is_distributed(spec):
        problems.append("distributed provisioning (each node plugin owns its node's pool)")
    return problems


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
