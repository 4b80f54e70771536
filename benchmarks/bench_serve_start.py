"""What one `csi-mock serve` start costs: CPU seconds and wall time until its CSI socket
answers Probe with ready.

On kind every driver is four to five such starts (the controller and one node instance
per node), each a fresh interpreter in a container; on two busy cores a CPU-second per
start is a measurable share of a suite's time (docs/benchmarks.md, "csi-mock's start").

    python benchmarks/bench_serve_start.py [--runs 15] [--json out.json]

Each start is a new process with the default configuration in a temporary state
directory; its CPU time (user + system, from /proc) is read once Probe says ready.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from csi_mock.proto import csi_pb2, csi_pb2_grpc


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ready(socket: Path) -> bool:
    if not socket.exists():
        return False
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        try:
            reply = csi_pb2_grpc.IdentityStub(channel).Probe(csi_pb2.ProbeRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return not reply.HasField("ready") or reply.ready.value


def one_start(workdir: Path, index: int) -> tuple[float, float]:
    """Wall and CPU seconds of one start, until Probe says ready."""
    socket = workdir / f"csi-{index}.sock"
    started = time.monotonic()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "csi_mock", "serve",
            f"--endpoint=unix://{socket}", "--nodeid=bench", f"--statedir={workdir}/s{index}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not _ready(socket):
            if process.poll() is not None:
                raise SystemExit(f"csi-mock serve exited with {process.returncode}")
            time.sleep(0.005)
        return time.monotonic() - started, _cpu_seconds(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, help="write the samples here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="csi-mock-start-") as tmp:
        one_start(Path(tmp), -1)  # warm the page cache and the .pyc files
        samples = [one_start(Path(tmp), i) for i in range(args.runs)]
    walls, cpus = zip(*samples, strict=True)
    print("| starts | CPU median (min-max) | wall median (min-max) |\n| ---: | --- | --- |")
    print(
        f"| {args.runs} | {statistics.median(cpus):.2f} s ({min(cpus):.2f}-{max(cpus):.2f})"
        f" | {statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f}) |"
    )
    if args.json:
        args.json.write_text(json.dumps({"wall": walls, "cpu": cpus}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
