"""One scale run: a fresh local cluster with simulated nodes, one burst of pods, and
what happened, measured from the outside.

A run brings up its own cluster (the variant's feature gates and scheduler
configuration are command-line flags and files of kube-scheduler, so each variant
starts from nothing), creates the burst, follows every claim and pod through watches
until all claims are bound and all pods placed, the deadline passes, or nothing has
changed for ``stall_seconds``, then reads the driver's journals (CreateVolume
answers; the controller's, or every node's with distributed provisioning) and pools
(utilisation), and tears the cluster down.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.resources.core_v1 import PersistentVolumeClaim as Claim

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.spec import (
    DriverDeployment,
    ProvisionerMode,
)
from csi_harness._internal.providers.base import Driver
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig
from csi_harness._internal.providers.local.control_plane import SIMULATED_CAPACITY
from csi_harness._internal.providers.local.host import service_account_exists
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.scale.driver_readings import read_driver
from csi_harness._internal.scale.pod_readings import read_unplaced_pods
from csi_harness._internal.scale.run_result import RunResult
from csi_harness._internal.scale.tie_break import TieBreakExtender
from csi_harness._internal.scale.timeline import ClaimTimeline, PodTimeline, Watcher
from csi_harness._internal.scale.workload import (
    BUSY_NAMESPACE,
    Burst,
    SizeRange,
    WorkloadKind,
    busy_pods,
    create_paced,
    creation_offsets,
)
from csi_mock.model.quantity import parse_quantity

NAMESPACE = "scale"
JOURNAL_SIZE = 1_000_000
"""Call records the controller keeps: every CreateVolume of a run must fit."""
KUBERNETES_DEFAULT_BACKOFF = {"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10}
"""kube-scheduler's own defaults; the suites' clusters use 1-2 s to answer sooner."""


@dataclass(frozen=True)
class Variant:
    """What differs between the runs of one comparison."""

    name: str
    """Short, DNS-label safe: it names the run's cluster."""
    title: str
    storage_capacity: bool = True
    """CSIDriver.spec.storageCapacity: whether kube-scheduler looks at capacity."""
    scheduler_gates: dict[str, bool] = field(default_factory=dict)
    scheduler: dict[str, Any] = field(default_factory=dict)
    """Merged into the KubeSchedulerConfiguration (e.g. a VolumeBinding shape)."""
    volumes: bool = True
    """False: the same pods without volumes, the baseline the others are measured
    against."""


@dataclass(frozen=True)
class Setup:
    """What every run of a comparison shares."""

    nodes: int
    pool: str
    pods: int
    sizes: SizeRange
    seed: int
    deadline: float = 240.0
    """Seconds from the first pod until a run is called stuck, whatever happens."""
    stall_seconds: float = 60.0
    """A run in which no claim was bound for this long is called stuck early."""
    capacity_poll_interval: str = "2s"
    provisioner_api_qps: float | None = 50.0
    """external-provisioner's API rate; None: its default (5 QPS), which caps the
    burst at about two provisioned volumes a second (sidecars.py)."""
    bring_up_timeout: float = 300.0
    cluster_prefix: str = "scale"
    """Run clusters are ``<prefix>-<variant>``; a cluster of that name that is already
    there is torn down first, so concurrent experiments need prefixes of their own."""
    provisioning: ProvisionerMode = ProvisionerMode.CENTRAL
    """Central: one external-provisioner beside the csi-mock controller. Distributed:
    one per node (``--node-deployment``) beside that node's csi-mock, which serves
    controller and node of its own pool, as csi-driver-host-path is deployed for the
    KEP author's measurements."""
    workload: WorkloadKind = WorkloadKind.PODS
    create_qps: float | None = None
    """Objects (pods or Deployments) created per second; None: as fast as the API
    server takes them."""
    runs: int = 1
    """Runs of every variant (each on a fresh cluster)."""
    scheduler_gates: dict[str, bool] = field(default_factory=dict)
    """kube-scheduler feature gates of every variant, beneath the variant's own."""
    busy_nodes: int = 0
    """Simulated nodes that carry another pod, asking for half their CPU and memory,
    before the burst (``workload.busy_pods``): nodes no longer alike, as real ones
    are not. The first ones by number."""
    random_tie_break: bool = False
    """Run a scheduler extender that scores every node 0, so that kube-scheduler breaks
    ties between nodes at random (``tie_break``)."""
    until_running: bool = False
    """Follow the burst until every pod is Running too, not only placed: on clusters
    whose kubelets start the pods (kind, an existing cluster); simulated nodes start
    nothing."""

    def gates_of(self, variant: Variant) -> dict[str, bool]:
        return {**self.scheduler_gates, **variant.scheduler_gates}


def publishes_capacity(setup: Setup, variant: Variant) -> bool:
    """external-provisioner --enable-capacity. Distributed without tracking turns it
    off, as the KEP author's run without tracking did; central keeps publishing
    (kube-scheduler ignores it), as the earlier runs here did, so they stay
    comparable."""
    return variant.storage_capacity or setup.provisioning is ProvisionerMode.CENTRAL


