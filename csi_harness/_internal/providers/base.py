"""What the suites may know about a cluster, whichever provider made it.

The local provider (``csi_harness._internal.providers.local``), kind
(``csi_harness._internal.providers.kind``) and an existing cluster reached by a
kubeconfig (``csi_harness._internal.providers.existing``) each implement ``Cluster``;
the driver they deploy implements ``Driver``. Suites use only these interfaces: nodes
are picked from ``Cluster.nodes`` (by zone, or by whether they run pods), never named.

``Cluster`` is what every provider can do. What only some can is a capability of its
own, a protocol a caller tests for (``isinstance(cluster, SchedulerRestarts)``) or
asks for by its function in snake case, which raises ``Unsupported`` saying why
the cluster lacks it (``scheduler_restarts(cluster).restart_scheduler(...)``):

* ``SchedulerRestarts``: restart kube-scheduler with another configuration (local, kind);
* ``OwnSchedulers``: run a kube-scheduler of a test's own beside the cluster's (local as
  a process; kind and existing kubeadm-style clusters as a pod);
* ``KubeletRestarts``: restart a node's kubelet (local, kind);
* ``ComponentMetrics``: the snapshot-controller's and kube-controller-manager's
  Prometheus text (local, kind);
* ``FeatureGates``: the gates kube-scheduler and the kubelets run with (every provider);
* ``ConfiguredFeatureGates``: every component's gates, as set at bring-up with
  ``--csi-feature-gates`` (local);
* ``ImageDeployments``: csi-mock runs in the cluster as pods, from images it names
  (kind, existing).

A cluster with a capability may still refuse one call with ``Unsupported`` (a
simulated node has no kubelet to restart). Nobody decides by a provider's class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube.feature_gates import Component
from csi_harness._internal.kube.nodes import ClusterNode, pick_nodes, scheduling_nodes
from csi_mock.admin.client import AdminClient

__all__ = [
    "Cluster",
    "ClusterNode",
    "ComponentMetrics",
    "ConfiguredFeatureGates",
    "Driver",
    "FeatureGates",
    "ImageDeployments",
    "KubeletRestarts",
    "OwnSchedulers",
    "SchedulerRestarts",
    "Unsupported",
    "component_metrics",
    "configured_feature_gates",
    "feature_gates",
    "kubelet_restarts",
    "own_schedulers",
    "pick_nodes",
    "scheduler_restarts",
    "scheduling_nodes",
]


class Driver(Protocol):
    """A csi-mock deployment in a cluster, as a test sees it."""

    @property
    def spec(self) -> DriverDeployment: ...

    def adopt_spec(self, spec: DriverDeployment) -> None:
        """Take ``spec`` as the driver's own after a field of it was changed in place
        (the driver pool: ``max_volumes_per_node``); name and suffix stay the driver's."""
        ...

    @property
    def nodes(self) -> Sequence[ClusterNode]:
        """The nodes with a csi-mock node instance, sorted by name."""
        ...

    def deploy(self) -> None:
        """Deploy from empty state and wait until the driver is ready: registered on
        every node and, when its CSIDriver asks for it, its complete capacity set
        published. A deployment that fails is removed again. Clusters call this
        (``deploy_driver``, ``redeploy_driver``); tests get a deployed driver."""
        ...

    def remove(self) -> None:
        """Delete the deployment: its processes or pods, its objects, its
        CSIStorageCapacity, a suffixed driver's topology labels."""
        ...

    def instances(self) -> list[str]:
        """The csi-mock instances: "controller" (unless distributed) and node names."""
        ...

    def admin(self, instance: str = "controller") -> AdminClient:
        """A client of one instance's admin API (faults, knobs, journal); close it."""
        ...

    def get_capacity(
        self, segment: Mapping[str, str], parameters: Mapping[str, str]
    ) -> tuple[int, int]:
        """The controller's GetCapacity answer for ``segment`` and StorageClass
        ``parameters``, over its CSI socket: (available_capacity, maximum_volume_size)."""
        ...

    def node_get_info(self, node: str) -> tuple[str, dict[str, str]]:
        """The NodeGetInfo answer of ``node``'s instance, over its CSI socket:
        (node_id, accessible_topology segments)."""
        ...

    def components(self) -> list[str]:
        """What ``component_log`` and ``stop_component`` take: "csi-mock-controller"
        (unless distributed), "csi-mock-node-<node>" (on the local provider, a node
        with a kubelet; one "csi-mock-simulated-nodes" process serves every
        simulated node's instance), "csi-provisioner" (distributed:
        "csi-provisioner-<node>", one per node), "csi-attacher" and "csi-resizer"
        (unless distributed)."""
        ...

    def component_log(self, component: str) -> str:
        """The log of one of ``components()`` since this deployment started it."""
        ...

    def stop_component(self, component: str) -> None:
        """Stop one sidecar for the rest of the test (e.g. "csi-attacher")."""
        ...

    def resume_paused(self) -> list[str]:
        """Let the stopped components that were paused, not removed, go on where they
        stopped (a sidecar of an in-cluster controller's pod); they are no longer
        stopped. Which ones (the others stay stopped)."""
        ...

    def failed_component(self) -> str | None:
        """Which components were stopped, exited or restarted since the deployment
        was ready, or None while every one runs as deployed."""
        ...


