"""What a test's driver costs on the local provider: wall time and CPU seconds of one
deployment (``LocalDriver.deploy``: every csi-mock instance and sidecar started, the
driver registered on every node, its capacity published), with each csi-mock
instance a new interpreter or forked from the cluster's zygote, and its removal; and
against that, what handing a used driver to the next test costs instead (``reset``:
the driver pool's reset after a test that left a fault rule and 1Gi consumed from
outside CSI behind, so that its capacity must be published again).

    python benchmarks/bench_driver_deploy.py --runs 5 [--simulated-nodes 2] [--out DIR]

It brings up a local cluster of its own (root, tools built), deploys ``--runs``
drivers one after another in each mode, removes each, and tears the cluster down.
CPU is what the driver's own processes used from their start until ready (utime +
stime from /proc), plus what this process used meanwhile (its API calls and waits);
a forked instance's count starts at the fork. Results: a table on stdout and
``results.json`` in ``--out``. It needs the machine to itself.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from csi_harness._internal.core.procfs import read_stat
from csi_harness._internal.deploy.local import LocalDriver
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool

MODES = ("interpreter", "zygote")
RESET = "reset"


@dataclass(frozen=True)
class Deployment:
    mode: str
    wall_seconds: float
    driver_cpu_seconds: float
    harness_cpu_seconds: float
    processes: int
    remove_seconds: float = 0.0
    """The removal's wall time (a reset removes nothing: 0)."""

    @property
    def cpu_seconds(self) -> float:
        return self.driver_cpu_seconds + self.harness_cpu_seconds


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def deploy_once(cluster: LocalCluster, mode: str, index: int) -> Deployment:
    tag = f"b{index}{mode[0]}"
    spec = cluster.default_driver.model_copy(
        update={"name": f"{tag}.csi-mock", "suffix": f"-{tag}"}
    )
    zygote = cluster._zygote
    if mode == "interpreter":
        cluster._zygote = None
    try:
        driver = cluster._new_driver(spec)
    finally:
        cluster._zygote = zygote
    own = _own_cpu()
    started = time.monotonic()
    driver.deploy()
    wall = time.monotonic() - started
    harness = _own_cpu() - own
    records = driver.supervisor.state.processes
    stats = [read_stat(records[name].pid) for name in driver.processes() if name in records]
    cpu = sum(stat.cpu_seconds for stat in stats if stat is not None)
    started = time.monotonic()
    driver.remove()
    return Deployment(mode, wall, cpu, harness, len(stats), time.monotonic() - started)


def _driver_cpu(driver: LocalDriver) -> tuple[float, int]:
    records = driver.supervisor.state.processes
    stats = [read_stat(records[name].pid) for name in driver.processes() if name in records]
    return sum(stat.cpu_seconds for stat in stats if stat is not None), len(stats)


def reset_once(pool: DriverPool, fields: dict[str, object]) -> Deployment:
    """Take the pooled driver, leave a fault and drift behind, and time its reset."""
    driver, reused = pool.acquire(fields)
    assert reused and isinstance(driver, LocalDriver), "the pool had no driver to reuse"
    with driver.admin() as admin:
        admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED")
        admin.consume(admin.pools()[0].name, "1Gi")
    before, processes = _driver_cpu(driver)
    own = _own_cpu()
    started = time.monotonic()
    pool.release(driver, test_failed=False)
    wall = time.monotonic() - started
    after, _ = _driver_cpu(driver)
    assert pool.stats.resets and not pool.stats.not_reused, pool.stats
    return Deployment(RESET, wall, after - before, _own_cpu() - own, processes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="deployments per mode (5)")
    parser.add_argument("--simulated-nodes", type=int, default=2, help="simulated nodes (2)")
    parser.add_argument("--name", default="csi-bench-deploy", help="the cluster's name")
    parser.add_argument("--out", type=Path, default=Path("reports/bench-driver-deploy"))
    args = parser.parse_args()
    config = LocalClusterConfig(name=args.name, simulated_nodes=args.simulated_nodes)
    results: list[Deployment] = []
    with LocalProvider(config, progress=lambda m: print(m, file=sys.stderr)) as cluster:
        assert isinstance(cluster, LocalCluster)
        # One unmeasured deployment of each mode first: page cache, the first fork.
        for mode in MODES:
            deploy_once(cluster, mode, 99)
        assert cluster.kube is not None
        pool = DriverPool.for_cluster(cluster, cluster.kube, domain="csi-mock")
        fields = cluster.default_driver.model_dump()
        driver, _ = pool.acquire(fields)  # deployed, then reset once unmeasured
        pool.release(driver, test_failed=False)
        for index in range(args.runs):
            for mode in MODES:  # interleaved, so that drift hits all alike
                results.append(deploy_once(cluster, mode, index))
            results.append(reset_once(pool, fields))
        pool.close()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps([asdict(r) | {"cpu_seconds": r.cpu_seconds} for r in results], indent=2)
    )
    print(f"{args.runs} deployments per mode, {args.simulated_nodes} simulated nodes + 1 kubelet")
    print(
        f"{'mode':<12} {'wall median (range)':<24} {'CPU median (range)':<24} {'of it harness':>14}"
        f" {'removal':>8}"
    )
    for mode in (*MODES, RESET):
        runs = [r for r in results if r.mode == mode]
        wall = [r.wall_seconds for r in runs]
        cpu = [r.cpu_seconds for r in runs]
        harness = statistics.median(r.harness_cpu_seconds for r in runs)
        print(
            f"{mode:<12} {statistics.median(wall):5.2f}s ({min(wall):.2f}-{max(wall):.2f})"
            f"{'':<7} {statistics.median(cpu):5.2f}s ({min(cpu):.2f}-{max(cpu):.2f})"
            f"{'':<7} {harness:8.2f}s"
            f" {statistics.median(r.remove_seconds for r in runs):7.2f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