def cluster_config(
    setup: Setup, variant: Variant, extra_scheduler: dict[str, Any] | None = None
) -> LocalClusterConfig:
    """The cluster of one run: ``setup.nodes`` simulated nodes (plus the real
    kubelet's, which the burst avoids), no zones, kube-scheduler's default backoff,
    the variant's gates and configuration, the driver of ``driver_spec``."""
    return LocalClusterConfig(
        name=f"{setup.cluster_prefix}-{variant.name}",
        simulated_nodes=setup.nodes,
        zones=[],
        component_feature_gates={Component.SCHEDULER: setup.gates_of(variant)},
        scheduler={**KUBERNETES_DEFAULT_BACKOFF, **variant.scheduler, **(extra_scheduler or {})},
        timeout_seconds=setup.bring_up_timeout,
        driver=driver_spec(setup, variant),
    )


def driver_spec(setup: Setup, variant: Variant) -> DriverDeployment:
    """The driver of one run, on any cluster: a pool per node, no zones, one
    StorageClass, no per-node volume limit, central or distributed
    (``--strict-topology`` either way)."""
    return DriverDeployment(
        storage_capacity=variant.storage_capacity,
        publish_capacity=publishes_capacity(setup, variant),
        provisioner_mode=setup.provisioning,
        strict_topology=True,
        node_pool_size=setup.pool,
        max_volumes_per_node=0,
        storage_classes=["csi-mock"],
        capacity_poll_interval=setup.capacity_poll_interval,
        provisioner_api_qps=setup.provisioner_api_qps,
        overrides={"admin": {"journal_size": JOURNAL_SIZE}},
    )


def run_variant(
    setup: Setup,
    variant: Variant,
    progress: Callable[[str], None] = lambda _: None,
    *,
    run: int = 1,
) -> RunResult:
    """Bring a cluster up for ``variant``, run the burst, measure, tear down."""
    with contextlib.ExitStack() as stack:
        extender = stack.enter_context(TieBreakExtender()) if setup.random_tie_break else None
        config = cluster_config(setup, variant, extender.scheduler_config() if extender else None)
        result = _run_on_cluster(config, setup, variant, progress, run)
        result.tie_break_calls = extender.calls if extender else 0
        return result


def _run_on_cluster(
    config: LocalClusterConfig,
    setup: Setup,
    variant: Variant,
    progress: Callable[[str], None],
    run: int,
) -> RunResult:
    tag = variant.name if setup.runs == 1 else f"{variant.name} {run}/{setup.runs}"
    provider = LocalProvider(config, progress=lambda m: progress(f"[{tag}] {m}"))
    # Left, the provider removes the cluster and says so ("cluster removed: ...").
    with provider as cluster:
        assert cluster.kube is not None and cluster.driver is not None
        assert cluster.up_result is not None  # brought up by this object
        burst = burst_of(setup, variant, config.driver.storage_class())
        result = new_result(
            setup,
            variant,
            burst,
            run=run,
            bring_up_seconds=cluster.up_result.seconds,
            publish_capacity=config.driver.publish_capacity,
        )
        run_burst(
            cluster.kube,
            cluster.driver,
            burst,
            setup,
            result,
            progress,
            burst_nodes=simulated_nodes(cluster.driver),
        )
        return result


def simulated_nodes(driver: Driver) -> list[str]:
    """The local provider's simulated nodes the burst runs on, in number order (the
    real kubelet's node is left out)."""
    return sorted(
        (n.name for n in driver.nodes if not n.runs_pods), key=lambda n: int(n.split("-")[-1])
    )


def burst_of(setup: Setup, variant: Variant, storage_class: str, **extra: Any) -> Burst:
    """The burst of one run (``extra``: other ``Burst`` fields, such as its node type)."""
    return Burst(
        pods=setup.pods,
        sizes=setup.sizes,
        seed=setup.seed,
        storage_class=storage_class,
        namespace=NAMESPACE,
        volumes=variant.volumes,
        kind=setup.workload,
        **extra,
    )


def new_result(
    setup: Setup, variant: Variant, burst: Burst, *, run: int, **measured: Any
) -> RunResult:
    """The result of one run before its burst: what it is (``measured`` adds or
    replaces fields, such as the bring-up time or the cluster)."""
    fields: dict[str, Any] = {
        "variant": variant.name,
        "title": variant.title,
        "nodes": setup.nodes,
        "pool_bytes": parse_quantity(setup.pool),
        "pods": setup.pods,
        "sizes": str(setup.sizes),
        "seed": setup.seed,
        "requested_bytes": burst.total_bytes(),
        "storage_capacity": variant.storage_capacity,
        "scheduler_gates": setup.gates_of(variant),
        "provisioning": setup.provisioning.value,
        "workload": setup.workload.value,
        "volumes": variant.volumes,
        "create_qps": setup.create_qps,
        "run": run,
        "busy_nodes": setup.busy_nodes,
        "random_tie_break": setup.random_tie_break,
        "until_running": setup.until_running,
    }
    return RunResult(**{**fields, **measured})


