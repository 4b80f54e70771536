"""Removing an in-cluster deployment (``InClusterDriver.remove``), and clearing the way
before one is deployed (``InClusterDriver.deploy``).

A suffixed deployment, whose names are its own, removes its namespace and its
cluster-scoped objects and leaves every other deployment alone; before it is deployed,
whatever an earlier deployment of the same spec left is removed and waited for. The
unsuffixed one, in the shared ``csi-mock`` namespace, removes whatever csi-mock
deployment that namespace holds (this one or an earlier one) and waits until its pods
are gone and the kubelets have dropped its CSINode entries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.core.client import LabelSelector
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import DaemonSet, Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod, Secret
from lightkube.resources.storage_v1 import CSIDriver, CSIStorageCapacity, StorageClass
from lightkube.types import CascadeType

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.incluster_layout import APP, INSTANCE_LABEL, NAME_LABEL
from csi_harness._internal.deploy.incluster_objects import cluster_scoped_objects
from csi_harness._internal.deploy.readiness import drop_topology_labels, wait_deregistered
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube.describe import describe_pod
from csi_harness._internal.kube.objects import exists
from csi_harness._internal.kube.waits import DRIVER_NAME_LABEL


@dataclass(frozen=True)
class DeploymentRemoval:
    """The removal of the deployment of ``spec`` from a cluster whose nodes are
    ``nodes`` (their names); each wait takes at most ``timeout`` seconds."""

    kube: Client
    spec: DriverDeployment
    nodes: Sequence[str]
    timeout: float
    progress: Callable[[str], None]

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    def remove(self) -> None:
        """Delete the deployment (``remove_deployment``), then, even when a delete
        failed, take a suffixed driver's topology labels off the nodes."""
        try:
            self.remove_deployment()
        finally:
            drop_topology_labels(self.kube, self.spec, list(self.nodes))

    def remove_deployment(self) -> None:
        """Delete the deployment.

        Suffixed: delete its namespace (in the background, with its pods,
        CSIStorageCapacity objects and everything else in it) and its cluster-scoped
        objects (RBAC, CSIDriver, StorageClasses); nothing waits for the pods to go or
        the kubelets to drop its CSINode entries, as no later deployment reuses its
        names. No other deployment is touched.

        Unsuffixed: delete every csi-mock deployment in the shared namespace (this one
        or an earlier one, e.g. ``kubectl apply -k deploy/kubernetes``) and wait until
        its pods are gone and no kubelet lists its driver. The Namespace and RBAC stay.
        """
        if self.spec.suffix:
            failed: list[ApiError] = []
            for resource, name in self._own_cluster_objects():
                cascade = CascadeType.BACKGROUND if resource is Namespace else None
                try:
                    _delete(self.kube, resource, name, cascade=cascade)
                except ApiError as exc:  # still try the others: leave as little as can be
                    failed.append(exc)
            if failed:
                raise failed[0]
        else:
            self._remove_shared_namespace_deployments()

    def _own_cluster_objects(self) -> list[tuple[Any, str]]:
        """(resource, name) of the suffixed deployment's objects outside its namespace,
        the Namespace first."""
        return [
            (type(from_dict(obj)), str(obj["metadata"]["name"]))
            for obj in cluster_scoped_objects(self.spec)
        ]

    def remove_own_leftovers(self) -> None:
        """Remove what an earlier deployment of this very spec left (an interrupted
        run) and wait until it is gone: a terminating namespace takes no new objects,
        and the CSIDriver and StorageClasses have immutable fields."""

        def none_left() -> tuple[bool, str]:
            left = [
                f"{resource.__name__}/{name}"
                for resource, name in self._own_cluster_objects()
                if exists(self.kube, resource, name)
            ]
            return not left, ", ".join(left)

        clear, _ = none_left()
        if clear:
            return
        self.progress(f"removing the leftovers of an earlier {self.spec.name}")
        self.remove()
        wait_for(
            f"the leftovers of an earlier {self.spec.name} to be deleted",
            none_left,
            timeout=self.timeout,
            interval=0.5,
        )
        # The new node plugins register under the same name: the kubelets must have
        # dropped the old ones first, or their late deregistration drops the new ones.
        wait_deregistered(self.kube, [self.spec.name], list(self.nodes), timeout=self.timeout)

    def _remove_shared_namespace_deployments(self) -> None:
        namespace = self.namespace
        old_drivers = self._deployed_driver_names() | {self.spec.name}
        selector: LabelSelector = {NAME_LABEL: APP}
        for workload in (Deployment, DaemonSet):
            for obj in self.kube.list(workload, namespace=namespace, labels=selector):
                _delete(self.kube, workload, _name(obj), namespace, CascadeType.BACKGROUND)
        self.progress("waiting for the previous csi-mock pods to go")

        def pods_gone() -> tuple[bool, str]:
            left = list(self.kube.list(Pod, namespace=namespace, labels=selector))
            return not left, "; ".join(describe_pod(p) for p in left)

        wait_for("the csi-mock pods to be gone", pods_gone, timeout=self.timeout, interval=0.5)
        wait_deregistered(self.kube, old_drivers, list(self.nodes), timeout=self.timeout)
        # Only now: a running provisioner would publish its capacity objects again.
        for driver in sorted(old_drivers):
            for capacity in self.kube.list(
                CSIStorageCapacity, namespace=namespace, labels={DRIVER_NAME_LABEL: driver}
            ):
                _delete(self.kube, CSIStorageCapacity, _name(capacity), namespace)
        for namespaced in (ConfigMap, Secret):
            for obj in self.kube.list(namespaced, namespace=namespace, labels=selector):
                _delete(self.kube, namespaced, _name(obj), namespace)
        # Immutable fields (attachRequired, parameters): a new deployment recreates them.
        for cluster_wide in (CSIDriver, StorageClass):
            for cluster_obj in self._shared_namespace_objects(cluster_wide):
                _delete(self.kube, cluster_wide, _name(cluster_obj))

        def cluster_objects_gone() -> tuple[bool, str]:
            left = [
                f"{kind.__name__}/{_name(obj)}"
                for kind in (CSIDriver, StorageClass)
                for obj in self._shared_namespace_objects(kind)
            ]
            return not left, ", ".join(left)

        wait_for(
            "the csi-mock CSIDriver and StorageClasses to be deleted",
            cluster_objects_gone,
            timeout=self.timeout,
            interval=0.5,
        )

    def _shared_namespace_objects(self, cluster_wide: Any) -> list[Any]:
        """The csi-mock objects of kind ``cluster_wide`` (CSIDriver, StorageClass) of
        the unsuffixed deployments: a suffixed deployment labels its own with its
        driver name (``incluster_objects.cluster_scoped_objects``)."""
        return [
            obj
            for obj in self.kube.list(cluster_wide, labels={NAME_LABEL: APP})
            if INSTANCE_LABEL not in ((obj.metadata.labels if obj.metadata else None) or {})
        ]

    def _deployed_driver_names(self) -> set[str]:
        """Driver names of the deployments in the namespace (from their labels) and of
        the unsuffixed deployments' CSIDriver objects: whose CSINode entries must go
        before a new start."""
        names: set[str] = set()
        for daemonset in self.kube.list(
            DaemonSet, namespace=self.namespace, labels={NAME_LABEL: APP}
        ):
            instance = ((daemonset.metadata.labels if daemonset.metadata else None) or {}).get(
                INSTANCE_LABEL
            )
            if instance:
                names.add(instance)
        for driver in self._shared_namespace_objects(CSIDriver):
            names.add(_name(driver))
        return names


def _name(obj: Any) -> str:
    return str(obj.metadata.name)


def _delete(
    kube: Client,
    resource: Any,
    name: str,
    namespace: str | None = None,
    cascade: CascadeType | None = None,
) -> None:
    """Delete, taking an object already gone as done."""
    try:
        if namespace is None:
            kube.delete(resource, name, cascade=cascade)
        else:
            kube.delete(resource, name, namespace=namespace, cascade=cascade)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