class Cluster(Protocol):
    """A running Kubernetes cluster the suites can deploy csi-mock into: what every
    provider can do. The rest is a capability (the module's docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def default_driver(self) -> DriverDeployment:
        """The driver deployed when a test asks for nothing else."""
        ...

    @property
    def driver(self) -> Driver | None:
        """The driver deployed now (the last ``redeploy_driver``, or the one the
        cluster came with); None when there is none."""
        ...

    @property
    def log_dir(self) -> Path | None:
        """A directory with a ``<component>.log`` of every process of the cluster,
        control plane included; None where logs come only from ``Driver.component_log``."""
        ...

    def nodes(self) -> list[ClusterNode]:
        """The nodes csi-mock runs on, sorted by name (control-plane nodes that take
        no pods are not among them)."""
        ...

    @property
    def concurrent_drivers(self) -> bool:
        """Whether drivers with names and suffixes of their own can run side by side
        (``deploy_driver``), so that tests can run at the same time."""
        ...

    def deploy_driver(self, spec: DriverDeployment) -> Driver:
        """Deploy a driver beside the running ones (``concurrent_drivers``; else it
        replaces the running one, like ``redeploy_driver``) and wait until it is ready."""
        ...

    def remove_driver(self, driver: Driver | None = None) -> None:
        """Remove ``driver`` (None: the cluster's current one): its processes or pods,
        its objects, its CSIStorageCapacity."""
        ...

    def redeploy_driver(self, spec: DriverDeployment) -> Driver:
        """Replace the running driver by a fresh one from ``spec`` (no state carried
        over) and wait until it is registered on every node and its complete
        CSIStorageCapacity set is published."""
        ...

    def admin_instances(self) -> Mapping[str, AdminClient]:
        """For failure diagnostics: a client per instance of the current driver (the
        caller closes them); empty without a driver."""
        ...


# -- capabilities ---------------------------------------------------------------------
#
# runtime_checkable: ``isinstance`` looks for the members by name only (it cannot
# check signatures), so a provider implements a capability's members wholly or not
# at all; a member that cannot work on this cluster raises ``Unsupported``.


@runtime_checkable
class SchedulerRestarts(Protocol):
    """A cluster whose kube-scheduler the harness can restart with another
    configuration (the local provider's process, kind's static pod)."""

    def restart_scheduler(
        self, scheduler: Mapping[str, object], feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        """Restart kube-scheduler with ``scheduler`` merged into its configuration (and
        ``feature_gates`` set over its own), and wait until it is back."""
        ...

    @property
    def scheduler_config(self) -> dict[str, object]:
        """What ``restart_scheduler`` last applied (empty: as brought up)."""
        ...


@runtime_checkable
class OwnSchedulers(Protocol):
    """A cluster that runs a kube-scheduler of a test's own beside its own one (a
    process on the local provider; a pod elsewhere), so that a test can score with a
    configuration of its own without restarting the cluster's scheduler."""

    def own_scheduler(
        self,
        name: str,
        profiles: Sequence[Mapping[str, object]],
        feature_gates: Mapping[str, bool] | None = None,
    ) -> AbstractContextManager[None]:
        """Run kube-scheduler ``name`` serving only ``profiles`` (each with a
        ``schedulerName`` of its own) until the block ends; ready on entry."""
        ...


@runtime_checkable
class KubeletRestarts(Protocol):
    """A cluster whose kubelets the harness can restart."""

    def restart_kubelet(self, node: str) -> None:
        """Stop ``node``'s kubelet and start it again (its pods keep running), and wait
        until it is back; Unsupported when that node has no kubelet to restart."""
        ...


@runtime_checkable
class ComponentMetrics(Protocol):
    """A cluster whose control-plane components' metrics the harness can read."""

    def snapshot_controller_metrics(self) -> str:
        """The Prometheus text of the cluster's snapshot-controller (its
        ``snapshot_controller_operation_total_seconds`` histogram), or Unsupported
        saying why it cannot be read."""
        ...

    def controller_manager_metrics(self) -> str:
        """The Prometheus text of the cluster's kube-controller-manager (its
        SELinuxWarningController's ``selinux_warning_controller_selinux_volume_conflict``
        among them), or Unsupported saying why it cannot be read."""
        ...


