import tomllib
from pathlib import Path
from typing import Any

import pytest

from csi_harness._internal.core.tools import Tools
from csi_harness._internal.providers.local.components import (
    PAUSE_IMAGE,
    Layout,
    PodNetwork,
    apiserver_argv,
    containerd_config,
    controller_manager_argv,
    etcd_argv,
    kubelet_configuration,
    scheduler_argv,
    scheduler_configuration,
    snapshot_controller_argv,
)
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig
from csi_harness._internal.providers.local.pki import ClusterPKI, KeyPair

PORTS = {
    "etcd": 2379,
    "etcd-peer": 2380,
    "apiserver": 6443,
    "controller-manager": 10257,
    "scheduler": 10259,
    "snapshot-controller": 10260,
    "kubelet-node-1": 10250,
    "kubelet-healthz-node-1": 10248,
}
SHIM_SOCKET_DIR_MAX = 42
"""containerd refuses a shim socket directory longer than this."""


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path / "run")


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    return Tools(tmp_path / "bin")


@pytest.fixture
def pki(layout: Layout) -> ClusterPKI:
    def pair(stem: str) -> KeyPair:
        return KeyPair(layout.pki / f"{stem}.crt", layout.pki / f"{stem}.key")

    return ClusterPKI(
        ca=pair("ca"),
        apiserver=pair("apiserver"),
        service_account_key=layout.pki / "service-account.key",
        service_account_pub=layout.pki / "service-account.pub",
        clients={"apiserver-kubelet-client": pair("apiserver-kubelet-client")},
    )


def flag(argv: list[str], name: str) -> list[str]:
    """Values of every ``--name=value`` in argv."""
    prefix = f"--{name}="
    return [arg[len(prefix) :] for arg in argv if arg.startswith(prefix)]


def control_plane_argvs(
    config: LocalClusterConfig, tools: Tools, layout: Layout, pki: ClusterPKI
) -> dict[Component, list[str]]:
    return {
        Component.APISERVER: apiserver_argv(tools, config, pki, PORTS),
        Component.CONTROLLER_MANAGER: controller_manager_argv(tools, config, layout, pki, PORTS),
        Component.SCHEDULER: scheduler_argv(tools, config, layout, PORTS),
    }


# -- loopback only ------------------------------------------------------------------


def test_etcd_listens_and_advertises_on_loopback_only(tools: Tools, layout: Layout) -> None:
    argv = etcd_argv(tools, layout, PORTS)
    for name in (
        "listen-client-urls",
        "advertise-client-urls",
        "listen-peer-urls",
        "initial-advertise-peer-urls",
    ):
        (value,) = flag(argv, name)
        assert value.startswith("http://127.0.0.1:"), name
    assert flag(argv, "listen-client-urls") == ["http://127.0.0.1:2379"]
    assert flag(argv, "listen-peer-urls") == ["http://127.0.0.1:2380"]


def test_etcd_keeps_its_data_under_the_run_dir(tools: Tools, layout: Layout) -> None:
    assert flag(etcd_argv(tools, layout, PORTS), "data-dir") == [str(layout.etcd)]


