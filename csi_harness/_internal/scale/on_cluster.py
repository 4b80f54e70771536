"""Scale runs on a cluster of real nodes: kind, or an existing cluster reached by a
kubeconfig, with csi-mock deployed into it (a DaemonSet of node instances; with
distributed provisioning, an external-provisioner beside each).

Unlike the local provider's runs (``experiment.run_variant``), the cluster is not made
per run. Each run deploys the variant's driver (``experiment.driver_spec``) into the
one cluster, restarts kube-scheduler with the variant's feature gates and
configuration when the cluster can (kind) and they differ from what it runs, creates
the burst on every node csi-mock runs on, follows it until every pod is Running (the
KEP author's measure itself: these kubelets start pods), reads the driver, and
clears the burst away (its claims' volumes deleted by the driver) before removing the
driver. An existing cluster's kube-scheduler is left as it is: a run records the
gates it could read from the scheduler's pod, and says when the variant asked for
others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace, PersistentVolume

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.scale.experiment import (
    NAMESPACE,
    RunResult,
    Setup,
    Variant,
    driver_spec,
    run_burst,
)
from csi_harness._internal.scale.workload import BUSY_NAMESPACE, Burst
from csi_mock.model.quantity import parse_quantity

CLEAR_TIMEOUT = 900.0
"""Seconds to wait for a burst's namespace and its volumes to be gone."""


class ClusterRuns:
    """Runs of variants on one cluster; ``kind`` names it in the results ("kind" or
    "existing")."""

    def __init__(self, cluster: Cluster, kind: str) -> None:
        self.cluster = cluster
        self.kind = kind
        self._scheduler: tuple[dict[str, object], dict[str, bool]] | None = None
        """What ``restart_scheduler`` last applied; None: as the cluster came."""

    def run_variant(
        self,
        setup: Setup,
        variant: Variant,
        progress: Callable[[str], None] = lambda _: None,
        *,
        run: int = 1,
    ) -> RunResult:
        tag = variant.name if setup.runs == 1 else f"{variant.name} {run}/{setup.runs}"

        def say(message: str) -> None:
            progress(f"[{tag}] {message}")

        gates = self._scheduler_for(setup, variant, say)
        spec = driver_spec(setup, variant)
        started = time.monotonic()
        driver = self.cluster.redeploy_driver(spec)
        deployed = time.monotonic() - started
        say(f"driver deployed in {deployed:.1f}s on {len(driver.nodes)} nodes")
        kube = Client(config=KubeConfig.from_file(self.cluster.kubeconfig))
        try:
            nodes = [n.name for n in driver.nodes]
            burst = Burst(
                pods=setup.pods,
                sizes=setup.sizes,
                seed=setup.seed,
                storage_class=spec.storage_class(),
                namespace=NAMESPACE,
                volumes=variant.volumes,
                kind=setup.workload,
                node_type=None,
            )
            result = RunResult(
                variant=variant.name,
                title=variant.title,
                nodes=len(nodes),
                pool_bytes=parse_quantity(setup.pool),
                pods=setup.pods,
                sizes=str(setup.sizes),
                seed=setup.seed,
                requested_bytes=burst.total_bytes(),
                storage_capacity=variant.storage_capacity,
                scheduler_gates=gates,
                bring_up_seconds=deployed,
                provisioning=setup.provisioning.value,
                workload=setup.workload.value,
                volumes=variant.volumes,
                publish_capacity=spec.publish_capacity,
                create_qps=setup.create_qps,
                run=run,
                cluster=self.kind,
                until_running=setup.until_running,
            )
            _clear(kube, spec, say)
            try:
                run_burst(kube, driver, burst, setup, result, progress, burst_nodes=nodes)
            finally:
                _clear(kube, spec, say)
            return result
        finally:
            kube.close()
            self.cluster.remove_driver(driver)

    def restore(self) -> None:
        """Put kube-scheduler back as the cluster came, if a run changed it."""
        if self._scheduler is not None:
            self.cluster.restart_scheduler({})
            self._scheduler = None

    def _scheduler_for(
        self, setup: Setup, variant: Variant, say: Callable[[str], None]
    ) -> dict[str, bool]:
        """Make kube-scheduler run with the variant's gates and configuration where
        the cluster allows it; the gates it runs with, as far as they are known."""
        wanted = setup.gates_of(variant)
        running = {g: self.cluster.scheduler_feature_gate(g) for g in wanted}
        differs = any(running[g] != on for g, on in wanted.items())
        if self._scheduler == (dict(variant.scheduler), wanted):
            return wanted
        if not differs and not variant.scheduler and self._scheduler is None:
            return wanted
        try:
            say(
                "restarting kube-scheduler with "
                + (", ".join(f"{g}={str(on).lower()}" for g, on in sorted(wanted.items())) or "")
                + (" and the variant's configuration" if variant.scheduler else "")
            )
            self.cluster.restart_scheduler(variant.scheduler, feature_gates=wanted)
            self._scheduler = (dict(variant.scheduler), wanted)
            return wanted
        except Unsupported as exc:
            if variant.scheduler:
                raise Unsupported(
                    f"variant {variant.name} needs its own kube-scheduler configuration: {exc}"
                ) from exc
            known = {g: on for g, on in running.items() if on is not None}
            say(
                f"kube-scheduler left as it is ({exc}); it runs "
                + (", ".join(f"{g}={str(on).lower()}" for g, on in sorted(known.items())) or "")
                + (
                    "; unknown: " + ", ".join(sorted(g for g, on in running.items() if on is None))
                    if len(known) < len(running)
                    else ""
                )
                + "; the variant asked for "
                + ", ".join(f"{g}={str(on).lower()}" for g, on in sorted(wanted.items()))
            )
            return known


def _clear(kube: Client, spec: DriverDeployment, say: Callable[[str], None]) -> None:
    """Delete the burst's namespaces and wait until they, and every volume of the
    driver's StorageClass, are gone (the driver deletes them: it must still run)."""
    started = time.monotonic()
    for name in (NAMESPACE, BUSY_NAMESPACE):
        try:
            kube.delete(Namespace, name)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
    wait_for(
        "the scale namespaces to be gone",
        partial(_namespaces_gone, kube),
        timeout=CLEAR_TIMEOUT,
        interval=1.0,
    )
    wait_for(
        f"the volumes of StorageClass {spec.storage_class()} to be deleted",
        partial(_volumes_gone, kube, spec.storage_class()),
        timeout=CLEAR_TIMEOUT,
        interval=1.0,
    )
    if (seconds := time.monotonic() - started) > 1:
        say(f"burst cleared away in {seconds:.1f}s")


def _namespaces_gone(kube: Client) -> tuple[bool, str]:
    left = [
        name
        for name in (NAMESPACE, BUSY_NAMESPACE)
        if any(True for _ in kube.list(Namespace, fields={"metadata.name": name}))
    ]
    return not left, f"still there: {', '.join(left)}"


def _volumes_gone(kube: Client, storage_class: str) -> tuple[bool, str]:
    left = [
        pv
        for pv in kube.list(PersistentVolume)
        if pv.spec is not None and pv.spec.storageClassName == storage_class
    ]
    return not left, f"{len(left)} PersistentVolumes left"
