"""The objects of an in-cluster deployment: csi-mock accepts every configuration they
carry, each node finds its own, sockets and state are where the other side looks for
them, and every component named by the Driver interface is a workload that exists."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import codecs

from csi_harness._internal.deploy.incluster_layout import INSTANCE_LABEL, deployment_components
from csi_harness._internal.deploy.incluster_objects import cluster_scoped_objects, render_objects
from csi_harness._internal.deploy.incluster_workloads import excluding_nodes
from csi_harness._internal.deploy.spec import (
    DRIVER_NAMESPACE,
    NODE_TOPOLOGY_KEY,
    ZONE_TOPOLOGY_KEY,
    DriverDeployment,
)
from csi_harness._internal.providers.base import ClusterNode
from csi_mock.config import DriverConfig, Mode, validate_config

NODES = [ClusterNode("worker2", "zone-b", True), ClusterNode("worker", "zone-a", True)]
SIDECAR_IMAGES = {
    "csi-provisioner": "csi-mock.local/csi-provisioner:v6.3.0",
    "csi-attacher": "csi-mock.local/csi-attacher:v4.13.0",
    "csi-resizer": "csi-mock.local/csi-resizer:v2.3.0",
    "csi-snapshotter": "csi-mock.local/csi-snapshotter:v8.7.0",
}
IMAGE = "csi-mock.local/csi-mock:dev"
TOKEN = "admin-token-0123456789abcdef"


def render(generation: str = "7-abc", **fields: Any) -> list[dict[str, Any]]:
    return render_objects(
        DriverDeployment(**fields),
        NODES,
        image=IMAGE,
        sidecar_images=SIDECAR_IMAGES,
        admin_token=TOKEN,
        generation=generation,
    )


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    return found


def workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        f"{o['kind']}/{o['metadata']['name']}": o
        for o in objects
        if o["kind"] in ("Deployment", "DaemonSet")
    }


def configs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    data = find(objects, "ConfigMap", "csi-mock-config")["data"]
    return {key: yaml.safe_load(text) for key, text in data.items()}


def volume(workload: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [v for v in pod_spec(workload)["volumes"] if v["name"] == name]
    return found


def mount_path(cont: dict[str, Any], volume_name: str) -> str:
    (found,) = [m["mountPath"] for m in cont["volumeMounts"] if m["name"] == volume_name]
    return str(found)


def allowed_nodes(workload: dict[str, Any]) -> set[str]:
    """The nodes the workload's required node affinity admits (metadata.name fields)."""
    terms = pod_spec(workload)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]

    def admits(term: dict[str, Any], node: str) -> bool:
        for requirement in term["matchFields"]:
            assert requirement["key"] == "metadata.name"
            assert len(requirement["values"]) == 1  # the API allows one value here
            inside = node in requirement["values"]
            if inside != (requirement["operator"] == "In"):
                return False
        return True

    return {n.name for n in NODES if any(admits(t, n.name) for t in terms)}


def flag(args: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"{name}=")]
    return value


# -- what is deployed ------------------------------------------------------------------


def test_central_deployment_runs_controller_sidecars_and_node_plugin() -> None:
    objects = render()
    assert sorted(workloads(objects)) == [
        "DaemonSet/csi-mock-node",
        "Deployment/csi-mock-controller",
    ]
    controller = pod_spec(find(objects, "Deployment", "csi-mock-controller"))
    assert [c["name"] for c in controller["containers"]] == [
        "csi-mock",
        "csi-provisioner",
        "csi-attacher",
        "csi-resizer",
    ]
    # csi-mock pauses the sidecars it is told of (stop_component), in this namespace.
    assert controller["shareProcessNamespace"] is True
    admin = configs(objects)["controller.yaml"]["admin"]
    assert admin["neighbours"] == ["csi-provisioner", "csi-attacher", "csi-resizer"]


def test_the_controllers_containers_share_its_network_and_each_listens_on_its_own_port() -> None:
    workload = find(render(snapshots="used"), "Deployment", "csi-mock-controller")
    ports = [(c["name"], p) for c in pod_spec(workload)["containers"] for p in c.get("ports", [])]
    assert len({p["containerPort"] for _, p in ports}) == len(ports) == 5
    assert len({p["name"] for _, p in ports}) == len(ports)
    for name, port in ports:
        if name == "csi-mock":
            continue
        sidecar = container(workload, name)
        assert flag(sidecar["args"], "--http-endpoint") == f":{port['containerPort']}"
        assert sidecar["readinessProbe"]["httpGet"]["port"] == port["containerPort"]


