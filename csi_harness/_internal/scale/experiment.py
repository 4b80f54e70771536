"""One scale run: a fresh local cluster with simulated nodes, one burst of pods, and
what happened, measured from the outside.

A run brings up its own cluster (the variant's feature gates and scheduler
configuration are command-line flags and files of kube-scheduler, so each variant
starts from nothing), creates the burst, follows every claim through a watch until
all are bound, the deadline passes, or nothing has bound for ``stall_seconds``, then
reads the controller's journal (CreateVolume answers) and pools (utilisation), and
tears the cluster down.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, cast

from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Namespace, Pod
from prometheus_client.parser import text_string_to_metric_families

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.local import LocalDriver
from csi_harness._internal.deploy.spec import DriverDeployment, node_pool_name
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig
from csi_harness._internal.providers.local.host import service_account_exists
from csi_harness._internal.scale.timeline import ClaimTimeline, ClaimWatcher
from csi_harness._internal.scale.workload import VOLUME, Burst, SizeRange
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


@dataclass
class RunResult:
    """Everything one run measured; plain data (``to_json``), so reports can be made
    again from a results file."""

    variant: str
    title: str
    nodes: int
    pool_bytes: int
    pods: int
    sizes: str
    seed: int
    requested_bytes: int
    storage_capacity: bool
    scheduler_gates: dict[str, bool]
    bring_up_seconds: float = 0.0
    create_seconds: float = 0.0
    """How long creating the burst's pods took."""
    bound_times: list[float] = field(default_factory=list)
    """Seconds from the first pod to each claim's binding, sorted."""
    all_bound_after: float | None = None
    claims_left: int = 0
    stop_reason: str = ""
    ended_after: float = 0.0
    create_volume_calls: int = 0
    create_volume_ok: int = 0
    resource_exhausted: int = 0
    other_errors: dict[str, int] = field(default_factory=dict)
    exhausted_times: list[float] = field(default_factory=list)
    """Seconds from the first pod to each RESOURCE_EXHAUSTED answer."""
    journal_complete: bool = True
    """False if the journal dropped records (then the counts are from the metrics)."""
    reschedules: int = 0
    claims_rescheduled: int = 0
    most_reschedules: int = 0
    watch_errors: int = 0
    unbound_reasons: dict[str, int] = field(default_factory=dict)
    """Why the pods of unbound claims were not scheduled at the end (kube-scheduler's
    PodScheduled message, without its preemption part), with how many pods say so."""
    pool_used: dict[str, int] = field(default_factory=dict)
    """Bytes used in each simulated node's pool at the end, by node name."""
    pool_total: dict[str, int] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.claims_left == 0

    def utilisation(self) -> dict[str, float]:
        return {n: self.pool_used[n] / self.pool_total[n] for n in sorted(self.pool_total)}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        return cls(**data)


def cluster_config(setup: Setup, variant: Variant) -> LocalClusterConfig:
    """The cluster of one run: ``setup.nodes`` simulated nodes (plus the real
    kubelet's, which the burst avoids), no zones, one StorageClass, a pool per node,
    no per-node volume limit, kube-scheduler's default backoff."""
    driver = DriverDeployment(
        storage_capacity=variant.storage_capacity,
        node_pool_size=setup.pool,
        max_volumes_per_node=0,
        storage_classes=["csi-mock"],
        capacity_poll_interval=setup.capacity_poll_interval,
        provisioner_api_qps=setup.provisioner_api_qps,
        overrides={"admin": {"journal_size": JOURNAL_SIZE}},
    )
    return LocalClusterConfig(
        name=f"{setup.cluster_prefix}-{variant.name}",
        simulated_nodes=setup.nodes,
        zones=[],
        component_feature_gates={Component.SCHEDULER: dict(variant.scheduler_gates)},
        scheduler={**KUBERNETES_DEFAULT_BACKOFF, **variant.scheduler},
        timeout_seconds=setup.bring_up_timeout,
        driver=driver,
    )


def run_variant(
    setup: Setup, variant: Variant, progress: Callable[[str], None] = lambda _: None
) -> RunResult:
    """Bring a cluster up for ``variant``, run the burst, measure, tear down."""
    config = cluster_config(setup, variant)
    cluster = LocalCluster(config, progress=lambda m: progress(f"[{variant.name}] {m}"))
    try:
        up = cluster.up()
        assert cluster.kube is not None and cluster.driver is not None
        burst = Burst(
            pods=setup.pods,
            sizes=setup.sizes,
            seed=setup.seed,
            storage_class=config.driver.storage_class(),
            namespace=NAMESPACE,
        )
        result = RunResult(
            variant=variant.name,
            title=variant.title,
            nodes=setup.nodes,
            pool_bytes=parse_quantity(setup.pool),
            pods=setup.pods,
            sizes=str(setup.sizes),
            seed=setup.seed,
            requested_bytes=burst.total_bytes(),
            storage_capacity=variant.storage_capacity,
            scheduler_gates=dict(variant.scheduler_gates),
            bring_up_seconds=up.seconds,
        )
        run_burst(cluster.kube, cluster.driver, burst, setup, result, progress)
        return result
    finally:
        report = cluster.down()
        progress(f"[{variant.name}] cluster removed in {report.seconds:.1f}s")


