"""RPC benchmark of csi-mock over its unix socket, optionally against hostpathplugin.

Measures CreateVolume+DeleteVolume, GetCapacity and NodePublishVolume+NodeUnpublishVolume
with 1, 8 and 32 concurrent clients, with 100 and with 10,000 existing volumes, and prints
ops/s with p50/p99 latency as a Markdown table (recorded in docs/benchmarks.md).

    python benchmarks/bench_rpc.py [--seconds 3] [--populations 100 10000] [--json out.json]
    python benchmarks/bench_rpc.py --compare ~/.cache/csi-mock/compare/hostpathplugin
    python benchmarks/bench_rpc.py --journal both [--journal-memory 10000]

With --compare, the same client runs the same scenarios against csi-driver-host-path's
hostpathplugin started with the same flags, and a third table gives the ratio
csi-mock/hostpathplugin of ops/s per cell. The binary is built outside this repository
(docs/benchmarks.md says how); when it is missing, the comparison is skipped with a message.

Each driver runs as a separate process, so client and server compete for the same
cores, as they do on a CI runner. Run as root to measure real bind mounts.

With --journal whole (or both), a csi-mock with `admin.journal_requests: whole` runs the
same cells (alternating with the default one with both), and --journal-memory N measures
in this process what N journal records take (tracemalloc) and cost to make, per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
from google.protobuf.message import Message

from csi_mock.control.journal import Journal, JournalQuery
from csi_mock.observe.calls import CallRecord, key_fields
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

MI = 2**20
CSI_MOCK = "csi-mock"
CSI_MOCK_WHOLE = "csi-mock (whole journal)"
BASELINE = "csi-mock (baseline)"
HOSTPATH = "hostpathplugin"
KIND = "bench"
# hostpathplugin serves GetCapacity only with --capacity, and then only for the kind a
# request names in its `kind` parameter; csi-mock reads the flag and the parameter alike.
PARAMETERS = {"kind": KIND}
CAPABILITY = pb.VolumeCapability(
    mount=pb.VolumeCapability.MountVolume(),
    access_mode=pb.VolumeCapability.AccessMode(
        mode=pb.VolumeCapability.AccessMode.SINGLE_NODE_MULTI_WRITER
    ),
)
SCENARIOS = ("CreateVolume+DeleteVolume", "GetCapacity", "NodePublish+NodeUnpublish")
POD_INFO = {
    "csi.storage.k8s.io/pod.name": "bench-0",
    "csi.storage.k8s.io/pod.namespace": "default",
    "csi.storage.k8s.io/pod.uid": "6f1c4b2e-5f3d-4c8a-9b7e-2d1a0c3e4f5a",
    "csi.storage.k8s.io/serviceAccount.name": "default",
    "csi.storage.k8s.io/ephemeral": "false",
}
"""What the kubelet adds to NodePublishVolume's volume_context with podInfoOnMount."""


@dataclass
class Result:
    driver: str
    scenario: str
    existing_volumes: int
    clients: int
    operations: int
    ops_per_second: float
    p50_ms: float
    p99_ms: float
    server_cpu_ms: float
    """The driver process's CPU time (user + system, all threads) per operation: less
    sensitive than ops/s to other load on a shared machine."""
    server_rss_mb: float = 0.0
    """The driver process's resident memory after the cell (journal included)."""


def driver_flags(root: Path) -> list[str]:
    """hostpathplugin's flags; csi-mock accepts them with the same meaning."""
    return [
        f"--endpoint=unix://{root}/csi.sock",
        "--nodeid=node-1",
        "--drivername=bench.csi-mock.example",
        f"--statedir={root}/state",
        f"--capacity={KIND}=1Pi",
    ]


def driver_command(
    driver: str, root: Path, hostpathplugin: Path | None, baseline: Path | None = None
) -> list[str]:
    if driver == HOSTPATH:
        assert hostpathplugin is not None
        return [str(hostpathplugin), *driver_flags(root)]
    # hostpathplugin logs nothing per call at its default verbosity; csi-mock's default
    # (info) writes a JSON line per call, so it runs at warning to do the same work.
    command = [sys.executable, "-m", "csi_mock.cli", "serve", *driver_flags(root)]
    if driver == BASELINE:
        assert baseline is not None
        command = ["env", f"PYTHONPATH={baseline}", *command]
    if driver == CSI_MOCK_WHOLE:
        config = root.parent / "whole-journal.yaml"
        config.write_text("admin:\n  journal_requests: whole\n")
        command += ["--config", str(config)]
    return [*command, "--log-level=warning"]