def test_a_deployment_with_snapshots_runs_csi_snapshotter_and_has_its_snapshot_class() -> None:
    spec = DriverDeployment(**own("a", snapshots="used", clones=True))
    objects = render(**own("a", snapshots="used", clones=True))
    workload = find(objects, "Deployment", "csi-mock-controller")
    args = container(workload, "csi-snapshotter")["args"]
    assert flag(args, "--leader-election") == "false"
    assert flag(args, "--csi-address") == "/csi/csi.sock"
    assert "csi-snapshotter" in configs(objects)["controller.yaml"]["admin"]["neighbours"]
    (snapshot_class,) = [o for o in objects if o["kind"] == "VolumeSnapshotClass"]
    assert (snapshot_class["metadata"]["name"], snapshot_class["driver"]) == (
        "csi-mock-a",
        "a.csi-mock",
    )
    assert snapshot_class["metadata"]["labels"][INSTANCE_LABEL] == "a.csi-mock"
    assert "csi-snapshotter" in deployment_components(spec, ["node-1"])
    controller = configs(objects)["controller.yaml"]["controller"]
    assert (controller["snapshots"], controller["clones"]) == ({"accounting": "used"}, True)


def test_a_deployment_without_snapshots_has_no_snapshotter_or_snapshot_class() -> None:
    objects = render()
    names = [
        c["name"]
        for c in pod_spec(find(objects, "Deployment", "csi-mock-controller"))["containers"]
    ]
    assert "csi-snapshotter" not in names
    assert not [o for o in objects if o["kind"] == "VolumeSnapshotClass"]
    assert "snapshots" not in configs(objects)["controller.yaml"]["controller"]


def test_a_deployment_without_the_resizer_has_no_resizer_workload_or_component() -> None:
    controller = find(render(resizer=False), "Deployment", "csi-mock-controller")
    assert "csi-resizer" not in [c["name"] for c in pod_spec(controller)["containers"]]
    assert "csi-resizer" not in deployment_components(DriverDeployment(resizer=False), ["node-1"])
    assert "csi-resizer" in deployment_components(DriverDeployment(), ["node-1"])


def test_distributed_deployment_has_no_controller_attacher_or_resizer() -> None:
    assert sorted(workloads(render(provisioner_mode="distributed"))) == [
        "DaemonSet/csi-mock-node",
        "DaemonSet/csi-mock-provisioner",
    ]


def test_everything_namespaced_is_in_the_driver_namespace() -> None:
    objects = render()
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {DRIVER_NAMESPACE}
    assert objects[0]["kind"] == "Namespace"
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_every_object_is_a_kubernetes_resource_lightkube_knows() -> None:
    for obj in render() + render(provisioner_mode="distributed"):
        codecs.from_dict(obj)


def test_rbac_comes_from_the_manifests() -> None:
    objects = render()
    find(objects, "ClusterRole", "csi-mock-external-provisioner-runner")
    find(objects, "ClusterRole", "csi-mock-external-attacher-runner")
    find(objects, "ClusterRole", "csi-mock-external-resizer-runner")
    find(objects, "Role", "csi-mock-external-resizer-cfg")
    find(objects, "ServiceAccount", "csi-mock-controller")


def test_csidriver_follows_the_spec() -> None:
    assert find(render(), "CSIDriver", "csi-mock.example")["spec"]["attachRequired"] is False
    attach = find(render(attach_required=True), "CSIDriver", "csi-mock.example")
    assert attach["spec"]["attachRequired"] is True
    assert all(cfg["attach_required"] for cfg in configs(render(attach_required=True)).values())


def test_without_csidriver_no_csidriver_object_is_rendered() -> None:
    objects = render(csidriver=False)
    assert not [o for o in objects if o["kind"] == "CSIDriver"]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "StorageClass"]


def test_storage_classes_name_the_driver() -> None:
    classes = [o for o in render(name="other.example") if o["kind"] == "StorageClass"]
    assert {c["provisioner"] for c in classes} == {"other.example"}


# -- configurations --------------------------------------------------------------------


