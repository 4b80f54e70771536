"""Builders of the Kubernetes objects the suites create, as plain mappings,
``create`` to submit them, and ``drop_node_labels`` to clean labels up."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

BUSYBOX = "csi-mock.local/busybox:1"


@dataclass(frozen=True)
class PodImage:
    """The image the suites' pods run, and when the kubelet pulls it: the busybox built
    here, never pulled, unless the session's images are pulled (``--csi-images``)."""

    reference: str = BUSYBOX
    pull_policy: str = "Never"


_session_pod_image = [PodImage()]


def use_pod_image(image: PodImage) -> None:
    """Make ``image`` the one every ``pod()`` of this process runs. The pytest plugin
    calls it once per session (and per xdist worker) from the session's image set."""
    _session_pod_image[0] = image


def pod_image() -> PodImage:
    """The image ``pod()`` gives its container now."""
    return _session_pod_image[0]


NODE_TYPE_LABEL = "harness.csi-mock.example/node-type"
"""Whether a node of the local provider runs a real kubelet or is simulated."""


def claim(
    name: str,
    namespace: str,
    size: str,
    storage_class: str,
    *,
    block: bool = False,
    volume_name: str | None = None,
) -> dict[str, Any]:
    """A ReadWriteOnce claim; ``block``: a raw block volume (volumeMode Block);
    ``volume_name``: bound to that PersistentVolume (a static one)."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "volumeMode": "Block" if block else "Filesystem",
        "resources": {"requests": {"storage": size}},
    }
    if volume_name is not None:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def static_volume(
    name: str,
    driver: str,
    *,
    size: str = "1Gi",
    storage_class: str = "",
    reclaim_policy: str = "Retain",
    claim_ref: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A ReadWriteOnce PersistentVolume of ``driver`` made by hand, its volume handle
    ``name``; ``claim_ref``: (namespace, name) of the claim it is reserved for."""
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": reclaim_policy,
        "storageClassName": storage_class,
        "csi": {"driver": driver, "volumeHandle": name},
    }
    if claim_ref is not None:
        spec["claimRef"] = {"namespace": claim_ref[0], "name": claim_ref[1]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def storage_capacity(
    namespace: str, storage_class: str, topology: dict[str, str], capacity: str
) -> dict[str, Any]:
    """A CSIStorageCapacity as a provisioner would publish it (named ``made-by-test-``
    and a suffix): ``capacity`` for ``storage_class`` on the nodes ``topology`` selects.
    Make it in the test's namespace, so that it goes with it."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"generateName": "made-by-test-", "namespace": namespace},
        "storageClassName": storage_class,
        "nodeTopology": {"matchLabels": dict(topology)},
        "capacity": capacity,
    }


def pod(
    name: str,
    namespace: str,
    *,
    claims: list[str] = (),  # type: ignore[assignment]
    devices: list[str] = (),  # type: ignore[assignment]
    ephemeral: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    inline: list[dict[str, str]] = (),  # type: ignore[assignment]
    csi_driver: str | None = None,
    nodes: list[str] | None = None,
    preferred_node: str | None = None,
    node_type: str | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """A pod that sleeps (or runs ``command``, once) with the given volumes mounted.

    ``claims``: PVC names; ``devices``: names of raw block PVCs, seen in the
    container as ``/dev/block-<i>``; ``ephemeral``: (volume name, size, storage class) generic
    ephemeral volumes; ``inline``: volumeAttributes of CSI inline ephemeral volumes
    of ``csi_driver``;
    ``nodes``: required node names; ``preferred_node``: a node preferred over the
    others; ``node_type``: "kubelet" or "simulated".
    """
    volumes: list[dict[str, Any]] = [
        {"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": c}}
        for i, c in enumerate(claims)
    ]
    for volume, size, storage_class in ephemeral:
        template = claim("unused", namespace, size, storage_class)
        volumes.append(
            {
                "name": volume,
                "ephemeral": {"volumeClaimTemplate": {"spec": template["spec"]}},
            }
        )
    if inline and not csi_driver:
        raise ValueError("inline volumes need csi_driver: the CSI driver's name")
    for i, attributes in enumerate(inline):
        volumes.append(
            {
                "name": f"inline-{i}",
                "csi": {"driver": csi_driver, "volumeAttributes": attributes},
            }
        )
    container: dict[str, Any] = {
        "name": "app",
        "image": pod_image().reference,
        "imagePullPolicy": pod_image().pull_policy,
        "command": command or ["sleep", "3600"],
        "volumeMounts": [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes],
    }
    if devices:
        container["volumeDevices"] = [
            {"name": f"device-{i}", "devicePath": f"/dev/block-{i}"} for i in range(len(devices))
        ]
        volumes += [
            {"name": f"device-{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(devices)
        ]
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": [container],
        "volumes": volumes,
    }
    if command is not None:
        spec["restartPolicy"] = "Never"
    affinity: dict[str, Any] = {}
    if nodes is not None:
        # A metadata.name field selector takes one value: one (ORed) term per node.
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                for node in nodes
            ]
        }
    if preferred_node is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [preferred_node]}
                    ]
                },
            }
        ]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    if node_type is not None:
        spec["nodeSelector"] = {NODE_TYPE_LABEL: node_type}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def create(kube: Client, *manifests: dict[str, Any]) -> None:
    """Create each manifest (a mapping as built above) in order."""
    for manifest in manifests:
        kube.create(cast(Any, from_dict(manifest)))


def get_or_none(
    kube: Client, resource: Any, name: str, *, namespace: str | None = None
) -> Any | None:
    """The object (in ``namespace``, if namespaced), or None when it is not there;
    errors other than 404 propagate."""
    try:
        return kube.get(resource, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


def exists(kube: Client, resource: Any, name: str, *, namespace: str | None = None) -> bool:
    """Whether the object (in ``namespace``, if namespaced) is there; errors other than
    404 propagate."""
    return get_or_none(kube, resource, name, namespace=namespace) is not None


def gone(
    kube: Client, resource: Any, name: str, *, namespace: str | None = None
) -> tuple[bool, str]:
    """A ``wait_for`` probe: the object is no longer there."""
    return not exists(kube, resource, name, namespace=namespace), f"{name} still exists"


def drop_node_labels(kube: Client, nodes: Iterable[str], keys: Collection[str]) -> None:
    """Remove the label ``keys`` from ``nodes`` (a JSON merge patch with nulls); a node
    that is gone, or an API error, is left as it is: this is clean-up."""
    body = {"metadata": {"labels": dict.fromkeys(keys)}}
    for node in nodes:
        with contextlib.suppress(ApiError):
            kube.patch(Node, node, body, patch_type=PatchType.MERGE)
