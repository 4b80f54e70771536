"""A local cluster cleans up after itself, and after a predecessor that crashed:
no process, mount, cgroup, network link or directory of a run survives ``down``."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, cast

import pytest
from lightkube import Client, KubeConfig
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.core.procfs import read_stat
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.objects import NODE_TYPE_LABEL
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.teardown import CGROUP_V1
from csi_mock.host.mounts import mount_points

pytestmark = pytest.mark.e2e


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                stat = read_stat(int(entry.name))
                if stat is None or stat.state == "Z":
                    continue
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _traces(cluster: LocalCluster, state: RunState) -> dict[str, object]:
    """Everything of the run still visible on the host."""
    prefixes = [str(cluster.layout.root), *state.extra_dirs]
    return {
        "processes": [p for prefix in prefixes for p in _processes_naming(prefix)],
        "mounts": sorted(m for m in mount_points() if any(m.startswith(p) for p in prefixes)),
        "dirs": [p for p in prefixes if Path(p).exists()],
        "link": Path(f"/sys/class/net/{state.bridge}").exists(),
        "cgroups": [
            str(h) for h in CGROUP_V1.iterdir() if (h / state.cgroup_root.strip("/")).exists()
        ],
    }


def _start_pod_with_volume(cluster: LocalCluster) -> None:
    kube = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="csi-harness-tests")
    for obj in (
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "crash-data", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "csi-mock",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "crash-app", "namespace": "default"},
            "spec": {
                "nodeSelector": {NODE_TYPE_LABEL: "kubelet"},
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "app",
                        "image": "csi-mock.local/busybox:1",
                        "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "crash-data"}}],
            },
        },
    ):
        kube.create(cast(Any, from_dict(obj)))

    def running() -> tuple[bool, object]:
        pod = kube.get(Pod, "crash-app", namespace="default")
        phase = pod.status.phase if pod.status else None
        return phase == "Running", phase

    wait_for("pod crash-app to run", running, timeout=60, interval=0.5)


def test_up_after_a_crash_cleans_the_leftovers_and_down_leaves_nothing(tmp_path: Path) -> None:
    config = LocalClusterConfig(name="csi-harness-lifecycle", simulated_nodes=1)
    first = LocalCluster(config, progress=lambda _: None)
    first.up()
    _start_pod_with_volume(first)
    crashed = RunState.load(first.layout.root)
    assert crashed is not None
    # The harness dies without tearing down: every process it started is killed;
    # containerd's shims, the pod's containers and all mounts stay behind.
    for record in crashed.processes.values():
        os.kill(record.pid, signal.SIGKILL)
    left = _traces(first, crashed)
    assert left["mounts"], "a running pod must leave mounts behind"
    assert left["processes"], "containerd shims outlive a crash"

    second = LocalCluster(config, progress=lambda _: None)
    try:
        second.up()
        for record in crashed.processes.values():
            assert not Path(f"/proc/{record.pid}").exists() or _is_zombie(record.pid)
    finally:
        report = second.down()
    state_after = crashed  # same cluster name: same bridge, cgroup root, shim dir
    assert _traces(second, state_after) == {
        "processes": [],
        "mounts": [],
        "dirs": [],
        "link": False,
        "cgroups": [],
    }
    assert report.problems == []
    assert report.seconds < 5, f"teardown took {report.seconds:.1f}s"


def _is_zombie(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is None or stat.state == "Z"