def parsed_configs(**fields: Any) -> dict[str, DriverConfig]:
    return {key: validate_config(data) for key, data in configs(render(**fields)).items()}


def test_csi_mock_accepts_every_configuration() -> None:
    central = parsed_configs()
    assert sorted(central) == ["controller.yaml", "node-worker.yaml", "node-worker2.yaml"]
    assert central["controller.yaml"].mode is Mode.CONTROLLER
    assert central["node-worker.yaml"].mode is Mode.NODE
    distributed = parsed_configs(provisioner_mode="distributed")
    assert sorted(distributed) == ["node-worker.yaml", "node-worker2.yaml"]
    assert {c.mode for c in distributed.values()} == {Mode.ALL}


def test_each_node_config_has_its_own_id_and_segment() -> None:
    parsed = parsed_configs()
    for node in NODES:
        config = parsed[f"node-{node.name}.yaml"]
        assert config.node.id == node.name
        assert config.node.segment == {NODE_TOPOLOGY_KEY: node.name, ZONE_TOPOLOGY_KEY: node.zone}


def test_node_pod_picks_its_config_by_its_node_name() -> None:
    node = find(render(), "DaemonSet", "csi-mock-node")
    driver = container(node, "csi-mock")
    config_dir = mount_path(driver, "config")
    assert f"--config={config_dir}/node-$(NODE_NAME).yaml" in driver["args"]
    (env,) = [e for e in driver["env"] if e["name"] == "NODE_NAME"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    # The DaemonSet runs only where a configuration exists.
    assert allowed_nodes(node) == {"worker", "worker2"}


def test_distributed_node_config_owns_only_its_own_pool() -> None:
    parsed = parsed_configs(provisioner_mode="distributed")
    pools = {key: [p.segment for p in c.pools] for key, c in parsed.items()}
    assert pools == {
        "node-worker.yaml": [{NODE_TOPOLOGY_KEY: "worker"}],
        "node-worker2.yaml": [{NODE_TOPOLOGY_KEY: "worker2"}],
    }
    assert not any(c.node.materialize_missing_volumes for c in parsed.values())


def test_central_nodes_create_missing_volumes_as_the_controller_keeps_them() -> None:
    parsed = parsed_configs()
    assert parsed["node-worker.yaml"].node.materialize_missing_volumes
    assert len(parsed["node-worker.yaml"].pools) == 2  # the whole topology, as locally


def test_nodes_bind_mount_and_register_themselves_at_the_socket_the_kubelet_sees() -> None:
    objects = render()
    node = find(objects, "DaemonSet", "csi-mock-node")
    driver = container(node, "csi-mock")
    config = validate_config(configs(objects)["node-worker.yaml"])
    assert config.node.mount.value == "bind"
    registration = config.node.registration
    assert registration is not None
    # The CSI socket is in socket-dir; the kubelet must be told the host's path of it.
    socket_dir = mount_path(driver, "socket-dir")
    assert config.socket_path.parent == Path(socket_dir)
    host_socket_dir = volume(node, "socket-dir")["hostPath"]["path"]
    assert registration.kubelet_endpoint == Path(host_socket_dir) / config.socket_path.name
    assert host_socket_dir == "/var/lib/kubelet/plugins/csi-mock.example"
    # The registration socket is created under the kubelet directory, shared both ways.
    (kubelet,) = [m for m in driver["volumeMounts"] if m["name"] == "kubelet-dir"]
    assert kubelet["mountPropagation"] == "Bidirectional"
    assert registration.plugins_registry.is_relative_to(kubelet["mountPath"])
    assert volume(node, "kubelet-dir")["hostPath"]["path"] == kubelet["mountPath"]
    assert driver["securityContext"] == {"privileged": True}


def test_no_registrar_or_livenessprobe_anywhere() -> None:
    for obj in workloads(render()).values():
        for cont in pod_spec(obj)["containers"]:
            assert cont["name"] in ("csi-mock", "csi-provisioner", "csi-attacher", "csi-resizer")
            assert "registrar" not in cont["image"] and "livenessprobe" not in cont["image"]
            assert "livenessProbe" not in cont


def test_every_instance_serves_the_admin_api_on_tcp_with_the_token_file() -> None:
    objects = render()
    secret = find(objects, "Secret", "csi-mock-admin")
    assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN
    for key, config in parsed_configs().items():
        assert config.admin.tcp == "0.0.0.0:9809", key
        assert config.admin.token_file is not None
    for name in ("Deployment/csi-mock-controller", "DaemonSet/csi-mock-node"):
        workload = workloads(objects)[name]
        driver = container(workload, "csi-mock")
        token_dir = mount_path(driver, "admin-token")
        assert volume(workload, "admin-token")["secret"]["secretName"] == "csi-mock-admin"
        for config in parsed_configs().values():
            assert config.admin.token_file == Path(token_dir) / "token"
        assert driver["readinessProbe"]["tcpSocket"]["port"] == 9809


# -- sockets and sidecars --------------------------------------------------------------


def test_central_sidecars_reach_the_controller_socket_in_their_shared_pod() -> None:
    objects = render()
    controller = find(objects, "Deployment", "csi-mock-controller")
    endpoint = validate_config(configs(objects)["controller.yaml"]).socket_path
    assert volume(controller, "socket-dir") == {"name": "socket-dir", "emptyDir": {}}
    for sidecar in ("csi-provisioner", "csi-attacher", "csi-resizer"):
        cont = container(controller, sidecar)
        socket = Path(flag(cont["args"], "--csi-address"))
        assert socket.parent == Path(mount_path(cont, "socket-dir"))
        assert socket.name == endpoint.name
    assert allowed_nodes(controller) == {"worker"}
    assert Path(mount_path(container(controller, "csi-mock"), "socket-dir")) == endpoint.parent


@pytest.mark.parametrize(
    ("fields", "sidecars"),
    [
        (
            {"snapshots": "used", "clones": True},
            {"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"},
        ),
        ({"provisioner_mode": "distributed"}, {"csi-provisioner"}),
    ],
    ids=["central", "distributed"],
)
def test_every_sidecar_is_ready_only_once_its_http_endpoint_serves(
    fields: dict[str, Any], sidecars: set[str]
) -> None:
    # Each sidecar starts its HTTP server after it has reached the driver's socket: the
    # probe keeps the pod (and so the driver) unready while a sidecar still connects.
    containers = [
        cont
        for workload in workloads(render(**fields)).values()
        for cont in pod_spec(workload)["containers"]
        if cont["name"].startswith("csi-") and cont["name"] != "csi-mock"
    ]
    assert {c["name"] for c in containers} == sidecars
    for cont in containers:
        port = int(flag(cont["args"], "--http-endpoint").rpartition(":")[2])
        assert cont["readinessProbe"]["httpGet"] == {"path": "/metrics", "port": port}
        assert [p["containerPort"] for p in cont["ports"]] == [port]


def test_a_provisioner_that_does_not_publish_capacity_says_so() -> None:
    objects = render(publish_capacity=False)
    provisioner = container(find(objects, "Deployment", "csi-mock-controller"), "csi-provisioner")
    assert flag(provisioner["args"], "--enable-capacity") == "false"


def test_central_provisioner_runs_in_cluster_with_the_local_flags() -> None:
    objects = render(capacity_poll_interval="7s")
    provisioner = container(find(objects, "Deployment", "csi-mock-controller"), "csi-provisioner")
    args = provisioner["args"]
    assert not [a for a in args if a.startswith("--kubeconfig")]
    assert flag(args, "--capacity-ownerref-level") == "2"
    assert flag(args, "--capacity-poll-interval") == "7s"
    assert flag(args, "--leader-election") == "false"
    assert flag(args, "--enable-capacity") == "true" and "--strict-topology" in args
    assert "--node-deployment" not in args
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in provisioner["env"]}
    assert env == {"NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}
    assert (
        "--strict-topology"
        not in container(
            find(render(strict_topology=False), "Deployment", "csi-mock-controller"),
            "csi-provisioner",
        )["args"]
    )


def test_central_resizer_runs_in_cluster_with_the_local_flags() -> None:
    workload = find(render(), "Deployment", "csi-mock-controller")
    args = container(workload, "csi-resizer")["args"]
    assert not [a for a in args if a.startswith("--kubeconfig")]
    assert flag(args, "--leader-election") == "false"
    assert flag(args, "--timeout") == "15s"
    # A class change the modify controller dropped comes back within a test's wait.
    assert flag(args, "--resync-period") == "20s"
    # rbac.yaml binds the resizer's roles to this account.
    assert pod_spec(workload)["serviceAccountName"] == "csi-mock-controller"


def test_central_snapshotter_looks_at_every_content_again_within_a_tests_wait() -> None:
    workload = find(render(snapshots="used"), "Deployment", "csi-mock-controller")
    args = container(workload, "csi-snapshotter")["args"]
    # A deletion it saw too early (findings.md) comes back within a test's 60 s.
    assert flag(args, "--resync-period") == "20s"


def test_central_deployments_never_run_twice_at_once() -> None:
    for name, workload in workloads(render()).items():
        if name.startswith("Deployment/"):
            assert workload["spec"]["replicas"] == 1
            assert workload["spec"]["strategy"] == {"type": "Recreate"}


def test_distributed_provisioner_serves_its_own_node_through_the_node_socket() -> None:
    objects = render(provisioner_mode="distributed")
    node = find(objects, "DaemonSet", "csi-mock-node")
    workload = find(objects, "DaemonSet", "csi-mock-provisioner")
    provisioner = container(workload, "csi-provisioner")
    args = provisioner["args"]
    assert "--node-deployment" in args
    assert flag(args, "--node-deployment-immediate-binding") == "false"
    assert flag(args, "--capacity-ownerref-level") == "1"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in provisioner["env"]}
    assert env["NODE_NAME"] == "spec.nodeName"
    assert volume(workload, "socket-dir") == volume(node, "socket-dir")
    assert allowed_nodes(workload) == allowed_nodes(node)
    # The provisioner talks to the API server; the account with its roles is this one.
    assert pod_spec(workload)["serviceAccountName"] == "csi-mock-controller"


