"""RPC benchmark of csi-mock over its unix socket.

Measures CreateVolume+DeleteVolume, GetCapacity and NodePublishVolume+NodeUnpublishVolume
with 1, 8 and 32 concurrent clients, with 100 and with 10,000 existing volumes, and prints
ops/s with p50/p99 latency as a Markdown table (recorded in docs/benchmarks.md).

    python benchmarks/bench_rpc.py [--seconds 3] [--populations 100 10000] [--json out.json]

The driver runs as a separate process (`csi-mock serve`), so client and server compete for
the same cores, as they do on a CI runner. Run as root to measure real bind mounts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import yaml

from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

MI = 2**20
CAPABILITY = pb.VolumeCapability(
    mount=pb.VolumeCapability.MountVolume(),
    access_mode=pb.VolumeCapability.AccessMode(
        mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_MULTI_WRITER
    ),
)


@dataclass
class Result:
    scenario: str
    existing_volumes: int
    clients: int
    operations: int
    ops_per_second: float
    p50_ms: float
    p99_ms: float


def start_driver(root: Path) -> subprocess.Popen[bytes]:
    config = root / "driver.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "endpoint": f"unix://{root}/csi.sock",
                "state_dir": str(root / "state"),
                "node": {"id": "node-1"},
                "pools": [{"name": "p", "size": "1Pi"}],
                "log_level": "warning",
            }
        )
    )
    return subprocess.Popen(
        [sys.executable, "-m", "csi_mock.cli", "serve", "--config", str(config)],
        stderr=subprocess.DEVNULL,
    )


async def wait_ready(channel: grpc.aio.Channel) -> None:
    identity = pb_grpc.IdentityStub(channel)
    for _ in range(400):
        try:
            if (await identity.Probe(pb.ProbeRequest(), timeout=1)).ready.value:
                return
        except grpc.aio.AioRpcError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError("driver did not become ready")


async def populate(controller: pb_grpc.ControllerStub, target: int, have: int) -> int:
    names = (f"existing-{i}" for i in range(have, target))
    sem = asyncio.Semaphore(16)

    async def create(name: str) -> None:
        async with sem:
            await controller.CreateVolume(
                pb.CreateVolumeRequest(
                    name=name,
                    capacity_range=pb.CapacityRange(required_bytes=MI),
                    volume_capabilities=[CAPABILITY],
                )
            )

    await asyncio.gather(*(create(n) for n in names))
    return target


async def measure(
    name: str, operation: Callable[[int], Awaitable[None]], clients: int, seconds: float
) -> tuple[int, list[float], float]:
    latencies: list[float] = []
    counter = itertools.count()
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await operation(next(counter))
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(latencies), latencies, time.perf_counter() - began


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(seconds: float, populations: list[int], root: Path) -> list[Result]:
    process = start_driver(root)
    results: list[Result] = []
    try:
        channel = grpc.aio.insecure_channel(f"unix://{root}/csi.sock")
        await wait_ready(channel)
        controller = pb_grpc.ControllerStub(channel)
        node = pb_grpc.NodeStub(channel)
        staged = await controller.CreateVolume(
            pb.CreateVolumeRequest(
                name="bench-staged",
                capacity_range=pb.CapacityRange(required_bytes=MI),
                volume_capabilities=[CAPABILITY],
            )
        )
        volume_id = staged.volume.volume_id
        staging = root / "staging"
        await node.NodeStageVolume(
            pb.NodeStageVolumeRequest(
                volume_id=volume_id,
                staging_target_path=str(staging),
                volume_capability=CAPABILITY,
            )
        )
        targets = root / "targets"
        targets.mkdir()
        prefix = f"bench-{os.getpid()}"

        async def create_delete(i: int) -> None:
            created = await controller.CreateVolume(
                pb.CreateVolumeRequest(
                    name=f"{prefix}-{i}",
                    capacity_range=pb.CapacityRange(required_bytes=MI),
                    volume_capabilities=[CAPABILITY],
                )
            )
            await controller.DeleteVolume(
                pb.DeleteVolumeRequest(volume_id=created.volume.volume_id)
            )

        async def get_capacity(i: int) -> None:
            await controller.GetCapacity(pb.GetCapacityRequest())

        async def publish_unpublish(i: int) -> None:
            target = str(targets / f"t{i}")
            await node.NodePublishVolume(
                pb.NodePublishVolumeRequest(
                    volume_id=volume_id,
                    staging_target_path=str(staging),
                    target_path=target,
                    volume_capability=CAPABILITY,
                )
            )
            await node.NodeUnpublishVolume(
                pb.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target)
            )

        scenarios = [
            ("CreateVolume+DeleteVolume", create_delete),
            ("GetCapacity", get_capacity),
            ("NodePublish+NodeUnpublish", publish_unpublish),
        ]
        have = 0
        for population in populations:
            started = time.perf_counter()
            have = await populate(controller, population, have)
            print(
                f"# populated {population} volumes in {time.perf_counter() - started:.1f}s",
                file=sys.stderr,
            )
            for (scenario, operation), clients in itertools.product(scenarios, (1, 8, 32)):
                count, latencies, elapsed = await measure(scenario, operation, clients, seconds)
                result = Result(
                    scenario=scenario,
                    existing_volumes=population,
                    clients=clients,
                    operations=count,
                    ops_per_second=round(count / elapsed, 1),
                    p50_ms=round(statistics.median(latencies) * 1000, 2),
                    p99_ms=round(percentile(latencies, 0.99) * 1000, 2),
                )
                print(json.dumps(asdict(result)), file=sys.stderr)
                results.append(result)
        await node.NodeUnstageVolume(
            pb.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=str(staging))
        )
        await channel.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    return results


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | existing volumes | clients | ops/s | p50 ms | p99 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.existing_volumes} | {r.clients} | {r.ops_per_second}"
            f" | {r.p50_ms} | {r.p99_ms} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--populations", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="csi-mock-bench-"))
    try:
        results = asyncio.run(run(args.seconds, sorted(args.populations), root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mounts = "real bind mounts" if os.geteuid() == 0 else "directory mode (not root)"
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {mounts}\n")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