def directory(driver: str) -> str:
    """A driver's name as a directory (and socket path) name."""
    return re.sub(r"[^a-z0-9]+", "-", driver).strip("-")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_driver(command: Sequence[str], root: Path) -> subprocess.Popen[bytes]:
    with (root / "driver.log").open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


async def wait_ready(channel: grpc.aio.Channel, process: subprocess.Popen[bytes]) -> None:
    identity = pb_grpc.IdentityStub(channel)
    for _ in range(400):
        if process.poll() is not None:
            raise RuntimeError(f"driver exited with status {process.returncode}")
        try:
            probe = await identity.Probe(pb.ProbeRequest(), timeout=1)
            # hostpathplugin leaves `ready` unset: the spec reads that as ready.
            if not probe.HasField("ready") or probe.ready.value:
                return
        except grpc.aio.AioRpcError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError("driver did not become ready")


def create_request(name: str) -> pb.CreateVolumeRequest:
    return pb.CreateVolumeRequest(
        name=name,
        capacity_range=pb.CapacityRange(required_bytes=MI),
        volume_capabilities=[CAPABILITY],
        parameters=PARAMETERS,
    )


async def populate(controller: pb_grpc.ControllerStub, target: int, have: int) -> int:
    names = (f"existing-{i}" for i in range(have, target))
    sem = asyncio.Semaphore(16)

    async def create(name: str) -> None:
        async with sem:
            await controller.CreateVolume(create_request(name))

    await asyncio.gather(*(create(n) for n in names))
    return target


async def measure(
    operation: Callable[[int], Awaitable[None]], clients: int, seconds: float
) -> tuple[list[float], float]:
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
    return latencies, time.perf_counter() - began


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Target:
    """One driver process under test: its client stubs and the scenarios' operations."""

    def __init__(self, driver: str, command: Sequence[str], root: Path) -> None:
        self.driver = driver
        self.root = root
        root.mkdir(parents=True)
        self.process = start_driver(command, root)
        self.channel = grpc.aio.insecure_channel(f"unix://{root}/csi.sock")
        self.controller = pb_grpc.ControllerStub(self.channel)
        self.node = pb_grpc.NodeStub(self.channel)
        self.staging = root / "staging"
        self.targets = root / "targets"
        self.volume_id = ""
        self.have = 0
        self.operations: dict[str, Callable[[int], Awaitable[None]]] = {
            SCENARIOS[0]: self.create_delete,
            SCENARIOS[1]: self.get_capacity,
            SCENARIOS[2]: self.publish_unpublish,
        }

    async def start(self) -> None:
        await wait_ready(self.channel, self.process)
        staged = await self.controller.CreateVolume(create_request("bench-staged"))
        self.volume_id = staged.volume.volume_id
        self.staging.mkdir()
        self.targets.mkdir()
        await self.node.NodeStageVolume(
            pb.NodeStageVolumeRequest(
                volume_id=self.volume_id,
                staging_target_path=str(self.staging),
                volume_capability=CAPABILITY,
            )
        )

    async def populate(self, population: int) -> None:
        started = time.perf_counter()
        self.have = await populate(self.controller, population, self.have)
        print(
            f"# {self.driver}: populated {population} volumes"
            f" in {time.perf_counter() - started:.1f}s",
            file=sys.stderr,
        )

    async def create_delete(self, i: int) -> None:
        created = await self.controller.CreateVolume(create_request(f"bench-{i}"))
        await self.controller.DeleteVolume(
            pb.DeleteVolumeRequest(volume_id=created.volume.volume_id)
        )

    async def get_capacity(self, i: int) -> None:
        await self.controller.GetCapacity(pb.GetCapacityRequest(parameters=PARAMETERS))

    async def publish_unpublish(self, i: int) -> None:
        target = str(self.targets / f"t{i}")
        await self.node.NodePublishVolume(
            pb.NodePublishVolumeRequest(
                volume_id=self.volume_id,
                staging_target_path=str(self.staging),
                target_path=target,
                volume_capability=CAPABILITY,
                volume_context=POD_INFO,
            )
        )
        await self.node.NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(volume_id=self.volume_id, target_path=target)
        )

    async def measure(self, scenario: str, population: int, clients: int, seconds: float) -> Result:
        cpu_before = cpu_seconds(self.process.pid)
        latencies, elapsed = await measure(self.operations[scenario], clients, seconds)
        cpu = cpu_seconds(self.process.pid) - cpu_before
        result = Result(
            driver=self.driver,
            scenario=scenario,
            existing_volumes=population,
            clients=clients,
            operations=len(latencies),
            ops_per_second=round(len(latencies) / elapsed, 1),
            p50_ms=round(statistics.median(latencies) * 1000, 2),
            p99_ms=round(percentile(latencies, 0.99) * 1000, 2),
            server_cpu_ms=round(cpu * 1000 / len(latencies), 3),
            server_rss_mb=rss_mb(self.process.pid),
        )
        print(json.dumps(asdict(result)), file=sys.stderr)
        return result

    async def stop(self) -> None:
        try:
            if self.volume_id:
                await self.node.NodeUnstageVolume(
                    pb.NodeUnstageVolumeRequest(
                        volume_id=self.volume_id, staging_target_path=str(self.staging)
                    )
                )
            await self.channel.close()
        finally:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)

    def log_tail(self) -> str:
        return (self.root / "driver.log").read_text(errors="replace")[-2000:]


