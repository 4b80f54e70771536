"""LocalCluster as a ``csi_harness._internal.providers.base.Cluster``: its nodes, scheduler gates
and
configuration, logs and driver instances, read from its configuration."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from lightkube import Client

from csi_harness._internal.core.processes import Supervisor
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import (
    ClusterNode,
    ComponentMetrics,
    ConfiguredFeatureGates,
    FeatureGates,
    ImageDeployments,
    KubeletRestarts,
    SchedulerRestarts,
    Unsupported,
)
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig


def local_cluster(tmp_path: Path, **fields: object) -> LocalCluster:
    config = LocalClusterConfig.model_validate({"run_dir": tmp_path / "run", **fields})
    return LocalCluster(config, progress=lambda _: None)


def test_nodes_are_the_configured_ones_and_only_the_kubelet_node_runs_pods(
    tmp_path: Path,
) -> None:
    cluster = local_cluster(tmp_path, simulated_nodes=3, zones=["zone-a", "zone-b"])
    assert cluster.nodes() == [
        ClusterNode("node-1", "zone-a", runs_pods=True),
        ClusterNode("node-2", "zone-b", runs_pods=False),
        ClusterNode("node-3", "zone-a", runs_pods=False),
        ClusterNode("node-4", "zone-b", runs_pods=False),
    ]


def test_nodes_without_zones_have_none(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, simulated_nodes=1, zones=[])
    assert [(n.name, n.zone) for n in cluster.nodes()] == [("node-1", None), ("node-2", None)]


def test_nodes_are_sorted_by_name(tmp_path: Path) -> None:
    names = [n.name for n in local_cluster(tmp_path, simulated_nodes=10).nodes()]
    assert names == sorted(f"node-{i}" for i in range(1, 12))
    assert names[:3] == ["node-1", "node-10", "node-11"]


def test_a_cluster_of_one_kubelet_has_no_simulated_node(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, simulated_nodes=0)
    assert [n.runs_pods for n in cluster.nodes()] == [True]


def test_scheduler_feature_gate_is_what_the_scheduler_is_started_with(tmp_path: Path) -> None:
    cluster = local_cluster(
        tmp_path,
        feature_gates={"StorageCapacityScoring": True, "Other": True},
        component_feature_gates={Component.SCHEDULER: {"StorageCapacityScoring": False}},
    )
    assert cluster.scheduler_feature_gate("StorageCapacityScoring") is False
    assert cluster.scheduler_feature_gate("Other") is True
    assert cluster.scheduler_feature_gate("NotSet") is None


def test_scheduler_config_is_a_copy_of_the_configured_one(tmp_path: Path) -> None:
    shape = {"profiles": [{"schedulerName": "default-scheduler"}]}
    cluster = local_cluster(tmp_path, scheduler=shape)
    config = cluster.scheduler_config
    assert config == shape
    config["profiles"] = []
    assert cluster.scheduler_config == shape


def test_name_and_logs_are_the_run_directorys(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, name="mine")
    assert cluster.name == "mine"
    assert cluster.log_dir == tmp_path / "run" / "logs"
    assert cluster.kubeconfig == tmp_path / "run" / "kubeconfig"


def test_without_a_driver_there_are_no_admin_instances(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path, driver=DriverDeployment(max_volumes_per_node=3))
    assert cluster.driver is None
    assert cluster.admin_instances() == {}
    assert cluster.default_driver.max_volumes_per_node == 3


def test_restarting_the_kubelet_of_a_simulated_node_is_unsupported(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    # As brought up: the run state records a kubelet process for node-1 only.
    cluster._supervisor = Supervisor(RunState(run_dir=tmp_path / "run"), tmp_path / "logs")
    cluster.kube = cast(Client, object())
    with pytest.raises(Unsupported, match="node 'node-2' of cluster 'csi-harness' runs no kubelet"):
        cluster.restart_kubelet("node-2")


def test_a_local_cluster_has_every_capability_but_images(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    for capability in (
        SchedulerRestarts,
        KubeletRestarts,
        ComponentMetrics,
        FeatureGates,
        ConfiguredFeatureGates,
    ):
        assert isinstance(cluster, capability), capability.__name__
    assert not isinstance(cluster, ImageDeployments)