def run_burst(
    kube: Client,
    driver: LocalDriver,
    burst: Burst,
    setup: Setup,
    result: RunResult,
    progress: Callable[[str], None] = lambda _: None,
) -> None:
    """Create ``burst`` and follow it to its end; fill in ``result``."""
    kube.create(cast(Namespace, Namespace.from_dict({"metadata": {"name": burst.namespace}})))
    wait_for(
        f"the default service account of namespace {burst.namespace}",
        partial(service_account_exists, kube, burst.namespace, "default"),
        timeout=30,
        interval=0.2,
    )
    manifests = burst.manifests()
    wall_start = time.time()
    timeline = ClaimTimeline(start=time.monotonic())
    watcher = ClaimWatcher(kube, burst.namespace, timeline).start()
    try:
        for manifest in manifests:
            kube.create(cast(Pod, from_dict(manifest)))
        result.create_seconds = time.monotonic() - timeline.start
        progress(
            f"[{result.variant}] {len(manifests)} pods created in {result.create_seconds:.1f}s"
        )
        _follow_until_done(watcher, burst.pods, setup, result, progress)
    finally:
        watcher.stop()
    result.bound_times = sorted(timeline.bound_at.values())
    result.claims_left = burst.pods - len(timeline.bound_at)
    result.reschedules = timeline.total_reschedules
    result.claims_rescheduled = len(timeline.reschedules)
    result.most_reschedules = max(timeline.reschedules.values(), default=0)
    result.watch_errors = len(watcher.errors)
    unbound = {Burst.claim_name(i) for i in range(burst.pods)} - timeline.bound_at.keys()
    result.unbound_reasons = _unbound_reasons(kube, burst.namespace, unbound)
    _read_driver(driver, wall_start, result)


def _unbound_reasons(kube: Client, namespace: str, unbound_claims: set[str]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for pod in kube.list(Pod, namespace=namespace):
        name = (pod.metadata.name if pod.metadata else None) or ""
        if f"{name}-{VOLUME}" not in unbound_claims:
            continue
        conditions = (pod.status.conditions if pod.status else None) or []
        scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
        if scheduled is None:
            reason = "no PodScheduled condition yet"
        elif scheduled.status == "True":
            reason = "scheduled"
        else:
            message = (scheduled.message or scheduled.reason or "").split(" preemption:")[0]
            reason = re.sub(r'PVC "[^"]*"', 'PVC "<its claim>"', message)
        reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


def _follow_until_done(
    watcher: ClaimWatcher,
    pods: int,
    setup: Setup,
    result: RunResult,
    progress: Callable[[str], None],
) -> None:
    start = watcher.timeline.start
    last_count, last_change, last_report = -1, start, start
    while True:
        now = time.monotonic()
        bound = watcher.bound()
        if bound != last_count:
            last_count, last_change = bound, now
        if bound >= pods:
            result.all_bound_after = max(watcher.timeline.bound_at.values())
            result.stop_reason = "all claims bound"
            break
        if now - start >= setup.deadline:
            result.stop_reason = f"stuck: deadline of {setup.deadline:.0f}s passed"
            break
        if now - last_change >= setup.stall_seconds:
            result.stop_reason = f"stuck: no claim bound for {setup.stall_seconds:.0f}s"
            break
        if now - last_report >= 10:
            progress(f"[{result.variant}] {bound}/{pods} claims bound after {now - start:.0f}s")
            last_report = now
        time.sleep(0.25)
    result.ended_after = time.monotonic() - start
    progress(f"[{result.variant}] {result.stop_reason} after {result.ended_after:.1f}s")


def _read_driver(driver: LocalDriver, wall_start: float, result: RunResult) -> None:
    """CreateVolume answers from the controller's journal, pool usage per node."""
    with driver.admin() as admin:
        records = admin.journal(method="CreateVolume")
        counted = _counted_calls(admin.metrics_text(), "CreateVolume")
        pools = {pool.name: pool for pool in admin.pools()}
    result.journal_complete = len(records) >= sum(counted.values())
    codes: dict[str, int] = {}
    for record in records:
        codes[record.code] = codes.get(record.code, 0) + 1
        if record.code == "RESOURCE_EXHAUSTED":
            result.exhausted_times.append(record.time - wall_start)
    if not result.journal_complete:
        codes = counted
    result.create_volume_calls = sum(codes.values())
    result.create_volume_ok = codes.pop("OK", 0)
    result.resource_exhausted = codes.pop("RESOURCE_EXHAUSTED", 0)
    result.other_errors = codes
    result.exhausted_times.sort()
    for node in driver.nodes:
        pool = pools.get(node_pool_name(node.name))
        if pool is not None and not node.runs_pods:
            result.pool_used[node.name] = pool.used
            result.pool_total[node.name] = pool.total


def _counted_calls(metrics: str, method: str) -> dict[str, int]:
    """csi_mock_rpc_total of ``method`` by code, from the Prometheus text."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "csi_mock_rpc_total" and sample.labels.get("method") == method:
                code = sample.labels.get("code", "")
                counts[code] = counts.get(code, 0) + int(sample.value)
    return counts