def test_images_are_never_pulled_and_are_the_ones_given() -> None:
    for workload in workloads(render()).values():
        spec = pod_spec(workload)
        for cont in spec["containers"] + spec.get("initContainers", []):
            assert cont["imagePullPolicy"] == "IfNotPresent"
            expected = SIDECAR_IMAGES.get(cont["name"], IMAGE)
            assert cont["image"] == expected


def test_missing_sidecar_image_is_named() -> None:
    with pytest.raises(ValueError, match="csi-attacher, csi-resizer"):
        render_objects(
            DriverDeployment(),
            NODES,
            image=IMAGE,
            sidecar_images={"csi-provisioner": "p"},
            admin_token=TOKEN,
            generation="1",
        )
    # Distributed has no attacher and no resizer, so it needs neither image.
    render_objects(
        DriverDeployment(provisioner_mode="distributed"),
        NODES,
        image=IMAGE,
        sidecar_images={"csi-provisioner": "p"},
        admin_token=TOKEN,
        generation="1",
    )


def test_workloads_select_their_own_pods_and_carry_the_driver_name() -> None:
    for workload in workloads(render(name="other.example")).values():
        selector = workload["spec"]["selector"]["matchLabels"]
        template_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector == template_labels == workload["metadata"]["labels"]
        assert template_labels["app.kubernetes.io/name"] == "csi-mock"
        assert template_labels["app.kubernetes.io/instance"] == "other.example"
    roles = [
        w["metadata"]["labels"]["app.kubernetes.io/component"] for w in workloads(render()).values()
    ]
    assert len(roles) == len(set(roles))