def test_apiserver_binds_and_advertises_loopback_and_uses_local_etcd(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    argv = apiserver_argv(tools, LocalClusterConfig(), pki, PORTS)
    assert flag(argv, "bind-address") == ["127.0.0.1"]
    assert flag(argv, "advertise-address") == ["127.0.0.1"]
    assert flag(argv, "etcd-servers") == ["http://127.0.0.1:2379"]
    assert flag(argv, "secure-port") == ["6443"]


@pytest.mark.parametrize("component", [Component.CONTROLLER_MANAGER, Component.SCHEDULER])
def test_controller_manager_and_scheduler_bind_loopback(
    tools: Tools, layout: Layout, pki: ClusterPKI, component: Component
) -> None:
    argv = control_plane_argvs(LocalClusterConfig(), tools, layout, pki)[component]
    assert flag(argv, "bind-address") == ["127.0.0.1"]


def test_controller_manager_runs_the_selinux_warning_controller_and_serves_metrics(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    argv = control_plane_argvs(LocalClusterConfig(), tools, layout, pki)[
        Component.CONTROLLER_MANAGER
    ]
    assert flag(argv, "controllers") == ["*,selinux-warning-controller"]
    (allowed,) = flag(argv, "authorization-always-allow-paths")
    assert "/metrics" in allowed.split(",")


def test_snapshot_controller_serves_its_metrics_on_loopback(tools: Tools, layout: Layout) -> None:
    argv = snapshot_controller_argv(tools, layout, PORTS)
    assert flag(argv, "http-endpoint") == ["127.0.0.1:10260"]


# -- feature gates ------------------------------------------------------------------


def test_no_feature_gates_flag_when_none_are_set(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    for argv in control_plane_argvs(LocalClusterConfig(), tools, layout, pki).values():
        assert not flag(argv, "feature-gates")


def test_feature_gates_are_passed_sorted_as_name_equals_bool(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    config = LocalClusterConfig(feature_gates={"B": False, "A": True})
    for argv in control_plane_argvs(config, tools, layout, pki).values():
        assert flag(argv, "feature-gates") == ["A=true,B=false"]


def test_component_feature_gates_override_the_common_ones_for_that_component_only(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    config = LocalClusterConfig(
        feature_gates={"A": True},
        component_feature_gates={Component.SCHEDULER: {"A": False, "C": True}},
    )
    argvs = control_plane_argvs(config, tools, layout, pki)
    assert flag(argvs[Component.SCHEDULER], "feature-gates") == ["A=false,C=true"]
    assert flag(argvs[Component.APISERVER], "feature-gates") == ["A=true"]
    assert flag(argvs[Component.CONTROLLER_MANAGER], "feature-gates") == ["A=true"]


def test_component_feature_gates_alone_set_the_flag_on_that_component_only(
    tools: Tools, layout: Layout, pki: ClusterPKI
) -> None:
    config = LocalClusterConfig(component_feature_gates={Component.APISERVER: {"X": True}})
    argvs = control_plane_argvs(config, tools, layout, pki)
    assert flag(argvs[Component.APISERVER], "feature-gates") == ["X=true"]
    assert not flag(argvs[Component.SCHEDULER], "feature-gates")
    assert not flag(argvs[Component.CONTROLLER_MANAGER], "feature-gates")


# -- scheduler configuration --------------------------------------------------------


def test_scheduler_configuration_without_caller_settings_is_the_base(layout: Layout) -> None:
    doc = scheduler_configuration(LocalClusterConfig(), layout)
    assert doc == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.component_kubeconfig("kube-scheduler"))},
        "leaderElection": {"leaderElect": False},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
    }


def test_scheduler_configuration_takes_the_callers_profiles(layout: Layout) -> None:
    profiles = [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {
                    "name": "VolumeBinding",
                    "args": {"bindTimeoutSeconds": 30, "shape": [{"utilization": 0}]},
                }
            ],
        }
    ]
    doc = scheduler_configuration(LocalClusterConfig(scheduler={"profiles": profiles}), layout)
    assert doc["profiles"] == profiles
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["leaderElection"] == {"leaderElect": False}


def test_scheduler_configuration_deep_merges_and_keeps_the_kubeconfig(layout: Layout) -> None:
    caller = {"clientConnection": {"qps": 100}, "leaderElection": {"leaseDuration": "30s"}}
    doc = scheduler_configuration(LocalClusterConfig(scheduler=caller), layout)
    assert doc["clientConnection"] == {
        "kubeconfig": str(layout.component_kubeconfig("kube-scheduler")),
        "qps": 100,
    }
    assert doc["leaderElection"] == {"leaderElect": False, "leaseDuration": "30s"}


def test_scheduler_configuration_does_not_change_the_callers_dict(layout: Layout) -> None:
    config = LocalClusterConfig(scheduler={"clientConnection": {"qps": 100}})
    doc = scheduler_configuration(config, layout)
    doc["clientConnection"]["qps"] = 1
    assert config.scheduler == {"clientConnection": {"qps": 100}}


# -- kubelet configuration ----------------------------------------------------------


@pytest.fixture
def kubelet_doc(layout: Layout, pki: ClusterPKI) -> dict[str, Any]:
    return kubelet_configuration(
        LocalClusterConfig(),
        layout,
        pki,
        "node-1",
        PORTS,
        "/csi-harness/test",
        PodNetwork.for_cluster("csi-harness"),
    )


def test_kubelet_configuration_runs_on_cgroup_v1_with_cgroupfs(kubelet_doc: dict[str, Any]) -> None:
    assert kubelet_doc["failCgroupV1"] is False
    assert kubelet_doc["cgroupDriver"] == "cgroupfs"


def test_kubelet_configuration_uses_the_given_cgroup_root(kubelet_doc: dict[str, Any]) -> None:
    assert kubelet_doc["cgroupRoot"] == "/csi-harness/test"


def test_kubelet_listens_on_the_pod_networks_node_ip(kubelet_doc: dict[str, Any]) -> None:
    network = PodNetwork.for_cluster("csi-harness")
    assert kubelet_doc["address"] == network.node_ip
    assert kubelet_doc["healthzBindAddress"] == "127.0.0.1"
    assert kubelet_doc["readOnlyPort"] == 0


def test_kubelet_configuration_has_feature_gates_only_when_set(
    layout: Layout, pki: ClusterPKI, kubelet_doc: dict[str, Any]
) -> None:
    assert "featureGates" not in kubelet_doc
    config = LocalClusterConfig(
        feature_gates={"A": True}, component_feature_gates={Component.KUBELET: {"B": False}}
    )
    network = PodNetwork.for_cluster("csi-harness")
    doc = kubelet_configuration(config, layout, pki, "node-1", PORTS, "/x", network)
    assert doc["featureGates"] == {"A": True, "B": False}


# -- containerd ---------------------------------------------------------------------


