"""What a test's driver costs on kind: the wall time of one deployment on a quiet
cluster (``deploy_driver``: every pod ready, the driver registered on every node, its
capacity published), its removal, and what drivers left idle cost the machine.

    python benchmarks/bench_kind_driver.py --node-image TAG [--runs 5] [--idle 0,3,6]

It brings up a kind cluster of its own from ``kind-config/suites.yaml`` (the suites'
four nodes, the built images), deploys the cluster's first driver (the first
containers of its images on each node), then ``--runs`` drivers one after another, each
removed and its namespace gone before the next. Then, for each count of ``--idle``, that
many default drivers deployed and left alone: the host's CPU use over ``--window``
seconds from /proc/stat, after 10 s to settle. Results: a table on stdout and
``results.json`` in ``--out``. It needs the machine to itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace, Pod

from csi_harness._internal.core.procfs import read_host_cpu
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.providers.base import Cluster, Driver
from csi_harness._internal.providers.factory import ClusterOptions, open_provider


@dataclass(frozen=True)
class Deployment:
    wall_seconds: float
    remove_seconds: float
    """Until the driver's namespace is gone (its pods ended)."""
    pods: int


@dataclass(frozen=True)
class Idle:
    drivers: int
    busy_share: float
    """Of the host's CPUs over the window (0-1)."""


def new_driver(cluster: Cluster, tag: str) -> Driver:
    spec = cluster.default_driver.model_copy(
        update={"name": f"{tag}.csi-mock", "suffix": f"-{tag}"}
    )
    return cluster.deploy_driver(spec)


def remove(cluster: Cluster, kube: Client, driver: Driver) -> None:
    namespace = driver.spec.namespace
    cluster.remove_driver(driver)

    def gone() -> tuple[bool, str]:
        try:
            kube.get(Namespace, namespace)
        except ApiError as error:
            return error.status.code == 404, "gone"
        return False, "terminating"

    wait_for(f"namespace {namespace} to go", gone, timeout=120, interval=0.5)


def deploy_once(cluster: Cluster, kube: Client, index: int) -> Deployment:
    started = time.monotonic()
    driver = new_driver(cluster, f"k{index}")
    wall = time.monotonic() - started
    pods = len(list(kube.list(Pod, namespace=driver.spec.namespace)))
    started = time.monotonic()
    remove(cluster, kube, driver)
    return Deployment(wall, time.monotonic() - started, pods)


def idle_share(window: float) -> float:
    time.sleep(10)  # the last deployment's start settles
    busy, total = read_host_cpu()
    time.sleep(window)
    busy_after, total_after = read_host_cpu()
    return (busy_after - busy) / (total_after - total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-image", required=True, help="csi-harness kind image")
    parser.add_argument("--runs", type=int, default=5, help="deployments measured (5)")
    parser.add_argument("--idle", default="0,3,6", help="idle driver counts (0,3,6)")
    parser.add_argument("--window", type=float, default=45.0, help="CPU window, s (45)")
    parser.add_argument("--name", default="csi-bench-kind", help="the cluster's name")
    parser.add_argument("--out", type=Path, default=Path("reports/bench-kind-driver"))
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: at least 1")
    counts = sorted(int(c) for c in args.idle.split(","))

    options = ClusterOptions(
        provider="kind", name=args.name, node_image=args.node_image, images="built"
    )
    deployments: list[Deployment] = []
    idle: list[Idle] = []
    with open_provider(options, progress=lambda m: print(m, file=sys.stderr)) as cluster:
        kube = Client(KubeConfig.from_file(cluster.kubeconfig))
        # The first driver of a cluster: its images are made into containers on each
        # node for the first time (unpacked there, unless bring-up did it ahead).
        first = deploy_once(cluster, kube, 99)
        deployments = [deploy_once(cluster, kube, index) for index in range(args.runs)]
        running: list[Driver] = []
        for count in counts:
            while len(running) < count:
                running.append(new_driver(cluster, f"i{len(running)}"))
            idle.append(Idle(count, idle_share(args.window)))
        for driver in running:
            cluster.remove_driver(driver)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "first": asdict(first),
                "deployments": [asdict(d) for d in deployments],
                "idle": [asdict(i) for i in idle],
            },
            indent=2,
        )
    )
    wall = [d.wall_seconds for d in deployments]
    removal = [d.remove_seconds for d in deployments]
    print(f"{args.runs} deployments on a quiet cluster, {deployments[0].pods} pods each")
    print(f"  the cluster's first driver: {first.wall_seconds:.2f}s")
    print(f"  deploy: median {statistics.median(wall):.2f}s ({min(wall):.2f}-{max(wall):.2f})")
    print(
        f"  removal until its namespace is gone: median {statistics.median(removal):.2f}s"
        f" ({min(removal):.2f}-{max(removal):.2f})"
    )
    for share in idle:
        print(f"  {share.drivers} idle drivers: host CPU {share.busy_share:.1%} busy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
