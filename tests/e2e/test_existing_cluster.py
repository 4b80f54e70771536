"""`--csi-cluster existing`: suites run against a cluster `csi-harness cluster up` brought
up, which they leave running with the driver it had."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Node

from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.csinode import CSINodeResource, csinode_drivers
from csi_harness._internal.providers.local.config import LocalClusterConfig
from tests.e2e.test_volume_limits import allocatable_counts

pytestmark = pytest.mark.e2e

FEATURE = "harness providers"
NAME = "csi-harness-existing"
REPO = Path(__file__).resolve().parent.parent.parent


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in the repository, to completion."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("csi_harness._internal.cli", "cluster", *args, "--name", NAME)


def run_pytest(*args: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of its own, in the repository, with these arguments."""
    return run_module("pytest", "-p", "no:cacheprovider", *args)


@pytest.fixture
def cluster_up() -> Iterator[Path]:
    up = harness("up", "--simulated-nodes", "1")
    assert up.returncode == 0, up.stderr
    try:
        yield LocalClusterConfig(name=NAME).effective_run_dir / "kubeconfig"
    finally:
        down = harness("down")
        assert down.returncode == 0, down.stderr


@pytest.mark.scenario(FEATURE, "--csi-cluster existing: suites run, the cluster keeps its driver")
def test_suites_run_against_a_running_cluster_and_leave_its_driver(
    cluster_up: Path, tmp_path: Path
) -> None:
    kubeconfig = cluster_up
    before = RunState.load(kubeconfig.parent)
    assert before is not None
    run = run_pytest(
        "--csi-cluster=existing",
        f"--csi-kubeconfig={kubeconfig}",
        # A local cluster's nodes pull nothing: its pods run the images built here.
        "--csi-images=built",
        f"--junitxml={tmp_path / 'junit.xml'}",
        "tests/e2e/test_volume_limits.py::"
        "test_the_csinode_count_is_the_limit_and_the_pod_beyond_it_is_unschedulable",
        "tests/e2e/test_topology.py::"
        "test_node_segments_become_node_labels_and_csinode_topology_keys",
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
    assert f"attached to cluster {NAME!r}" in run.stdout, run.stdout
    # The suites deployed drivers of their own beside the cluster's (allocatable.count
    # 2 for one of them) and removed them: the cluster's driver is the one it came up
    # with, and the control plane processes are the same ones.
    kube = Client(KubeConfig.from_file(kubeconfig), field_manager="csi-harness-tests")
    default = LocalClusterConfig().driver
    assert allocatable_counts(kube, default.name) == {
        "node-1": default.max_volumes_per_node,
        "node-2": default.max_volumes_per_node,
    }

    def only_the_default_registered() -> tuple[bool, set[str]]:
        names = {d["name"] for c in kube.list(CSINodeResource) for d in csinode_drivers(c)}
        return names == {default.name}, names

    # The suites' drivers were stopped; their kubelets (simulated or not) drop their
    # CSINode entries when the registration sockets go.
    wait_for("only the cluster's driver in CSINode", only_the_default_registered, timeout=30)
    # ... and their topology labels were taken off the nodes (the kubelets never do).
    left = {
        key
        for node in kube.list(Node)
        for key in ((node.metadata.labels if node.metadata else None) or {})
        if re.match(r"topology\.d[0-9a-f]{6}\.csi-mock/", key)
    }
    assert left == set(), left
    after = RunState.load(kubeconfig.parent)
    assert after is not None
    for name in ("etcd", "kube-apiserver", "kube-scheduler", "kubelet-node-1"):
        assert after.processes[name].pid == before.processes[name].pid, name
    assert after.config["driver"] == before.config["driver"]


@pytest.mark.scenario(FEATURE, "--csi-cluster existing without a running cluster: usage error")
def test_existing_without_a_running_cluster_is_a_usage_error(tmp_path: Path) -> None:
    run = run_pytest(
        "--csi-cluster=existing",
        f"--csi-kubeconfig={tmp_path / 'kubeconfig'}",
        "tests/e2e/test_volume_limits.py",
    )
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]  # pytest usage error
    assert "no local cluster here" in run.stderr