# -- state -----------------------------------------------------------------------------


def test_node_state_is_kept_per_generation() -> None:
    first = parsed_configs()  # generation 7-abc
    second = {k: validate_config(v) for k, v in configs(render(generation="8-def")).items()}
    for key in ("node-worker.yaml", "node-worker2.yaml"):
        assert first[key].state_dir != second[key].state_dir
        assert "7-abc" in str(first[key].state_dir)
    node = find(render(), "DaemonSet", "csi-mock-node")
    state_mount = mount_path(container(node, "csi-mock"), "state")
    assert first["node-worker.yaml"].state_dir.is_relative_to(state_mount)
    # ... on the host, under the driver's own directory.
    assert volume(node, "state")["hostPath"]["path"] == "/var/lib/csi-mock/csi-mock.example"


def test_controller_state_lives_and_dies_with_its_pod() -> None:
    objects = render()
    controller = find(objects, "Deployment", "csi-mock-controller")
    assert volume(controller, "state") == {"name": "state", "emptyDir": {}}
    config = validate_config(configs(objects)["controller.yaml"])
    assert config.state_dir == Path(mount_path(container(controller, "csi-mock"), "state"))


def test_node_pod_removes_earlier_generations_state_before_starting(tmp_path: Path) -> None:
    node = find(render(generation="7-abc"), "DaemonSet", "csi-mock-node")
    (init,) = pod_spec(node)["initContainers"]
    state_mount = mount_path(init, "state")
    assert state_mount == mount_path(container(node, "csi-mock"), "state")
    for path in ("6-old/node/state.db", "7-abc/node/state.db", "5-older/controller/csi.sock"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    (tmp_path / "stray-file").write_text("x")
    command = [sys.executable if c == "python3" else c for c in init["command"]]
    command = [str(tmp_path) if c == state_mount else c for c in command]
    subprocess.run(command, check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["7-abc"]
    assert (tmp_path / "7-abc/node/state.db").read_text() == "x"


def test_generation_must_be_one_directory_name() -> None:
    for bad in ("", "..", "a/b", "-x"):
        with pytest.raises(ValueError, match="generation"):
            render(generation=bad)


# -- components ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_every_component_is_a_container_of_a_rendered_workload(mode: str) -> None:
    objects = render(provisioner_mode=mode)
    components = deployment_components(
        DriverDeployment(provisioner_mode=mode), ["worker", "worker2"]
    )
    for component in components.values():
        workload = find(objects, component.workload_kind, component.workload)
        assert (
            workload["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
            == component.role
        )
        container(workload, component.container)
        if component.node is not None:
            assert component.node in allowed_nodes(workload)


def test_components_are_named_as_the_driver_interface_says() -> None:
    central = deployment_components(DriverDeployment(), ["worker", "worker2"])
    assert list(central) == [
        "csi-mock-controller",
        "csi-mock-node-worker",
        "csi-mock-node-worker2",
        "csi-provisioner",
        "csi-attacher",
        "csi-resizer",
    ]
    distributed = deployment_components(
        DriverDeployment(provisioner_mode="distributed"), ["worker", "worker2"]
    )
    assert list(distributed) == [
        "csi-mock-node-worker",
        "csi-mock-node-worker2",
        "csi-provisioner-worker",
        "csi-provisioner-worker2",
    ]


def test_excluding_a_node_takes_only_that_node_out_of_a_daemonset() -> None:
    node = find(render(), "DaemonSet", "csi-mock-node")
    patch = excluding_nodes(["worker", "worker2"], {"worker2"})
    patched = {**node, "spec": {**node["spec"], "template": {**node["spec"]["template"]}}}
    patched["spec"]["template"]["spec"] = {
        **pod_spec(node),
        **patch["spec"]["template"]["spec"],
    }
    assert allowed_nodes(patched) == {"worker"}
    everything = excluding_nodes(["worker", "worker2"], {"worker", "worker2"})
    patched["spec"]["template"]["spec"] = {
        **pod_spec(node),
        **everything["spec"]["template"]["spec"],
    }
    assert allowed_nodes(patched) == set()
    # Still a valid affinity: a term per node, never none.
    assert (
        len(
            everything["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
        )
        == 2
    )


def test_a_controller_host_takes_the_controllers_pod_and_it_tolerates_its_taint() -> None:
    objects = render_objects(
        DriverDeployment(attach_required=True),
        NODES,
        image=IMAGE,
        sidecar_images=SIDECAR_IMAGES,
        admin_token=TOKEN,
        generation="7-abc",
        controller_host="kind-control-plane",
    )
    workload = find(objects, "Deployment", "csi-mock-controller")
    assert allowed_nodes(workload) == set()  # none of the driver's nodes
    terms = pod_spec(workload)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["kind-control-plane"]}
            ]
        }
    ]
    (toleration,) = pod_spec(workload)["tolerations"]
    assert toleration["effect"] == "NoSchedule"
    node_plugin = find(objects, "DaemonSet", "csi-mock-node")
    assert allowed_nodes(node_plugin) == {"worker", "worker2"}
    assert "tolerations" not in pod_spec(node_plugin)


