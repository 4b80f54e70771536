"""Removing every trace of a local cluster run, also after a crash.

What belongs to a run is found three ways, none of which can hit anything else:
the PIDs recorded in its run state (checked against their kernel start time),
processes whose command line names the run directory (containerd's shims, which
containerd starts, not us), and processes inside the run's own cgroup subtree
(pod containers). Then every mount under the run directory is detached, the
cgroup subtree and the pod bridge are removed, and the directory is deleted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from csi_harness._internal.core.processes import process_start_time, stop_processes
from csi_harness._internal.core.procfs import read_stat
from csi_harness._internal.core.run_state import RunState
from csi_mock.host.loop import KernelLoopDevices
from csi_mock.host.mounts import BindMounter, mount_points

CGROUP_V1 = Path("/sys/fs/cgroup")

# Stop order: consumers before what they consume; the kubelet before containerd.
STOP_ORDER = (
    "csi-provisioner",
    "csi-attacher",
    "csi-resizer",
    "csi-snapshotter",
    "snapshot-controller",
    "node-simulator",
    "kube-scheduler",
    "kube-controller-manager",
    "kubelet",
    "csi-mock",
    "containerd",
    "kube-apiserver",
    "etcd",
)


@dataclass
class TeardownReport:
    stopped: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    stray_processes: int = 0
    unmounted: int = 0
    loop_devices: int = 0
    """Loop devices over files of the run (csi-mock's raw block volumes, or the
    kubelet's own over a block volume's path) torn down."""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _stop_rank(name: str) -> int:
    for rank, prefix in enumerate(STOP_ORDER):
        if name.startswith(prefix):
            return rank
    return -1  # unknown: stop first


def teardown(run_dir: Path, state: RunState | None) -> TeardownReport:
    started = time.monotonic()
    report = TeardownReport()
    if state is not None:
        state.phase = "stopping"
        with contextlib.suppress(OSError):
            state.save()
        records = sorted(state.processes.values(), key=lambda r: _stop_rank(r.name))
        # Stop in ranks so that e.g. the kubelet is gone before containerd goes.
        ranks = sorted({_stop_rank(r.name) for r in records})
        for rank in ranks:
            batch = [r for r in records if _stop_rank(r.name) == rank]
            report.killed += stop_processes(batch, timeout=3.0)
            report.stopped += [r.name for r in batch]
    if state is not None and state.cgroup_root:
        report.stray_processes += _kill_cgroup_tasks(state.cgroup_root)
    report.stray_processes += _kill_processes_naming(run_dir)
    extra = [Path(d) for d in state.extra_dirs] if state is not None else []
    report.unmounted = sum(_unmount_below(d, report) for d in [run_dir, *extra])
    report.loop_devices = sum(_detach_loops_below(d, report) for d in [run_dir, *extra])
    if state is not None and state.cgroup_root:
        _remove_cgroups(state.cgroup_root, report)
    if state is not None and state.bridge:
        _delete_link(state.bridge, report)
    for directory in [*extra, run_dir]:
        if directory.exists():
            try:
                shutil.rmtree(directory)
            except OSError as exc:
                report.problems.append(f"cannot remove {directory}: {exc}")
        # Shared parents (/run/csi-harness, /var/lib/csi-harness) go when empty.
        with contextlib.suppress(OSError):
            directory.parent.rmdir()
    report.seconds = time.monotonic() - started
    return report


def _cgroup_dirs(cgroup_root: str) -> list[Path]:
    relative = cgroup_root.strip("/")
    if not relative:
        return []
    return [h / relative for h in sorted(CGROUP_V1.iterdir()) if (h / relative).is_dir()]


def _cgroup_tree(top: Path) -> list[Path]:
    """``top`` and every cgroup below it, deepest first. A cgroup that goes while it
    is read (its last task exited, another teardown removed it) is skipped, not an
    error: cgroupfs changes under the walk."""
    found = []
    for parent, children, _ in os.walk(top, onerror=lambda _: None):
        found += [Path(parent, child) for child in children]
    return sorted([top, *found], key=lambda p: len(p.parts), reverse=True)


def _kill_cgroup_tasks(cgroup_root: str) -> int:
    pids: set[int] = set()
    for top in _cgroup_dirs(cgroup_root):
        for cgroup in _cgroup_tree(top):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in (cgroup / "cgroup.procs").read_text().split())
    return _kill_all(pids)


def _kill_processes_naming(run_dir: Path) -> int:
    """Kill processes with an argument inside the run directory (containerd's shims),
    sparing this process and its ancestors (a wrapper that started the teardown)."""
    inside = str(run_dir).rstrip("/").encode()
    spared = _ancestors(os.getpid())
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        with contextlib.suppress(OSError):
            args = (entry / "cmdline").read_bytes().split(b"\0")
            if any(_names_path(arg, inside) for arg in args):
                pids.add(int(entry.name))
    return _kill_all(pids)


def _names_path(arg: bytes, path: bytes) -> bool:
    """``arg`` is ``path``, a path below it, or an option whose value is one."""
    value = arg.split(b"=", 1)[1] if arg.startswith(b"-") and b"=" in arg else arg
    return value == path or value.startswith(path + b"/")


def _ancestors(pid: int) -> set[int]:
    chain = set()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        stat = read_stat(pid)
        if stat is None:
            break
        pid = stat.ppid
    return chain


def _kill_all(pids: set[int]) -> int:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 3.0
    while pids and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        pids = {p for p in pids if process_start_time(p) is not None}
        if pids:
            time.sleep(0.02)
    return len(pids)


def _unmount_below(run_dir: Path, report: TeardownReport) -> int:
    # csi-mock's own unmount: a lazy detach that never follows a symbolic link.
    mounter = BindMounter()
    prefix = str(run_dir).rstrip("/") + "/"
    count = 0
    # Mounts can stack; repeat until nothing under the run dir is left.
    for _ in range(10):
        targets = sorted(
            (m for m in mount_points() if m.startswith(prefix) or m == prefix[:-1]),
            key=lambda m: m.count("/"),
            reverse=True,
        )
        if not targets:
            break
        for target in targets:
            try:
                if not mounter.is_mounted(target):
                    continue  # gone with the mount it was below
                mounter.unmount(target)
            except OSError as error:
                # EINVAL: not a mount point (any more); ENOENT: no such path (any more).
                if error.errno not in (errno.EINVAL, errno.ENOENT):
                    report.problems.append(str(error.strerror))
            else:
                count += 1
    return count


def _detach_loops_below(run_dir: Path, report: TeardownReport) -> int:
    """Tear down loop devices backed by files of the run: after a crash, or when the
    kubelet's block-volume teardown did not finish, nothing else would."""
    if not KernelLoopDevices.available():
        return 0
    loops = KernelLoopDevices()
    prefix = os.path.realpath(run_dir).rstrip("/") + "/"
    # A deleted backing file shows as "<path> (deleted)": still ours by its path.
    backing = {str(f) for f in loops.attached().values() if str(f).startswith(prefix)}
    count = 0
    for path in sorted(backing):
        try:
            loops.detach(Path(path))
            count += 1
        except OSError as exc:
            report.problems.append(f"detach loop device over {path}: {exc}")
    return count


def _remove_cgroups(cgroup_root: str, report: TeardownReport) -> None:
    for top in _cgroup_dirs(cgroup_root):
        for directory in _cgroup_tree(top):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass  # gone already
            except OSError as exc:
                report.problems.append(f"rmdir {directory}: {exc.strerror}")
        # Parents this run created (/csi-harness) go when empty.
        with contextlib.suppress(OSError):
            top.parent.rmdir()


def _delete_link(name: str, report: TeardownReport) -> None:
    if not Path(f"/sys/class/net/{name}").exists():
        return
    result = subprocess.run(["ip", "link", "delete", name], capture_output=True, text=True)
    if result.returncode != 0:
        report.problems.append(f"ip link delete {name}: {result.stderr.strip()}")


def format_teardown(report: TeardownReport) -> str:
    """What a teardown did, in one line."""
    parts = [f"{len(report.stopped)} processes stopped"]
    if report.killed:
        parts.append(f"killed after timeout: {', '.join(report.killed)}")
    if report.stray_processes:
        parts.append(f"{report.stray_processes} stray processes left")
    parts.append(f"{report.unmounted} mounts removed")
    if report.loop_devices:
        parts.append(f"{report.loop_devices} loop devices detached")
    parts += report.problems
    parts.append(f"{report.seconds:.1f}s")
    return "; ".join(parts)
