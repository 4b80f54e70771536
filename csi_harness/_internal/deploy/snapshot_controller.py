"""The cluster's snapshot-controller, for clusters the harness makes (kind).

VolumeSnapshots need one snapshot-controller per cluster, whatever the drivers: it
makes a VolumeSnapshotContent for each VolumeSnapshot, which the driver's
csi-snapshotter then cuts. Clusters people run usually have one (and the CRDs); a kind
cluster has neither, so the kind provider installs both (``install``). The local
provider runs the same binary as a process (csi_harness._internal.providers.local.components).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict

from csi_harness._internal.core.tools import Tools
from csi_harness._internal.deploy.images import pinned_version
from csi_harness._internal.deploy.sidecars import snapshot_controller_flags
from csi_harness._internal.kube.snapshots import install_crds

NAMESPACE = "kube-system"
NAME = "snapshot-controller"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "csi-mock-harness"}
SELECTOR = {"app.kubernetes.io/name": NAME}
METRICS_PORT = 8080
"""Where it serves its Prometheus metrics (``--http-endpoint``) in its pod."""

SNAPSHOTTER_MODULE = "github.com/kubernetes-csi/external-snapshotter/v8"


def snapshot_crd_dir(tools: Tools | None) -> Path | None:
    """external-snapshotter's CRDs at the pinned version: beside the pinned build, else
    in the Go module cache (``$GOMODCACHE``, default ``~/go/pkg/mod``); None without
    either (a machine with no Go toolchain)."""
    if tools is not None and tools.snapshot_crds().is_dir():
        return tools.snapshot_crds()
    cache = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    version = pinned_version("csi-snapshotter")
    crds = cache / f"{SNAPSHOTTER_MODULE}@{version}" / "client" / "config" / "crd"
    return crds if crds.is_dir() else None


# What the controller reads and writes (external-snapshotter's own RBAC for it).
_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "update"],
    },
    {
        "apiGroups": [""],
        "resources": ["events"],
        "verbs": ["list", "watch", "create", "update", "patch"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshotclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshotcontents"],
        "verbs": ["create", "get", "list", "watch", "update", "delete", "patch"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshotcontents/status"],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshots"],
        "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshots/status"],
        "verbs": ["update", "patch"],
    },
    {
        "apiGroups": ["groupsnapshot.storage.k8s.io"],
        "resources": ["volumegroupsnapshotclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["groupsnapshot.storage.k8s.io"],
        "resources": ["volumegroupsnapshotcontents"],
        "verbs": ["create", "get", "list", "watch", "update", "delete", "patch"],
    },
    {
        "apiGroups": ["groupsnapshot.storage.k8s.io"],
        "resources": ["volumegroupsnapshotcontents/status"],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["groupsnapshot.storage.k8s.io"],
        "resources": ["volumegroupsnapshots"],
        "verbs": ["get", "list", "watch", "update", "patch"],
    },
    {
        "apiGroups": ["groupsnapshot.storage.k8s.io"],
        "resources": ["volumegroupsnapshots/status"],
        "verbs": ["update", "patch"],
    },
]


def snapshot_controller_objects(image: str) -> list[dict[str, Any]]:
    """Its ServiceAccount, ClusterRole and binding, and a one-replica Deployment."""
    metadata = {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}
    role = f"csi-mock-harness-{NAME}"
    pod = {
        "serviceAccountName": NAME,
        "containers": [
            {
                "name": NAME,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "args": [*snapshot_controller_flags(), f"--http-endpoint=:{METRICS_PORT}"],
                "ports": [{"name": "metrics", "containerPort": METRICS_PORT}],
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
        "terminationGracePeriodSeconds": 10,
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": LABELS},
            "rules": _RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": LABELS},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            "roleRef": {
                "kind": "ClusterRole",
                "name": role,
                "apiGroup": "rbac.authorization.k8s.io",
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": SELECTOR},
                "template": {"metadata": {"labels": LABELS}, "spec": pod},
            },
        },
    ]


def install(kube: Client, crd_dir: Path, image: str, *, field_manager: str) -> None:
    """The snapshot CRDs (where missing) and the controller (applied: a second call
    changes nothing, a new image rolls it)."""
    install_crds(kube, crd_dir)
    for manifest in snapshot_controller_objects(image):
        kube.apply(cast(Any, from_dict(manifest)), field_manager=field_manager, force=True)