async def run(
    commands: dict[str, list[str]],
    base: Path,
    seconds: float,
    populations: list[int],
    scenarios: Sequence[str],
    client_counts: Sequence[int],
) -> dict[str, list[Result]]:
    """Every cell is measured on each driver in turn, one right after the other, so that
    a change in the machine's other load affects both sides of a ratio alike."""
    targets = [
        Target(driver, command, base / directory(driver)) for driver, command in commands.items()
    ]
    results: dict[str, list[Result]] = {target.driver: [] for target in targets}
    try:
        for target in targets:
            await target.start()
        for population in populations:
            for target in targets:
                await target.populate(population)
            for scenario, clients in itertools.product(scenarios, client_counts):
                for target in targets:
                    result = await target.measure(scenario, population, clients, seconds)
                    results[target.driver].append(result)
    except BaseException:
        for target in targets:
            print(f"# {target.driver} log:\n{target.log_tail()}", file=sys.stderr)
        raise
    finally:
        for target in targets:
            await target.stop()
    return results


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | existing volumes | clients | ops/s | p50 ms | p99 ms | server CPU ms/op"
        " | server RSS MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.existing_volumes} | {r.clients} | {r.ops_per_second}"
            f" | {r.p50_ms} | {r.p99_ms} | {r.server_cpu_ms} | {r.server_rss_mb} |"
        )
    return "\n".join(lines)


def journal_samples() -> list[tuple[str, Message, Message]]:
    """Requests as a cluster sends them, with their replies: (method, request, reply)."""
    create = create_request("pvc-6f1c4b2e-5f3d-4c8a-9b7e-2d1a0c3e4f5a")
    create.secrets["password"] = "provisioner-secret"
    created = pb.CreateVolumeResponse(
        volume=pb.Volume(
            volume_id="vol-" + "0" * 32,
            capacity_bytes=MI,
            volume_context={"csi-mock/pool": "default", "csi-mock/size": str(MI)},
        )
    )
    publish = pb.NodePublishVolumeRequest(
        volume_id="vol-" + "0" * 32,
        staging_target_path="/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount",
        target_path="/var/lib/kubelet/pods/6f1c4b2e/volumes/kubernetes.io~csi/pvc-1/mount",
        volume_capability=CAPABILITY,
        volume_context={**POD_INFO, "csi.storage.k8s.io/serviceAccount.tokens": "{...}"},
        secrets={"password": "node-publish-secret"},
    )
    return [
        ("CreateVolume", create, created),
        ("NodePublishVolume", publish, pb.NodePublishVolumeResponse()),
    ]


