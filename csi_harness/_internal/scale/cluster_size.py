"""How many simulated nodes the local provider carries on this machine: for each
node count, a fresh cluster's bring-up time by phase, the memory its processes hold
(proportional set size, so shared pages are not counted twice), the CPU its
bring-up took, and the CPU it burns when idle (heartbeats, leases, capacity polls).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from csi_harness._internal.core.procfs import read_stat
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.provider import LocalProvider

IDLE_SECONDS = 20.0
"""How long the idle CPU load is measured after bring-up."""
GROUPS = (
    ("csi-mock node instances", "csi-mock-node-"),
    ("csi-mock node instances", "csi-mock-simulated-nodes"),
    ("csi-mock controller", "csi-mock-controller"),
    ("node simulator", "node-simulator"),
    ("kube-apiserver", "kube-apiserver"),
    ("etcd", "etcd"),
    ("sidecars", "csi-"),
)
"""How processes are grouped in the memory breakdown (first prefix that matches)."""


@dataclass
class SizeResult:
    simulated_nodes: int
    ready: bool
    error: str = ""
    bring_up_seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    processes: int = 0
    pss_mib: float = 0.0
    pss_by_group: dict[str, float] = field(default_factory=dict)
    bring_up_cpu_seconds: float = 0.0
    idle_cpu_cores: float = 0.0
    """CPU seconds per second the cluster's processes use once up, nothing running."""
    teardown_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def size_config(nodes: int) -> LocalClusterConfig:
    return LocalClusterConfig(
        name="scale-nodes",
        simulated_nodes=nodes,
        zones=[],
        timeout_seconds=600,
        driver=DriverDeployment(storage_classes=["csi-mock"], max_volumes_per_node=0),
    )


def measure(nodes: int, progress: Callable[[str], None] = lambda _: None) -> SizeResult:
    provider = LocalProvider(size_config(nodes), progress=lambda m: progress(f"[{nodes}] {m}"))
    result = SizeResult(simulated_nodes=nodes, ready=False)
    try:
        # Left (or failing to come up), the provider removes the cluster: its
        # ``last_teardown`` says how long that took.
        with provider as cluster:
            assert cluster.up_result is not None  # brought up by this object
            result.ready = True
            result.bring_up_seconds = cluster.up_result.seconds
            result.phases = {p.name: round(p.seconds, 2) for p in cluster.up_result.phases}
            state = RunState.load(cluster.layout.root)
            if state is None:
                raise RuntimeError(f"no run state in {cluster.layout.root}")
            pids = {name: record.pid for name, record in state.processes.items()}
            result.bring_up_cpu_seconds = sum(_cpu_seconds(pid) for pid in pids.values())
            before = {pid: _cpu_seconds(pid) for pid in pids.values()}
            time.sleep(IDLE_SECONDS)
            after = {pid: _cpu_seconds(pid) for pid in pids.values()}
            result.idle_cpu_cores = sum(after[p] - before[p] for p in pids.values()) / IDLE_SECONDS
            pss = {name: _pss_mib(pid) for name, pid in pids.items()}
            result.processes = len(pids)
            result.pss_mib = round(sum(pss.values()), 1)
            result.pss_by_group = _grouped(pss.items())
    except Exception as exc:  # a size the machine cannot carry is a result, not a crash
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    if provider.last_teardown is not None:
        result.teardown_seconds = round(provider.last_teardown.seconds, 1)
    return result


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its waited-for children, in seconds."""
    stat = read_stat(pid)
    return 0.0 if stat is None else stat.cpu_seconds


def _pss_mib(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _grouped(pss: Iterable[tuple[str, float]]) -> dict[str, float]:
    groups: dict[str, float] = {}
    for name, mib in pss:
        group = next((g for g, prefix in GROUPS if name.startswith(prefix)), "other")
        groups[group] = round(groups.get(group, 0.0) + mib, 1)
    return groups


def markdown_table(results: Iterable[SizeResult]) -> str:
    lines = [
        "| simulated nodes | ready in | bring-up CPU | memory (PSS) | of it: csi-mock node "
        "instances | idle CPU | teardown |",
        "|" + "---|" * 7,
    ]
    for r in results:
        if not r.ready:
            lines.append(f"| {r.simulated_nodes} | failed: {r.error} | | | | | |")
            continue
        nodes_mib = r.pss_by_group.get("csi-mock node instances", 0.0)
        lines.append(
            f"| {r.simulated_nodes} | {r.bring_up_seconds:.1f} s | {r.bring_up_cpu_seconds:.0f} s "
            f"| {r.pss_mib / 1024:.2f} GiB ({r.processes} processes) | {nodes_mib / 1024:.2f} GiB "
            f"| {r.idle_cpu_cores:.2f} cores | {r.teardown_seconds:.1f} s |"
        )
    return "\n".join(lines)
