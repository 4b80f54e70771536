"""What one scale run measured: plain data, written to and read back from a results
file, so that reports can be made again without running anything."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from csi_harness._internal.deploy.spec import ProvisionerMode
from csi_harness._internal.scale.workload import WorkloadKind


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
    """How long creating the burst's pods (or Deployments) took."""
    provisioning: str = ProvisionerMode.CENTRAL.value
    workload: str = WorkloadKind.PODS.value
    volumes: bool = True
    publish_capacity: bool = True
    """external-provisioner --enable-capacity."""
    create_qps: float | None = None
    run: int = 1
    """Which run of its variant this was (1..Setup.runs)."""
    busy_nodes: int = 0
    random_tie_break: bool = False
    tie_break_calls: int = 0
    """Prioritize calls the tie-break extender answered (0 without it)."""
    cluster: str = "local"
    """Where the run ran: "local" (simulated nodes), "kind" or "existing"."""
    until_running: bool = False
    running_times: list[float] = field(default_factory=list)
    """With ``until_running``: seconds from the first object created to each pod's
    first Running, sorted."""
    all_running_after: float | None = None
    pods_not_running: int = 0
    """With ``until_running``: pods not Running when the run ended."""
    placed_times: list[float] = field(default_factory=list)
    """Seconds from the first object created to each pod's placement on a node, sorted."""
    all_placed_after: float | None = None
    """Seconds from the first object created until every pod was placed (the KEP
    author's "pods running", see PodTimeline); None if not all were."""
    pods_left: int = 0
    """Pods not placed on a node when the run ended."""
    bound_times: list[float] = field(default_factory=list)
    """Seconds from the first pod to each claim's binding, sorted."""
    all_bound_after: float | None = None
    claims_left: int = 0
    stop_reason: str = ""
    ended_after: float = 0.0
    create_volume_calls: int = 0
    create_volume_ok: int = 0
    """Volumes CreateVolume made (from the journals: names answered OK, a name answered
    OK twice counted once; from the counters when a journal was not complete)."""
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
    unplaced_nominated: dict[str, int] = field(default_factory=dict)
    """For the pods not placed at the end: how many name each node as their
    ``status.nominatedNodeName`` ("" for none). kube-scheduler tries a pod's nominated
    node before all others."""
    exhausted_by_instance: dict[str, int] = field(default_factory=dict)
    """RESOURCE_EXHAUSTED answers by the csi-mock instance that gave them: the
    controller, or with distributed provisioning each node."""
    pool_used: dict[str, int] = field(default_factory=dict)
    """Bytes used in each simulated node's pool at the end, by node name."""
    pool_total: dict[str, int] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.claims_left == 0 and self.pods_left == 0 and self.pods_not_running == 0

    @property
    def placed_after_creation(self) -> float | None:
        """Seconds from the last object created until every pod was placed (what
        clusterloader2 reports as "Waiting for deployments to be running")."""
        if self.all_placed_after is None:
            return None
        return max(self.all_placed_after - self.create_seconds, 0.0)

    def utilisation(self) -> dict[str, float]:
        return {n: self.pool_used[n] / self.pool_total[n] for n in sorted(self.pool_total)}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        return cls(**data)
