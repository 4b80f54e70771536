"""LocalCluster.attach: a second process takes over a running local cluster from its
run directory, or says exactly why it cannot."""

import os
from pathlib import Path

import pytest

from csi_harness._internal.core.processes import process_start_time
from csi_harness._internal.core.run_state import ProcessRecord, RunState
from csi_harness._internal.core.tools import REQUIRED
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.local.cluster import ClusterNotRunning, LocalCluster
from csi_harness._internal.providers.local.config import LocalClusterConfig

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def tools_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in REQUIRED:
        (bin_dir / name).touch()
    return bin_dir


def running_cluster(tmp_path: Path, tools_bin: Path, **changes: object) -> RunState:
    """A run directory as `csi-harness cluster up` leaves it, with this test process
    standing in for the cluster's processes."""
    config = LocalClusterConfig(
        name="attached",
        run_dir=tmp_path / "run",
        simulated_nodes=3,
        tools_bin=tools_bin,
        driver=DriverDeployment(max_volumes_per_node=7),
    )
    root = config.effective_run_dir
    root.mkdir()
    (root / "kubeconfig").write_text(KUBECONFIG)
    me = os.getpid()
    state = RunState(
        run_dir=root,
        cluster=config.name,
        phase="ready",
        processes={
            "etcd": ProcessRecord("etcd", me, process_start_time(me) or 0, ["etcd"], "etcd.log")
        },
        config=config.model_dump(mode="json"),
    )
    for key, value in changes.items():
        setattr(state, key, value)
    state.save()
    return state


def test_attach_restores_the_configuration_the_cluster_runs_with(
    tmp_path: Path, tools_bin: Path
) -> None:
    state = running_cluster(tmp_path, tools_bin)
    cluster = LocalCluster.attach(state.run_dir, progress=lambda _: None)
    assert cluster.attached
    assert cluster.config.name == "attached"
    assert [n.name for n in cluster.config.nodes()] == ["node-1", "node-2", "node-3", "node-4"]
    assert cluster.default_driver.max_volumes_per_node == 7
    assert cluster.driver is not None
    assert [n.name for n in cluster.driver.nodes] == ["node-1", "node-2", "node-3", "node-4"]
    assert cluster.kubeconfig == state.run_dir / "kubeconfig"


def test_attach_to_a_directory_without_a_cluster_says_so(tmp_path: Path) -> None:
    with pytest.raises(ClusterNotRunning, match="no local cluster here"):
        LocalCluster.attach(tmp_path)


@pytest.mark.parametrize("phase", ["starting", "failed", "stopping"])
def test_attach_refuses_a_cluster_that_is_not_ready(
    tmp_path: Path, tools_bin: Path, phase: str
) -> None:
    state = running_cluster(tmp_path, tools_bin, phase=phase)
    with pytest.raises(ClusterNotRunning, match=f"is '{phase}', not ready.*cluster up"):
        LocalCluster.attach(state.run_dir)


def test_attach_names_the_processes_that_stopped(tmp_path: Path, tools_bin: Path) -> None:
    gone = ProcessRecord("kube-scheduler", 2**22 + 1, 1, ["kube-scheduler"], "s.log")
    state = running_cluster(tmp_path, tools_bin)
    state.processes["kube-scheduler"] = gone
    state.save()
    with pytest.raises(ClusterNotRunning, match="stopped processes: kube-scheduler"):
        LocalCluster.attach(state.run_dir)


def test_attach_refuses_a_run_state_without_configuration(tmp_path: Path, tools_bin: Path) -> None:
    state = running_cluster(tmp_path, tools_bin, config={})
    with pytest.raises(ClusterNotRunning, match="no configuration"):
        LocalCluster.attach(state.run_dir)


def test_attached_cluster_gives_an_admin_client_per_instance_of_its_driver(
    tmp_path: Path, tools_bin: Path
) -> None:
    state = running_cluster(tmp_path, tools_bin)
    cluster = LocalCluster.attach(state.run_dir, progress=lambda _: None)
    assert cluster.driver is not None
    assert [n.runs_pods for n in cluster.driver.nodes] == [True, False, False, False]
    clients = cluster.admin_instances()
    try:
        assert list(clients) == ["controller", "node-1", "node-2", "node-3", "node-4"]
        socket = state.run_dir / "driver" / "node-2" / "admin.sock"
        assert clients["node-2"].endpoint.socket == str(socket)
    finally:
        for client in clients.values():
            client.close()