# -- deployments side by side ----------------------------------------------------------


def own(tag: str, **fields: Any) -> dict[str, Any]:
    """The fields of a deployment beside others, named as the pytest plugin names them."""
    return {"name": f"{tag}.csi-mock", "suffix": f"-{tag}", **fields}


def identities(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects}


def host_paths(objects: list[dict[str, Any]]) -> set[str]:
    """Every host directory of the deployment, but the kubelet's own (every node plugin
    mounts it: the kubelet's pod directories are where volumes are published)."""
    return {
        v["hostPath"]["path"]
        for workload in workloads(objects).values()
        for v in pod_spec(workload)["volumes"]
        if "hostPath" in v and v["hostPath"]["path"] != "/var/lib/kubelet"
    }


def nested(a: set[str], b: set[str]) -> set[tuple[str, str]]:
    return {(x, y) for x in a for y in b if Path(x).is_relative_to(y) or Path(y).is_relative_to(x)}


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_deployments_with_suffixes_share_no_object_namespace_or_host_directory(mode: str) -> None:
    a, b = render(**own("a", provisioner_mode=mode)), render(**own("b", provisioner_mode=mode))
    default = render(provisioner_mode=mode)
    for one, other in ((a, b), (a, default), (b, default)):
        assert not identities(one) & identities(other)
        assert not nested(host_paths(one), host_paths(other))
    assert {o["metadata"].get("namespace") for o in a} == {None, "csi-mock-a"}
    assert host_paths(a) >= {
        "/var/lib/csi-mock/a.csi-mock-a",
        "/var/lib/kubelet/plugins/a.csi-mock-a",
    }