@runtime_checkable
class FeatureGates(Protocol):
    """A cluster that can tell the feature gates kube-scheduler and its kubelets run
    with (from their configuration, or from their pods and ``/configz``)."""

    def scheduler_feature_gate(self, gate: str) -> bool | None:
        """The value kube-scheduler runs with for ``gate``; None when it is not set
        explicitly (its default) or cannot be known."""
        ...

    def kubelet_feature_gate(self, gate: str) -> bool | None:
        """The value every kubelet runs with for ``gate``; None when it is not set
        explicitly, the kubelets differ, or it cannot be known."""
        ...


@runtime_checkable
class ConfiguredFeatureGates(Protocol):
    """A cluster the harness brought up with the feature gates it was given
    (``--csi-feature-gates``), so it knows those of every component."""

    def component_feature_gate(self, component: Component, gate: str) -> bool | None:
        """The value ``component`` was started with for ``gate``; None when it was
        not set (the component's default)."""
        ...


@runtime_checkable
class DriverHandover(Protocol):
    """A cluster whose drivers another process can take over: everything a driver
    object knows of its deployment is in the cluster or in ``handover``'s state, so
    the pytest-xdist workers of a session can hand idle drivers to each other (the
    driver pool). Not the local provider, whose drivers are this process's children."""

    def handover(self, driver: Driver) -> dict[str, object]:
        """What another process needs to use ``driver`` (a JSON-able mapping)."""
        ...

    def adopt_driver(self, state: Mapping[str, object]) -> Driver:
        """The driver ``handover`` described, as this process's object; nothing is
        deployed."""
        ...


@runtime_checkable
class ImageDeployments(Protocol):
    """A cluster where csi-mock runs as pods from images (not as local processes): the
    images it deploys and the kubectl it applies manifests with."""

    @property
    def driver_image(self) -> str: ...

    @property
    def sidecar_images(self) -> Mapping[str, str]:
        """Each sidecar's image by the sidecar's name."""
        ...

    @property
    def kubectl(self) -> str:
        """The kubectl command to run against the cluster (with its kubeconfig)."""
        ...


BROUGHT_UP = "the harness does that only on the clusters it brings up (local, kind)"


def scheduler_restarts(cluster: Cluster) -> SchedulerRestarts:
    """``cluster`` as one whose kube-scheduler can be restarted, or Unsupported."""
    if isinstance(cluster, SchedulerRestarts):
        return cluster
    raise Unsupported(
        f"cannot restart the kube-scheduler of cluster {cluster.name!r}: a cluster the "
        f"harness did not make keeps its own scheduler; {BROUGHT_UP}"
    )


def own_schedulers(cluster: Cluster) -> OwnSchedulers:
    """``cluster`` as one that can run a kube-scheduler of a test's own, or Unsupported."""
    if isinstance(cluster, OwnSchedulers):
        return cluster
    raise Unsupported(f"cluster {cluster.name!r} cannot run a kube-scheduler of a test's own")


def kubelet_restarts(cluster: Cluster) -> KubeletRestarts:
    """``cluster`` as one whose kubelets can be restarted, or Unsupported."""
    if isinstance(cluster, KubeletRestarts):
        return cluster
    raise Unsupported(f"cannot restart a kubelet of cluster {cluster.name!r}: {BROUGHT_UP}")


def component_metrics(cluster: Cluster) -> ComponentMetrics:
    """``cluster`` as one whose components' metrics can be read, or Unsupported."""
    if isinstance(cluster, ComponentMetrics):
        return cluster
    raise Unsupported(
        f"cannot read the control plane's metrics of cluster {cluster.name!r}: {BROUGHT_UP}"
    )


def feature_gates(cluster: Cluster) -> FeatureGates:
    """``cluster`` as one that tells its scheduler's and kubelets' gates, or Unsupported."""
    if isinstance(cluster, FeatureGates):
        return cluster
    raise Unsupported(f"cluster {cluster.name!r} does not tell its feature gates")


def configured_feature_gates(cluster: Cluster) -> ConfiguredFeatureGates:
    """``cluster`` as one that knows every component's gates, or Unsupported."""
    if isinstance(cluster, ConfiguredFeatureGates):
        return cluster
    raise Unsupported(
        f"the harness knows the feature gates of every component only of the local "
        f"clusters it brings up, not of cluster {cluster.name!r}"
    )