def journal_memory(records: int) -> str:
    """Bytes per record held by a full journal of `records` (tracemalloc), and µs to make
    each (timed apart: tracemalloc slows allocation), per mode; records are built as the
    call interceptor builds them."""
    lines = [
        "| method | journal | bytes/record | µs/record | whole request, JSON bytes |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for method, request, reply in journal_samples():
        for whole in (False, True):
            elapsed, _ = fill_journal(method, request, reply, whole, records)
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            _, journal = fill_journal(method, request, reply, whole, records)
            held = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            (sample,) = journal.query(JournalQuery(limit=1))
            size = len(json.dumps(sample.whole_request)) if sample.whole_request else "-"
            lines.append(
                f"| {method} | {'whole' if whole else 'keys'} | {held // records}"
                f" | {elapsed * 1e6 / records:.1f} | {size} |"
            )
    return "\n".join(lines)


def fill_journal(
    method: str, request: Message, reply: Message, whole: bool, records: int
) -> tuple[float, Journal]:
    journal = Journal(records, whole=whole, whole_capacity=records)
    converter = journal.whole_messages
    started = time.perf_counter()
    for _ in range(records):
        record = CallRecord(time.time(), method, "Node", key_fields(request))
        if converter is not None:
            record.whole_request = converter.to_dict(request)
            record.whole_reply = converter.to_dict(reply)
        journal(record)
    return time.perf_counter() - started, journal


def comparison_table(ours: list[Result], theirs: list[Result]) -> str:
    """Both drivers side by side per cell, with the ratio of ops/s csi-mock/hostpathplugin."""
    lines = [
        "| scenario | existing volumes | clients | csi-mock ops/s | p50 ms | p99 ms"
        " | hostpathplugin ops/s | p50 ms | p99 ms | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cells = {(r.scenario, r.existing_volumes, r.clients): r for r in theirs}
    for a in ours:
        b = cells.get((a.scenario, a.existing_volumes, a.clients))
        if b is None:
            continue
        ratio = a.ops_per_second / b.ops_per_second if b.ops_per_second else float("inf")
        lines.append(
            f"| {a.scenario} | {a.existing_volumes} | {a.clients}"
            f" | {a.ops_per_second} | {a.p50_ms} | {a.p99_ms}"
            f" | {b.ops_per_second} | {b.p50_ms} | {b.p99_ms} | {ratio:.2f}x |"
        )
    return "\n".join(lines)


def comparison_binary(path: Path | None) -> Path | None:
    """The hostpathplugin binary to compare with, or None (with a message) to skip."""
    if path is None:
        return None
    path = path.expanduser()
    if path.is_file() and os.access(path, os.X_OK):
        return path.resolve()
    print(
        f"# --compare {path}: not an executable file; skipping the hostpathplugin comparison"
        " (build it as docs/benchmarks.md describes)",
        file=sys.stderr,
    )
    return None


def hostpathplugin_version(path: Path) -> str:
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--populations", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument(
        "--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS), metavar="SCENARIO"
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="PATH",
        help="hostpathplugin binary to run the same benchmark against",
    )
    parser.add_argument(
        "--journal",
        choices=("keys", "whole", "both"),
        default="keys",
        help="what csi-mock's journal keeps of each request (both: two drivers, alternating)",
    )
    parser.add_argument(
        "--journal-memory",
        type=int,
        metavar="N",
        help="only measure, in this process, the memory and time of N journal records",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="a directory holding another csi_mock package (e.g. `git archive HEAD csi_mock"
        " | tar -x -C DIR`) to run with the default journal beside, cell by cell",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args()
    if args.journal_memory:
        print(f"{args.journal_memory} records, Python {sys.version.split()[0]}\n")
        print(journal_memory(args.journal_memory))
        return 0
    hostpathplugin = comparison_binary(args.compare)
    ours = {"keys": [CSI_MOCK], "whole": [CSI_MOCK_WHOLE], "both": [CSI_MOCK, CSI_MOCK_WHOLE]}
    if args.baseline:
        ours[args.journal].insert(0, BASELINE)
    drivers = ours[args.journal] + ([HOSTPATH] if hostpathplugin else [])
    base = Path(tempfile.mkdtemp(prefix="csi-mock-bench-"))
    commands = {
        driver: driver_command(
            driver,
            base / directory(driver),
            hostpathplugin,
            args.baseline and args.baseline.resolve(),
        )
        for driver in drivers
    }
    try:
        results = asyncio.run(
            run(
                commands,
                base,
                args.seconds,
                sorted(args.populations),
                args.scenarios,
                args.clients,
            )
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    mounts = "real bind mounts" if os.geteuid() == 0 else "directory mode (not root)"
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {mounts}\n")
    for driver in ours[args.journal]:
        print(f"{driver}:\n\n{table(results[driver])}\n")
    if hostpathplugin and CSI_MOCK in results:
        print(f"\n{HOSTPATH} ({hostpathplugin_version(hostpathplugin)}):\n")
        print(table(results[HOSTPATH]))
        print(f"\nratio of ops/s, {CSI_MOCK}/{HOSTPATH}:\n")
        print(comparison_table(results[CSI_MOCK], results[HOSTPATH]))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for d in drivers for r in results[d]], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