def test_a_suffixed_node_plugin_registers_the_socket_of_its_own_directory() -> None:
    objects = render(**own("a"))
    config = validate_config(configs(objects)["node-worker.yaml"])
    socket_dir = volume(find(objects, "DaemonSet", "csi-mock-node"), "socket-dir")
    assert config.node.registration is not None
    assert config.node.registration.kubelet_endpoint == (
        Path(socket_dir["hostPath"]["path"]) / config.socket_path.name
    )
    assert config.node.segment == {
        "topology.a.csi-mock/node": "worker",
        "topology.a.csi-mock/zone": "zone-a",
    }


def test_a_suffixed_deployment_binds_its_roles_to_the_accounts_of_its_namespace() -> None:
    objects = render(**own("a"))
    defined = identities(objects)
    for binding in (o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        for subject in binding["subjects"]:
            assert ("ServiceAccount", "csi-mock-a", subject["name"]) in defined
            assert subject["namespace"] == "csi-mock-a"
        role = binding["roleRef"]
        scope = "" if role["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        assert (role["kind"], scope, role["name"]) in defined
    for workload in workloads(objects).values():
        account = pod_spec(workload)["serviceAccountName"]
        assert ("ServiceAccount", "csi-mock-a", account) in defined


def test_a_suffixed_deployments_cluster_scoped_objects_carry_its_suffix_and_driver_name() -> None:
    spec = DriverDeployment(**own("a"))
    objects = render(**own("a"))
    outside = [o for o in objects if "namespace" not in o["metadata"]]
    assert identities(cluster_scoped_objects(spec)) == identities(outside)
    assert sorted(o["kind"] for o in outside) == [
        "CSIDriver",
        *["ClusterRole"] * 4,
        *["ClusterRoleBinding"] * 4,
        "Namespace",
        "StorageClass",
        "StorageClass",
        "StorageClass",
    ]
    for obj in outside:
        assert obj["metadata"]["labels"][INSTANCE_LABEL] == "a.csi-mock"
        if obj["kind"] != "CSIDriver":
            assert obj["metadata"]["name"].endswith("-a")


def test_the_unsuffixed_deployment_names_things_as_the_manifests_do() -> None:
    objects = render()
    outside = [o for o in objects if "namespace" not in o["metadata"]]
    assert identities(cluster_scoped_objects(DriverDeployment())) == identities(outside)
    # As ``kubectl apply -k deploy/kubernetes`` makes them: what the unsuffixed
    # deployment removes before it starts.
    assert not [o for o in outside if INSTANCE_LABEL in o["metadata"].get("labels", {})]
    assert {o["metadata"]["name"] for o in outside if o["kind"].startswith("Cluster")} == {
        "csi-mock-external-provisioner-runner",
        "csi-mock-external-provisioner",
        "csi-mock-external-attacher-runner",
        "csi-mock-external-attacher",
        "csi-mock-external-resizer-runner",
        "csi-mock-external-resizer",
        "csi-mock-external-snapshotter-runner",
        "csi-mock-external-snapshotter",
    }
