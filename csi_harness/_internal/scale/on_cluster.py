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
from lightkube.resources.core_v1 import Namespace, PersistentVolume

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.feature_gates import format_feature_gates
from csi_harness._internal.kube.objects import exists, gone
from csi_harness._internal.providers.base import Cluster, FeatureGates, scheduler_restarts
from csi_harness._internal.scale.experiment import (
    NAMESPACE,
    Setup,
    Variant,
    burst_of,
    driver_spec,
    new_result,
    run_burst,
)
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.workload import BUSY_NAMESPACE

CLEAR_TIMEOUT = 900.0
"""Seconds to wait for a burst's namespaces and its volumes to be gone."""
BURST_NAMESPACES = (NAMESPACE, BUSY_NAMESPACE)


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
            burst = burst_of(setup, variant, spec.storage_class(), node_type=None)
            result = new_result(
                setup,
                variant,
                burst,
                run=run,
                nodes=len(nodes),
                scheduler_gates=gates,
                bring_up_seconds=deployed,
                publish_capacity=spec.publish_capacity,
                cluster=self.kind,
            )
            _clear(kube, say)
            try:
                run_burst(kube, driver, burst, setup, result, progress, burst_nodes=nodes)
            finally:
                _clear(kube, say)
            return result
        finally:
            kube.close()
            self.cluster.remove_driver(driver)

    def restore(self) -> None:
        """Put kube-scheduler back as the cluster came, if a run changed it."""
        if self._scheduler is not None:
            scheduler_restarts(self.cluster).restart_scheduler({})
            self._scheduler = None

    def _scheduler_for(
        self, setup: Setup, variant: Variant, say: Callable[[str], None]
    ) -> dict[str, bool]:
        """Make kube-scheduler run with the variant's gates and configuration where
        the cluster allows it; the gates it runs with, as far as they are known."""
        wanted = setup.gates_of(variant)
        gates = self.cluster if isinstance(self.cluster, FeatureGates) else None
        running = {g: gates.scheduler_feature_gate(g) if gates else None for g in wanted}
        differs = any(running[g] != on for g, on in wanted.items())
        if self._scheduler == (dict(variant.scheduler), wanted):
            return wanted
        if not differs and not variant.scheduler and self._scheduler is None:
            return wanted
        try:
            configured = " and the variant's configuration" if variant.scheduler else ""
            say(f"restarting kube-scheduler with {format_feature_gates(wanted)}{configured}")
            scheduler_restarts(self.cluster).restart_scheduler(
                variant.scheduler, feature_gates=wanted
            )
            self._scheduler = (dict(variant.scheduler), wanted)
            return wanted
        except Unsupported as exc:
            if variant.scheduler:
                raise Unsupported(
                    f"variant {variant.name} needs its own kube-scheduler configuration: {exc}"
                ) from exc
            known = {g: on for g, on in running.items() if on is not None}
            unknown = sorted(g for g, on in running.items() if on is None)
            runs = format_feature_gates(known) or "-"
            say(
                f"kube-scheduler left as it is ({exc}); it runs {runs}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + f"; the variant asked for {format_feature_gates(wanted)}"
            )
            return known


def _clear(kube: Client, say: Callable[[str], None]) -> None:
    """Delete the burst's namespaces and wait until they, and the volumes of their
    claims, are gone (the driver deletes those: it must still run)."""
    started = time.monotonic()
    for name in BURST_NAMESPACES:
        if exists(kube, Namespace, name):
            kube.delete(Namespace, name)
    for name in BURST_NAMESPACES:
        wait_for(
            f"namespace {name} to be gone",
            partial(gone, kube, Namespace, name),
            timeout=CLEAR_TIMEOUT,
            interval=1.0,
        )
    wait_for(
        "the burst's volumes to be deleted",
        partial(_volumes_gone, kube),
        timeout=CLEAR_TIMEOUT,
        interval=1.0,
    )
    if (seconds := time.monotonic() - started) > 1:
        say(f"burst cleared away in {seconds:.1f}s")


def _volumes_gone(kube: Client) -> tuple[bool, str]:
    left = [
        pv
        for pv in kube.list(PersistentVolume)
        if pv.spec is not None
        and pv.spec.claimRef is not None
        and pv.spec.claimRef.namespace in BURST_NAMESPACES
    ]
    return not left, f"{len(left)} PersistentVolumes left"
