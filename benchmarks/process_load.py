"""Which component a run spends the machine on: CPU and memory per component while a
command runs.

    python benchmarks/process_load.py [--interval 5] [--out FILE.json] -- COMMAND ...

Every ``--interval`` seconds it reads every process in /proc (user + system time,
resident memory) and the machine's busy share from /proc/stat, and groups processes
into components by their command line (kube-apiserver, etcd, csi-provisioner,
csi-mock ...). At the end, per component: CPU-seconds used while the command ran, the
mean cores that is, the peak resident memory summed over its processes, and the most
processes it had at once; and the machine's busy share over the run (1.0: both cores
always busy). A process's time before the first sample it is seen in is not counted,
so a component started and stopped between two samples is missed; RSS counts shared
pages in every process that maps them. Prints a Markdown table; ``--out`` keeps the
samples too. Exit status: the command's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from csi_harness._internal.core.procfs import read_host_cpu

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
COMPONENTS = (
    ("kube-apiserver", "kube-apiserver"),
    ("kube-controller-manager", "kube-controller-manager"),
    ("kube-scheduler", "kube-scheduler"),
    ("etcd", "etcd"),
    ("csi-provisioner", "csi-provisioner"),
    ("csi-attacher", "csi-attacher"),
    ("csi-resizer", "csi-resizer"),
    ("csi-snapshotter", "csi-snapshotter"),
    ("snapshot-controller", "snapshot-controller"),
    ("node_simulator", "node simulator"),
    ("csi-mock", "csi-mock"),
    ("csi_mock", "csi-mock"),
    ("kubelet", "kubelet"),
    ("containerd", "containerd"),
    ("csi-harness", "csi-harness (the run itself)"),
)
"""(command line substring, component), first match wins."""


def component_of(cmdline: str) -> str | None:
    for needle, name in COMPONENTS:
        if needle in cmdline:
            return name
    return None


@dataclass
class Component:
    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    most_processes: int = 0


@dataclass
class Sample:
    at: float
    busy_share: float
    cores: dict[str, float] = field(default_factory=dict)
    rss_bytes: dict[str, int] = field(default_factory=dict)


def read_processes() -> dict[int, tuple[str, float, int]]:
    """pid -> (component, CPU seconds so far, resident bytes), for known components."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(entry.path, "stat").read_text()
            rss_pages = int(Path(entry.path, "statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        name = component_of(cmdline)
        if name is None:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        found[int(entry.name)] = (name, cpu, rss_pages * PAGE)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is required after --")
    components: dict[str, Component] = {}
    samples: list[Sample] = []
    seen = read_processes()
    busy0, total0 = read_host_cpu()
    last_busy, last_total, last_at = busy0, total0, time.monotonic()
    start = last_at
    process = subprocess.Popen(command)
    while True:
        try:
            process.wait(timeout=args.interval)
            done = True
        except subprocess.TimeoutExpired:
            done = False
        now = time.monotonic()
        current = read_processes()
        busy, total = read_host_cpu()
        sample = Sample(at=now - start, busy_share=(busy - last_busy) / max(total - last_total, 1))
        counts: dict[str, int] = {}
        for pid, (name, cpu, rss) in current.items():
            before = seen.get(pid)
            used = cpu - before[1] if before is not None and before[0] == name else 0.0
            component = components.setdefault(name, Component())
            component.cpu_seconds += used
            sample.cores[name] = sample.cores.get(name, 0.0) + used / (now - last_at)
            sample.rss_bytes[name] = sample.rss_bytes.get(name, 0) + rss
            counts[name] = counts.get(name, 0) + 1
        for name, component in components.items():
            component.peak_rss_bytes = max(component.peak_rss_bytes, sample.rss_bytes.get(name, 0))
            component.most_processes = max(component.most_processes, counts.get(name, 0))
        samples.append(sample)
        seen, last_busy, last_total, last_at = current, busy, total, now
        if done:
            break
    elapsed = time.monotonic() - start
    machine = (last_busy - busy0) / max(last_total - total0, 1)
    rows = sorted(components.items(), key=lambda item: -item[1].cpu_seconds)
    print(f"\n{elapsed:.0f} s; the machine was {machine:.0%} busy over it\n")
    print("| component | CPU-s | mean cores | peak RSS | processes |")
    print("|---|---:|---:|---:|---:|")
    for name, c in rows:
        print(
            f"| {name} | {c.cpu_seconds:.0f} | {c.cpu_seconds / elapsed:.2f} "
            f"| {c.peak_rss_bytes / 2**30:.2f} GiB | {c.most_processes} |"
        )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "command": command,
                    "seconds": elapsed,
                    "machine_busy_share": machine,
                    "components": {n: asdict(c) for n, c in rows},
                    "samples": [asdict(s) for s in samples],
                },
                indent=1,
            )
            + "\n"
        )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
