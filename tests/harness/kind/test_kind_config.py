"""The kind configurations (kind-config/): the node layout, and the capacity-scoring
variant's scheduler wiring, whose KubeSchedulerConfiguration the pinned kube-scheduler
accepts."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from csi_harness._internal.core.package_data import KIND_CONFIG_DIR
from csi_harness._internal.core.tools import Tools, ToolsMissing

SCHEDULER_CONFIG = KIND_CONFIG_DIR / "scheduler-capacity-scoring.yaml"
ZONE_LABEL = "topology.kubernetes.io/zone"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((KIND_CONFIG_DIR / name).read_text())
    return data


def scheduler_patch() -> dict[str, Any]:
    patches = [yaml.safe_load(p) for p in load("capacity-scoring.yaml")["kubeadmConfigPatches"]]
    (patch,) = [p for p in patches if p["kind"] == "ClusterConfiguration"]
    scheduler: dict[str, Any] = patch["scheduler"]
    return scheduler


def volume_binding_args() -> dict[str, Any]:
    (profile,) = yaml.safe_load(SCHEDULER_CONFIG.read_text())["profiles"]
    (plugin,) = [p for p in profile["pluginConfig"] if p["name"] == "VolumeBinding"]
    args: dict[str, Any] = plugin["args"]
    return args


@pytest.mark.parametrize("name", ["two-nodes.yaml", "capacity-scoring.yaml"])
def test_one_control_plane_and_two_workers_in_different_zones(name: str) -> None:
    config = load(name)
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    roles = [node["role"] for node in config["nodes"]]
    assert roles == ["control-plane", "worker", "worker"]
    zones = [node.get("labels", {}).get(ZONE_LABEL) for node in config["nodes"][1:]]
    assert None not in zones and len(set(zones)) == 2


@pytest.mark.parametrize("name", ["two-nodes.yaml", "capacity-scoring.yaml", "suites.yaml"])
def test_no_default_cni_and_the_kubelet_accepts_cgroup_v1(name: str) -> None:
    config = load(name)
    assert config["networking"]["disableDefaultCNI"] is True
    patches = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    (kubelet,) = [p for p in patches if p["kind"] == "KubeletConfiguration"]
    assert kubelet["failCgroupV1"] is False


def test_capacity_scoring_has_the_same_nodes_as_two_nodes_apart_from_the_mount() -> None:
    plain = load("two-nodes.yaml")["nodes"]
    scoring = [
        {k: v for k, v in n.items() if k != "extraMounts"}
        for n in load("capacity-scoring.yaml")["nodes"]
    ]
    assert scoring == plain


def test_capacity_scoring_turns_the_gate_on_for_the_scheduler() -> None:
    args = {a["name"]: a["value"] for a in scheduler_patch()["extraArgs"]}
    assert args["feature-gates"] == "StorageCapacityScoring=true"


def test_capacity_scoring_mounts_the_scheduler_config_where_the_flag_points() -> None:
    scheduler = scheduler_patch()
    config_path = {a["name"]: a["value"] for a in scheduler["extraArgs"]}["config"]
    (volume,) = scheduler["extraVolumes"]
    assert volume["hostPath"] == volume["mountPath"] == config_path
    (mount,) = load("capacity-scoring.yaml")["nodes"][0]["extraMounts"]
    assert mount["containerPath"] == config_path
    # Relative to the directory the provider runs kind in (the config's own).
    assert (KIND_CONFIG_DIR / mount["hostPath"]).resolve() == SCHEDULER_CONFIG


def test_scheduler_config_uses_the_kubeconfig_kubeadm_writes() -> None:
    config = yaml.safe_load(SCHEDULER_CONFIG.read_text())
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_shape_prefers_the_fullest_node_unlike_the_default() -> None:
    shape = volume_binding_args()["shape"]
    points = [(p["utilization"], p["score"]) for p in shape]
    assert points == sorted(points)
    assert all(0 <= u <= 100 and 0 <= s <= 10 for u, s in points)
    assert points != [(0, 10), (100, 0)]  # the scheduler's default
    assert points[0][1] < points[-1][1]


def test_pinned_kube_scheduler_accepts_the_configuration(tmp_path: Path) -> None:
    try:
        scheduler = Tools.locate()["kube-scheduler"]
    except ToolsMissing as exc:
        pytest.skip(f"kube-scheduler not built: {exc}")
    kubeconfig = tmp_path / "scheduler.conf"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    config = yaml.safe_load(SCHEDULER_CONFIG.read_text())
    config["clientConnection"]["kubeconfig"] = str(kubeconfig)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    written = tmp_path / "written.yaml"
    result = subprocess.run(
        [
            scheduler,
            f"--config={tmp_path / 'config.yaml'}",
            "--feature-gates=StorageCapacityScoring=true",
            f"--write-config-to={written}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (profile,) = yaml.safe_load(written.read_text())["profiles"]
    (plugin,) = [p for p in profile["pluginConfig"] if p["name"] == "VolumeBinding"]
    assert plugin["args"]["shape"] == volume_binding_args()["shape"]


def test_the_suites_cluster_has_a_zone_with_two_workers_and_another_zone() -> None:
    nodes = load("suites.yaml")["nodes"]
    assert [n["role"] for n in nodes] == ["control-plane", "worker", "worker", "worker"]
    zones = [n["labels"][ZONE_LABEL] for n in nodes[1:]]
    assert sorted(zones.count(z) for z in set(zones)) == [1, 2]


def test_the_suites_cluster_runs_the_selinux_warning_controller_with_readable_metrics() -> None:
    """Both kubeadm API versions' patches turn the controller on, allow /metrics without
    credentials and listen where the pod proxy reaches (kind applies the one it writes)."""
    patches = [yaml.safe_load(p) for p in load("suites.yaml")["kubeadmConfigPatches"]]
    clusters = {p["apiVersion"]: p for p in patches if p["kind"] == "ClusterConfiguration"}
    assert sorted(clusters) == ["kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"]
    by_version = {
        "kubeadm.k8s.io/v1beta3": clusters["kubeadm.k8s.io/v1beta3"]["controllerManager"][
            "extraArgs"
        ],
        "kubeadm.k8s.io/v1beta4": {
            arg["name"]: arg["value"]
            for arg in clusters["kubeadm.k8s.io/v1beta4"]["controllerManager"]["extraArgs"]
        },
    }
    gates = ",".join(
        f"{k}={str(v).lower()}" for k, v in load("suites.yaml")["featureGates"].items()
    )
    assert by_version["kubeadm.k8s.io/v1beta4"]["feature-gates"] == gates
    for args in by_version.values():
        assert "selinux-warning-controller" in args["controllers"].split(",")
        assert "/metrics" in args["authorization-always-allow-paths"].split(",")
        assert args["bind-address"] == "0.0.0.0"
