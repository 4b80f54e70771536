import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from csi_harness._internal.core.processes import Supervisor, is_running, process_start_time
from csi_harness._internal.core.run_state import ProcessRecord, RunState
from csi_harness._internal.providers.local.teardown import _cgroup_tree, teardown
from csi_mock.host.loop import KernelLoopDevices
from csi_mock.host.mounts import mount_points

REPO_ROOT = Path(__file__).resolve().parents[3]


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "c1"
    (run_dir / "logs").mkdir(parents=True)
    return run_dir


@pytest.fixture
def state(run_dir: Path) -> RunState:
    return RunState(run_dir, cluster="c1")


@pytest.fixture
def spawn() -> Iterator[Callable[[list[str]], subprocess.Popen[bytes]]]:
    """Start a process that is not supervised (a stray); kill it after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(argv, start_new_session=True)
        started.append(process)
        eventually(lambda: argv[-1].encode() in cmdline(process.pid))  # exec'd
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def stray_naming(path: Path) -> list[str]:
    # The path is $0 of the shell, so it is in the command line. The loop keeps sh
    # from exec'ing its last command, and no child outlives it by more than 0.2 s.
    return ["sh", "-c", "while :; do sleep 0.2; done", str(path)]


def test_teardown_stops_supervised_processes_and_reports_their_names(
    run_dir: Path, state: RunState
) -> None:
    record = Supervisor(state, run_dir / "logs").start("sleeper", ["sleep", "300"])
    report = teardown(run_dir, state)
    assert report.stopped == ["sleeper"]
    assert report.killed == []
    assert not is_running(record)


def test_teardown_stops_processes_consumers_first(run_dir: Path, state: RunState) -> None:
    supervisor = Supervisor(state, run_dir / "logs")
    for name in ("etcd", "kube-apiserver", "containerd-node-1", "kubelet-node-1", "other"):
        supervisor.start(name, ["sleep", "300"])
    report = teardown(run_dir, state)
    assert report.stopped == [
        "other",
        "kubelet-node-1",
        "containerd-node-1",
        "kube-apiserver",
        "etcd",
    ]


def test_teardown_kills_a_stray_process_naming_the_run_dir(
    run_dir: Path, state: RunState, spawn: Callable[[list[str]], subprocess.Popen[bytes]]
) -> None:
    stray = spawn(stray_naming(run_dir / "nodes" / "node-1" / "containerd"))
    report = teardown(run_dir, state)
    eventually(lambda: not alive(stray))
    assert report.stray_processes == 0  # none survived
    assert report.problems == []


def test_teardown_removes_the_run_dir_with_supervised_and_stray_processes(
    run_dir: Path, state: RunState, spawn: Callable[[list[str]], subprocess.Popen[bytes]]
) -> None:
    Supervisor(state, run_dir / "logs").start("sleeper", ["sleep", "300"])
    spawn(stray_naming(run_dir))
    report = teardown(run_dir, state)
    assert not run_dir.exists()
    assert report.problems == []


def test_teardown_without_a_run_state_removes_the_run_dir(run_dir: Path) -> None:
    (run_dir / "etcd" / "member").mkdir(parents=True)
    report = teardown(run_dir, None)
    assert not run_dir.exists()
    assert report.stopped == []


def test_teardown_of_a_missing_run_dir_is_a_no_op(tmp_path: Path) -> None:
    report = teardown(tmp_path / "absent", None)
    assert report.problems == []


def test_teardown_removes_the_shared_parent_once_empty(run_dir: Path) -> None:
    teardown(run_dir, None)
    assert not run_dir.parent.exists()


def test_teardown_keeps_the_shared_parent_while_other_runs_are_in_it(run_dir: Path) -> None:
    other = run_dir.parent / "c2"
    other.mkdir()
    teardown(run_dir, None)
    assert other.is_dir()


def test_teardown_removes_the_runs_extra_dirs(run_dir: Path, state: RunState) -> None:
    shim_dir = run_dir.parent.parent / "shim" / "0123456789"
    shim_dir.mkdir(parents=True)
    state.extra_dirs = [str(shim_dir)]
    teardown(run_dir, state)
    assert not shim_dir.exists()


def test_teardown_leaves_a_recycled_pid_alone(
    run_dir: Path, state: RunState, spawn: Callable[[list[str]], subprocess.Popen[bytes]]
) -> None:
    bystander = spawn(["sleep", "300"])
    start_time = process_start_time(bystander.pid)
    assert start_time is not None
    # A record of an earlier etcd whose pid the kernel has since given to the bystander.
    state.processes["etcd"] = ProcessRecord("etcd", bystander.pid, start_time - 1, [], "")
    teardown(run_dir, state)
    assert alive(bystander)


@pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")
def test_teardown_unmounts_a_bind_mount_in_the_run_dir_and_keeps_its_source(
    tmp_path: Path, run_dir: Path, state: RunState
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "keep").write_text("data outside the run dir")
    target = run_dir / "nodes" / "node-1" / "kubelet" / "pods" / "volume"
    target.mkdir(parents=True)
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount --bind not permitted here: {mounted.stderr.decode().strip()}")
    try:
        report = teardown(run_dir, state)
        assert report.unmounted == 1
        assert report.problems == []
        assert str(target) not in mount_points()
        assert not run_dir.exists()
        assert (source / "keep").read_text() == "data outside the run dir"
    finally:
        if str(target) in mount_points():
            subprocess.run(["umount", "-l", str(target)], check=False)


@pytest.mark.skipif(not KernelLoopDevices.available(), reason="no read-write /dev/loop-control")
def test_teardown_detaches_loop_devices_over_files_of_the_run_and_no_others(
    tmp_path: Path, run_dir: Path, state: RunState
) -> None:
    loops = KernelLoopDevices()
    ours = run_dir / "driver" / "backend" / "vol-1"
    ours.parent.mkdir(parents=True)
    ours.write_bytes(b"\0" * 4096)
    outside = tmp_path / "not-the-runs"
    outside.write_bytes(b"\0" * 4096)
    loops.attach(ours)
    loops.attach(outside)
    try:
        report = teardown(run_dir, state)
        assert report.loop_devices == 1
        assert report.problems == []
        backing = {str(f) for f in loops.attached().values()}
        assert not any(f.startswith(str(run_dir)) for f in backing)
        assert str(outside) in backing
    finally:
        loops.detach(outside)
        loops.detach(ours)


def test_teardown_spares_processes_of_a_run_dir_whose_name_extends_this_one(
    run_dir: Path, spawn: Callable[[list[str]], subprocess.Popen[bytes]]
) -> None:
    sibling = run_dir.parent / (run_dir.name + "-e2e")
    neighbour = spawn(stray_naming(sibling / "nodes" / "node-1" / "containerd"))
    teardown(run_dir, None)
    assert alive(neighbour)


def test_teardown_spares_the_command_that_runs_it(run_dir: Path) -> None:
    script = (
        "import sys; from pathlib import Path;"
        " from csi_harness._internal.providers.local.teardown import _cgroup_tree, teardown;"
        " teardown(Path(sys.argv[1]), None)"
    )
    # Like `sudo csi-harness cluster down --run-dir DIR`: the wrapper names DIR too.
    wrapper = f'"$1" -c "{script}" "$0" && echo teardown finished'
    result = subprocess.run(
        ["sh", "-c", wrapper, str(run_dir), sys.executable],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (result.returncode, result.stdout) == (0, "teardown finished\n")


def test_the_cgroup_walk_lists_the_deepest_first_and_skips_what_goes_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cgroupfs changes while teardown walks it (a cgroup goes when another teardown
    removes it): the walk lists what it found, deepest first, and does not fail."""
    top = tmp_path / "run"
    (top / "a" / "b").mkdir(parents=True)
    (top / "c").mkdir()
    tree = _cgroup_tree(top)
    assert tree[0] == top / "a" / "b" and tree[-1] == top
    assert sorted(tree) == sorted([top, top / "a", top / "a" / "b", top / "c"])
    real_scandir = os.scandir

    def vanishing(path: object) -> object:
        if str(path) == str(top / "a"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", vanishing)
    assert sorted(_cgroup_tree(top)) == sorted([top, top / "a", top / "c"])
    assert _cgroup_tree(tmp_path / "gone") == [tmp_path / "gone"]