def run_burst(
    kube: Client,
    driver: Driver,
    burst: Burst,
    setup: Setup,
    result: RunResult,
    progress: Callable[[str], None] = lambda _: None,
    *,
    burst_nodes: Sequence[str],
) -> None:
    """Create ``burst`` and follow it to its end; fill in ``result``. ``burst_nodes``:
    the nodes the burst may use, whose pools are read at the end (busy ones first)."""
    if setup.busy_nodes:
        _create_namespace(kube, BUSY_NAMESPACE)
        for pod in busy_pods(list(burst_nodes[: setup.busy_nodes]), SIMULATED_CAPACITY):
            kube.create(cast(Pod, from_dict(pod)))
    _create_namespace(kube, burst.namespace)
    manifests = burst.manifests()
    offsets = creation_offsets(len(manifests), setup.create_qps)
    wall_start = time.time()
    start = time.monotonic()
    claims = ClaimTimeline(start=start)
    pods = PodTimeline(start=start)
    watchers = [
        Watcher(kube, burst.namespace, claims, Claim).start(),
        Watcher(kube, burst.namespace, pods, Pod).start(),
    ]
    try:
        create_paced(
            lambda manifest: kube.create(cast(Any, from_dict(manifest))), manifests, offsets, start
        )
        result.create_seconds = time.monotonic() - start
        progress(
            f"[{result.variant}] {len(manifests)} {burst.kind.value} created in "
            f"{result.create_seconds:.1f}s"
        )
        _follow_until_done(watchers[0], watchers[1], burst, setup, result, progress)
    finally:
        for watcher in watchers:
            watcher.stop()
    result.bound_times = sorted(claims.bound_at.values())
    result.claims_left = (burst.pods if burst.volumes else 0) - len(claims.bound_at)
    result.placed_times = sorted(pods.placed_at.values())
    result.running_times = sorted(pods.running_at.values())
    if setup.until_running:
        result.pods_not_running = burst.pods - len(pods.running_at)
    result.pods_left = burst.pods - len(pods.placed_at)
    result.reschedules = claims.total_reschedules
    result.claims_rescheduled = len(claims.reschedules)
    result.most_reschedules = max(claims.reschedules.values(), default=0)
    result.watch_errors = sum(len(w.errors) for w in watchers)
    read_unplaced_pods(kube, burst.namespace, set(claims.bound_at), result)
    read_driver(driver, wall_start, result, burst_nodes)


def _create_namespace(kube: Client, name: str) -> None:
    kube.create(cast(Namespace, Namespace.from_dict({"metadata": {"name": name}})))
    wait_for(
        f"the default service account of namespace {name}",
        partial(service_account_exists, kube, name, "default"),
        timeout=30,
        interval=0.2,
    )


def _follow_until_done(
    claims: Watcher,
    pods: Watcher,
    burst: Burst,
    setup: Setup,
    result: RunResult,
    progress: Callable[[str], None],
) -> None:
    """Until every claim is bound and every pod placed, or stuck."""
    start = cast(PodTimeline, pods.timeline).start
    claims_wanted = burst.pods if burst.volumes else 0
    last_counts, last_change, last_report = (-1, -1, -1), start, start
    while True:
        now = time.monotonic()
        counts = (claims.count("bound_at"), pods.count("placed_at"), pods.count("running_at"))
        if counts != last_counts:
            last_counts, last_change = counts, now
        bound, placed, running = counts
        running_wanted = burst.pods if setup.until_running else 0
        if bound >= claims_wanted and placed >= burst.pods and running >= running_wanted:
            timeline = cast(PodTimeline, pods.timeline)
            result.all_placed_after = max(timeline.placed_at.values())
            if setup.until_running:
                result.all_running_after = max(timeline.running_at.values())
            bound_at = cast(ClaimTimeline, claims.timeline).bound_at
            result.all_bound_after = max(bound_at.values()) if bound_at else None
            pods_done = "all pods running" if setup.until_running else "all pods placed"
            result.stop_reason = f"all claims bound, {pods_done}" if claims_wanted else pods_done
            break
        if now - start >= setup.deadline:
            result.stop_reason = f"stuck: deadline of {setup.deadline:.0f}s passed"
            break
        if now - last_change >= setup.stall_seconds:
            what = "claim bound or pod placed" if claims_wanted else "pod placed"
            what += " or running" if setup.until_running else ""
            result.stop_reason = f"stuck: no {what} for {setup.stall_seconds:.0f}s"
            break
        if now - last_report >= 10:
            running_text = f", {running} running" if setup.until_running else ""
            progress(
                f"[{result.variant}] {bound}/{claims_wanted} claims bound, "
                f"{placed}/{burst.pods} pods placed{running_text} after {now - start:.0f}s"
            )
            last_report = now
        time.sleep(0.25)
    result.ended_after = time.monotonic() - start
    progress(f"[{result.variant}] {result.stop_reason} after {result.ended_after:.1f}s")