def parse_containerd(tools: Tools, layout: Layout, node: str = "node-1") -> dict[str, Any]:
    return tomllib.loads(containerd_config(tools, layout, node))


def paths_in(value: object) -> list[str]:
    """Every string in a parsed config that looks like an absolute path."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in paths_in(v)]
    if isinstance(value, list):
        return [p for v in value for p in paths_in(v)]
    return [value] if isinstance(value, str) and value.startswith("/") else []


def test_containerd_config_is_valid_toml_version_3(tools: Tools, layout: Layout) -> None:
    assert parse_containerd(tools, layout)["version"] == 3


def test_containerd_config_paths_are_under_the_run_dir_tools_dir_or_shim_dir(
    tools: Tools, layout: Layout
) -> None:
    config = parse_containerd(tools, layout)
    shim_dir = str(layout.shim_socket_dir("node-1"))
    paths = paths_in(config)
    assert len(paths) >= 8
    outside = [
        p
        for p in paths
        if not Path(p).is_relative_to(layout.root)
        and not Path(p).is_relative_to(tools.bin_dir)
        and p != shim_dir
    ]
    assert outside == []
    assert config["root"] == str(layout.containerd_dir("node-1") / "root")
    assert config["state"] == str(layout.containerd_dir("node-1") / "state")
    assert config["grpc"]["address"] == str(layout.containerd_socket("node-1"))


def test_containerd_config_puts_shim_sockets_in_the_short_shim_dir(
    tools: Tools, layout: Layout
) -> None:
    manager = parse_containerd(tools, layout)["plugins"]["io.containerd.shim.v1.manager"]
    assert manager["socket_dir"] == str(layout.shim_socket_dir("node-1"))


def test_shim_socket_dir_fits_containerds_limit_for_a_long_run_dir(tmp_path: Path) -> None:
    layout = Layout(tmp_path / ("a-very-long-directory-name-" * 8) / "run")
    shim_dir = layout.shim_socket_dir("node-with-a-rather-long-name-1")
    assert len(str(shim_dir)) <= SHIM_SOCKET_DIR_MAX


def test_shim_socket_dirs_differ_per_node_and_per_run_dir(tmp_path: Path) -> None:
    one, two = Layout(tmp_path / "one"), Layout(tmp_path / "two")
    dirs = {
        one.shim_socket_dir("node-1"),
        one.shim_socket_dir("node-2"),
        two.shim_socket_dir("node-1"),
    }
    assert len(dirs) == 3


def test_containerd_config_restricts_oom_score_adj(tools: Tools, layout: Layout) -> None:
    runtime = parse_containerd(tools, layout)["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True


def test_containerd_config_pins_the_local_pause_image(tools: Tools, layout: Layout) -> None:
    images = parse_containerd(tools, layout)["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == PAUSE_IMAGE


def test_containerd_config_runs_runc_from_the_tools_dir(tools: Tools, layout: Layout) -> None:
    runtime = parse_containerd(tools, layout)["plugins"]["io.containerd.cri.v1.runtime"]
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"]["BinaryName"] == tools["runc"]
    assert runc["options"]["SystemdCgroup"] is False


# -- pod network --------------------------------------------------------------------


def test_pod_network_is_the_same_for_the_same_cluster_name() -> None:
    assert PodNetwork.for_cluster("csi-harness") == PodNetwork.for_cluster("csi-harness")


def test_pod_network_differs_for_the_default_cli_and_e2e_cluster_names() -> None:
    cli, e2e = PodNetwork.for_cluster("csi-harness"), PodNetwork.for_cluster("csi-harness-e2e")
    assert cli.bridge != e2e.bridge
    assert cli.cidr != e2e.cidr


def test_pod_networks_of_different_names_mostly_have_different_subnets() -> None:
    networks = [PodNetwork.for_cluster(f"cluster-{i}") for i in range(20)]
    assert len({n.bridge for n in networks}) == 20
    # 256 possible subnets: a few birthday collisions among 20 names are expected.
    assert len({n.cidr for n in networks}) >= 17


def test_pod_network_bridge_name_fits_a_linux_interface_name() -> None:
    for name in ("a", "csi-harness", "x" * 32):
        assert len(PodNetwork.for_cluster(name).bridge) <= 15


def test_pod_network_node_ip_is_the_gateway_of_its_subnet() -> None:
    network = PodNetwork.for_cluster("csi-harness")
    prefix = network.cidr.removesuffix("0/24")
    assert network.node_ip == prefix + "1"
    assert 0 <= network.subnet_index <= 255


def test_the_kubelet_root_is_in_the_run_dir_unless_given(tmp_path: Path) -> None:
    inside = Layout(tmp_path / "run")
    given = Layout(tmp_path / "run", Path("/var/lib/kubelet"))

    assert inside.kubelet_root("node-1") == tmp_path / "run" / "node-1" / "kubelet"
    assert given.kubelet_root("node-1") == Path("/var/lib/kubelet")
    assert given.plugins_registry("node-1") == Path("/var/lib/kubelet/plugins_registry")
