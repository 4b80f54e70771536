"""The in-cluster manifests (deploy/kubernetes/) hang together: they parse as Kubernetes
objects, pin every image, give csi-mock a configuration it accepts in both modes with
the flags each pod passes, wire the sockets consistently, grant the sidecars what they
need (and the node plugin nothing), and the kustomization lists every file.

The server's verdict on the same files: tests/e2e/test_manifests_dry_run.py and
test_manifests_rbac.py."""

from __future__ import annotations

import copy
import functools
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import codecs
from lightkube.core.resource import NamespacedResource

from csi_harness._internal.core.resources import MANIFEST_DIR
from csi_harness._internal.deploy.incluster_layout import CONTROLLER_DEPLOYMENT, NODE_DAEMONSET
from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE
from csi_harness._internal.providers.kind.kind_cli import (
    DRIVER_IMAGE,
)
from csi_mock.cli import build_parser, resolve_config
from csi_mock.config import DriverConfig, Mode, validate_config

REPO_ROOT = MANIFEST_DIR.parent.parent
KUSTOMIZATION = MANIFEST_DIR / "kustomization.yaml"
MANIFEST_FILES = sorted(p for p in MANIFEST_DIR.glob("*.yaml") if p != KUSTOMIZATION)
CONFIG_KEY = "csi-mock.yaml"

# Sidecar images and the tools/ unit whose pinned version each must match.
SIDECARS = {
    "registry.k8s.io/sig-storage/csi-provisioner": "csi-provisioner",
    "registry.k8s.io/sig-storage/csi-attacher": "csi-attacher",
    "registry.k8s.io/sig-storage/csi-resizer": "csi-resizer",
    "registry.k8s.io/sig-storage/csi-node-driver-registrar": "node-driver-registrar",
    "registry.k8s.io/sig-storage/livenessprobe": "livenessprobe",
}


@functools.cache
def _parsed(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def documents(path: Path) -> list[dict[str, Any]]:
    """The objects of a YAML file (parsed once; each caller gets its own copy)."""
    return copy.deepcopy(_parsed(path))


def all_objects() -> list[dict[str, Any]]:
    return [doc for path in MANIFEST_FILES for doc in documents(path)]


def the(kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in all_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def pod_templates() -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in all_objects():
        if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job", "Pod"):
            spec = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
            yield obj["metadata"]["name"], spec


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod["containers"] if c["name"] == name]
    return found


def controller_pod() -> dict[str, Any]:
    spec: dict[str, Any] = the("Deployment", CONTROLLER_DEPLOYMENT)["spec"]["template"]["spec"]
    return spec


def node_pod() -> dict[str, Any]:
    spec: dict[str, Any] = the("DaemonSet", NODE_DAEMONSET)["spec"]["template"]["spec"]
    return spec


def driver_config_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(the("ConfigMap", "csi-mock-config")["data"][CONFIG_KEY])
    return data


def flag(args: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return value


def mount_path(c: dict[str, Any], volume: str) -> str:
    (path,) = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == volume]
    return str(path)


def volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [v for v in pod["volumes"] if v["name"] == name]
    return found


def socket_path(endpoint: str) -> str:
    return endpoint.removeprefix("unix://")


# -- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_every_manifest_parses_into_objects_with_api_version_kind_and_name(path: Path) -> None:
    objects = documents(path)
    assert objects, f"{path.name} holds no object"
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind"), obj
        assert obj["metadata"].get("name"), obj


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_every_manifest_loads_as_known_kubernetes_resources(path: Path) -> None:
    resources = codecs.load_all_yaml(path.read_text())
    assert len(resources) == len(documents(path))


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_every_field_is_known_to_the_kubernetes_models(path: Path) -> None:
    """lightkube's typed models (Kubernetes 1.37) drop fields they do not know, so a
    misspelt or misplaced field shows up as a difference after a round trip."""
    for raw, resource in zip(documents(path), codecs.load_all_yaml(path.read_text()), strict=True):
        assert resource.to_dict() == raw, f"{path.name}: {raw['kind']}/{raw['metadata']['name']}"


def test_the_round_trip_notices_an_unknown_field() -> None:
    deployment = the("Deployment", CONTROLLER_DEPLOYMENT)
    deployment["spec"]["template"]["spec"]["containers"][0]["mountPropagation"] = "Bidirectional"
    assert codecs.from_dict(deployment).to_dict() != deployment


def test_namespaced_objects_live_in_the_driver_namespace() -> None:
    for path in MANIFEST_FILES:
        for resource in codecs.load_all_yaml(path.read_text()):
            if isinstance(resource, NamespacedResource):
                assert resource.metadata is not None
                assert resource.metadata.namespace == DRIVER_NAMESPACE, (path.name, resource)


def test_the_namespace_is_defined_and_allows_privileged_pods() -> None:
    namespace = the("Namespace", DRIVER_NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_kustomization_lists_every_manifest_file_once() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    # snapshotclass.yaml needs the snapshot CRDs, which a cluster may lack: the harness
    # creates it for deployments with snapshots only.
    assert sorted(resources) == [p.name for p in MANIFEST_FILES if p.name != "snapshotclass.yaml"]


# -- images --------------------------------------------------------------------------


def all_containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for workload, pod in pod_templates():
        for c in pod.get("initContainers", []) + pod["containers"]:
            yield f"{workload}/{c['name']}", c


def image_tag(image: str) -> str | None:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def test_every_image_has_a_pinned_tag() -> None:
    images = dict(all_containers())
    assert images
    for where, c in images.items():
        tag = image_tag(c["image"])
        assert tag is not None and tag != "latest", f"{where}: {c['image']} is not pinned"


def test_image_tag_reads_the_tag_not_a_registry_port() -> None:
    assert image_tag("registry:5000/csi-mock") is None
    assert image_tag("registry:5000/csi-mock:v1") == "v1"
    assert image_tag("busybox") is None


def test_csi_mock_containers_run_the_image_the_kind_provider_loads() -> None:
    for pod in (controller_pod(), node_pod()):
        c = container(pod, "csi-mock")
        assert c["image"] == DRIVER_IMAGE
        # A locally loaded image must never be pulled.
        assert c["imagePullPolicy"] in ("IfNotPresent", "Never")


def pinned_tool_version(unit: str) -> str:
    build_env = (REPO_ROOT / "tools" / unit / "build.env").read_text()
    (version,) = re.findall(r'^VERSION="([^"]+)"', build_env, re.MULTILINE)
    return version


def test_sidecar_images_match_the_versions_the_local_cluster_pins() -> None:
    seen = set()
    for where, c in all_containers():
        repository, _, tag = c["image"].rpartition(":")
        if repository in SIDECARS:
            assert tag == pinned_tool_version(SIDECARS[repository]), where
            seen.add(repository)
    assert seen == set(SIDECARS)


# -- the csi-mock configuration ------------------------------------------------------


def test_configmap_config_validates_in_controller_mode() -> None:
    config = validate_config({**driver_config_data(), "mode": "controller"})
    assert config.mode is Mode.CONTROLLER


def test_configmap_config_validates_in_node_mode_with_a_node_id() -> None:
    data = driver_config_data()
    config = validate_config({**data, "mode": "node", "node": {**data["node"], "id": "worker"}})
    assert config.mode is Mode.NODE
    assert config.node_segment() == {"topology.csi-mock.example/node": "worker"}


def resolved_config(tmp_path: Path, pod: dict[str, Any], node_name: str) -> DriverConfig:
    """What csi-mock makes of the container's args, with the ConfigMap as --config and
    $(VAR) references expanded as the kubelet does (fieldRefs faked)."""
    c = container(pod, "csi-mock")
    env = {"NODE_NAME": node_name}
    for variable in c.get("env", []):
        assert variable["name"] in env, f"unexpected env {variable['name']}"
        assert variable["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    config_file = tmp_path / CONFIG_KEY
    config_file.write_text(the("ConfigMap", "csi-mock-config")["data"][CONFIG_KEY])
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["args"]]
    assert flag(args, "config") == f"{mount_path(c, 'config')}/{CONFIG_KEY}"
    args = [f"--config={config_file}" if a.startswith("--config=") else a for a in args]
    return resolve_config(build_parser().parse_args(args), env={})


def test_controller_args_give_a_controller_mode_config(tmp_path: Path) -> None:
    config = resolved_config(tmp_path, controller_pod(), node_name="unused")
    assert config.mode is Mode.CONTROLLER
    assert config.node.id is None


def test_node_args_give_a_node_mode_config_named_after_the_node(tmp_path: Path) -> None:
    config = resolved_config(tmp_path, node_pod(), node_name="csi-mock-worker2")
    assert config.mode is Mode.NODE
    assert config.node.id == "csi-mock-worker2"
    assert config.node.registration is None  # node-driver-registrar registers it


def test_driver_name_matches_the_csidriver_and_the_storage_classes() -> None:
    name = driver_config_data()["name"]
    assert the("CSIDriver", name)
    provisioners = {o["provisioner"] for o in all_objects() if o["kind"] == "StorageClass"}
    assert provisioners == {name}


def test_attach_mode_matches_the_csidriver() -> None:
    data = driver_config_data()
    assert data["attach_required"] == the("CSIDriver", data["name"])["spec"]["attachRequired"]


def test_storage_class_kinds_exist_in_the_config() -> None:
    kinds = driver_config_data()["kinds"]
    for obj in all_objects():
        if obj["kind"] == "StorageClass":
            assert obj["parameters"]["kind"] in kinds, obj["metadata"]["name"]


# -- sockets and mounts --------------------------------------------------------------


def test_controller_sidecars_dial_the_drivers_socket_in_a_shared_emptydir() -> None:
    pod = controller_pod()
    socket = socket_path(driver_config_data()["endpoint"])
    driver = container(pod, "csi-mock")
    assert Path(socket).parent == Path(mount_path(driver, "socket-dir"))
    assert "emptyDir" in volume(pod, "socket-dir")
    for name in ("csi-provisioner", "csi-attacher", "csi-resizer"):
        sidecar = container(pod, name)
        env = {e["name"]: e.get("value") for e in sidecar["env"]}
        assert flag(sidecar["args"], "csi-address") == "$(ADDRESS)"
        assert env["ADDRESS"] == socket
        assert mount_path(sidecar, "socket-dir") == mount_path(driver, "socket-dir")


def test_node_registrar_tells_the_kubelet_the_host_path_of_the_socket() -> None:
    pod = node_pod()
    socket = Path(socket_path(driver_config_data()["endpoint"]))
    host_dir = Path(volume(pod, "socket-dir")["hostPath"]["path"])
    registrar = container(pod, "node-driver-registrar")
    assert flag(registrar["args"], "kubelet-registration-path") == str(host_dir / socket.name)
    assert flag(registrar["args"], "csi-address") == str(socket)
    assert mount_path(registrar, "registration-dir") == "/registration"
    assert (
        volume(pod, "registration-dir")["hostPath"]["path"] == "/var/lib/kubelet/plugins_registry"
    )
    assert host_dir.parent == Path("/var/lib/kubelet/plugins")


def test_node_liveness_probe_checks_the_drivers_socket() -> None:
    pod = node_pod()
    probe = container(pod, "liveness-probe")
    driver = container(pod, "csi-mock")
    assert flag(probe["args"], "csi-address") == socket_path(driver_config_data()["endpoint"])
    (port,) = [
        p for p in driver["ports"] if p["name"] == driver["livenessProbe"]["httpGet"]["port"]
    ]
    assert flag(probe["args"], "health-port") == str(port["containerPort"])


def test_node_driver_is_privileged_with_bidirectional_kubelet_mounts() -> None:
    pod = node_pod()
    driver = container(pod, "csi-mock")
    assert driver["securityContext"]["privileged"] is True
    (kubelet,) = [m for m in driver["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet"]
    assert kubelet["mountPropagation"] == "Bidirectional"
    assert volume(pod, kubelet["name"])["hostPath"]["path"] == "/var/lib/kubelet"


def test_both_drivers_keep_state_in_the_configured_state_dir() -> None:
    state_dir = driver_config_data()["state_dir"]
    for pod in (controller_pod(), node_pod()):
        assert mount_path(container(pod, "csi-mock"), "state-dir") == state_dir
        assert volume(pod, "config")["configMap"]["name"] == "csi-mock-config"


def test_node_plugin_materializes_volumes_the_controller_made_elsewhere() -> None:
    assert driver_config_data()["node"]["materialize_missing_volumes"] is True


def test_node_mode_self_registration_alternative_is_documented() -> None:
    text = (MANIFEST_DIR / "node.yaml").read_text()
    assert "--plugins-registry=/var/lib/kubelet/plugins_registry" in text


# -- provisioner -----------------------------------------------------------------------


def test_provisioner_publishes_capacity_owned_by_the_deployment() -> None:
    provisioner = container(controller_pod(), "csi-provisioner")
    args = provisioner["args"]
    for expected in ("--enable-capacity", "--extra-create-metadata", "--leader-election"):
        assert expected in args
    assert flag(args, "capacity-ownerref-level") == "2"  # Pod -> ReplicaSet -> Deployment
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in provisioner["env"]
        if "valueFrom" in e
    }
    assert env == {"NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}


# -- RBAC ----------------------------------------------------------------------------


def rbac_objects() -> list[dict[str, Any]]:
    return documents(MANIFEST_DIR / "rbac.yaml")


def rules_of(service_account: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) for every rule bound to the account."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in rbac_objects()
    }
    granted: list[tuple[str | None, dict[str, Any]]] = []
    for binding in rbac_objects():
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = {(s["kind"], s.get("namespace"), s["name"]) for s in binding["subjects"]}
        if ("ServiceAccount", DRIVER_NAMESPACE, service_account) not in subjects:
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace")
        role_namespace = scope if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_namespace, ref["name"])]
        granted += [(scope, rule) for rule in role["rules"]]
    return granted


def allowed(
    service_account: str, verb: str, resource: str, group: str = "", namespace: str | None = None
) -> bool:
    for scope, rule in rules_of(service_account):
        if scope is not None and scope != namespace:
            continue
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            return True
    return False


def test_rules_of_only_counts_bindings_of_the_account() -> None:
    assert rules_of("nobody") == []


@pytest.mark.parametrize("verb", ["get", "list", "watch", "create", "update", "patch", "delete"])
def test_provisioner_may_manage_capacity_objects_in_the_driver_namespace(verb: str) -> None:
    account = controller_pod()["serviceAccountName"]
    assert allowed(account, verb, "csistoragecapacities", "storage.k8s.io", DRIVER_NAMESPACE)
    assert not allowed(account, verb, "csistoragecapacities", "storage.k8s.io", "default")


def test_provisioner_may_walk_the_owner_chain_to_its_deployment() -> None:
    account = controller_pod()["serviceAccountName"]
    assert allowed(account, "get", "pods", "", DRIVER_NAMESPACE)
    assert allowed(account, "get", "replicasets", "apps", DRIVER_NAMESPACE)


@pytest.mark.parametrize(
    ("verb", "resource", "group"),
    [
        ("create", "persistentvolumes", ""),
        ("delete", "persistentvolumes", ""),
        ("update", "persistentvolumeclaims", ""),
        ("watch", "storageclasses", "storage.k8s.io"),
        ("list", "csinodes", "storage.k8s.io"),
        ("get", "nodes", ""),
        ("create", "events", ""),
        ("watch", "volumeattachments", "storage.k8s.io"),
    ],
)
def test_provisioner_may_provision_cluster_wide(verb: str, resource: str, group: str) -> None:
    assert allowed(controller_pod()["serviceAccountName"], verb, resource, group, "any")


@pytest.mark.parametrize(
    ("verb", "resource"),
    [("patch", "volumeattachments"), ("patch", "volumeattachments/status"), ("watch", "csinodes")],
)
def test_attacher_may_attach(verb: str, resource: str) -> None:
    assert allowed(controller_pod()["serviceAccountName"], verb, resource, "storage.k8s.io")


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("patch", "persistentvolumes"),
        ("watch", "persistentvolumeclaims"),
        ("patch", "persistentvolumeclaims/status"),
        ("watch", "pods"),
        ("create", "events"),
    ],
)
def test_resizer_may_expand_claims_cluster_wide(verb: str, resource: str) -> None:
    assert allowed(controller_pod()["serviceAccountName"], verb, resource, "", "any")


def test_resizer_runs_next_to_the_controller_with_leader_election() -> None:
    resizer = container(controller_pod(), "csi-resizer")
    assert "--leader-election" in resizer["args"]
    assert not [a for a in resizer["args"] if a.startswith("--kubeconfig")]


@pytest.mark.parametrize("verb", ["get", "create", "update", "delete"])
def test_sidecars_may_hold_leader_election_leases_in_the_driver_namespace(verb: str) -> None:
    account = controller_pod()["serviceAccountName"]
    assert allowed(account, verb, "leases", "coordination.k8s.io", DRIVER_NAMESPACE)


def test_node_plugin_has_no_api_access() -> None:
    account = node_pod()["serviceAccountName"]
    assert rules_of(account) == []
    assert the("ServiceAccount", account)["automountServiceAccountToken"] is False


def test_every_binding_refers_to_a_defined_role_and_service_account() -> None:
    defined = {(o["kind"], o["metadata"]["name"]) for o in rbac_objects()}
    for binding in rbac_objects():
        if binding["kind"].endswith("Binding"):
            assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in defined, binding
            for subject in binding["subjects"]:
                assert ("ServiceAccount", subject["name"]) in defined, binding
    for _, pod in pod_templates():
        assert ("ServiceAccount", pod["serviceAccountName"]) in defined


def upstream_rbac(module_version: str, path: str) -> list[dict[str, Any]]:
    """The RBAC file ``path`` of a sidecar (``module@version`` as the Go module cache
    names its directory), from the cache that `tools/build.sh build` fills; skips
    when it is not there."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("go not installed: no module cache to compare with")
    cache = subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=False
    ).stdout.strip()
    file = Path(cache) / module_version / path
    if not file.exists():
        pytest.skip(f"{file} not in the module cache (make tools fetches it)")
    return documents(file)


def rule_set(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


BEYOND_UPSTREAM = {
    # external-provisioner reads a claim's VolumeAttributesClass (its parameters are
    # CreateVolume's mutable_parameters); v6.3.0's own rbac.yaml does not grant it, so
    # a claim with a class fails there with "forbidden".
    "csi-mock-external-provisioner-runner": {
        ("storage.k8s.io", "volumeattributesclasses", verb) for verb in ("get", "list", "watch")
    },
    # csi-snapshotter reads the secret a VolumeSnapshotClass names: upstream's v8.7.0
    # rbac-csi-snapshotter.yaml leaves that rule commented out ("Enable it if your
    # driver needs secret"); csi-mock takes snapshot secrets, and only get is granted.
    "csi-mock-external-snapshotter-runner": {("", "secrets", "get")},
}
"""What our roles grant beyond upstream's, and why."""


@pytest.mark.parametrize(
    ("module_version", "path", "upstream_names"),
    [
        (
            "github.com/kubernetes-csi/external-provisioner/v6@v6.3.0",
            "deploy/kubernetes/rbac.yaml",
            ("external-provisioner-runner", "external-provisioner-cfg"),
        ),
        (
            "github.com/kubernetes-csi/external-attacher/v4@v4.13.0",
            "deploy/kubernetes/rbac.yaml",
            ("external-attacher-runner", "external-attacher-cfg"),
        ),
        (
            "github.com/kubernetes-csi/external-resizer/v2@v2.3.0",
            "deploy/kubernetes/rbac.yaml",
            ("external-resizer-runner", "external-resizer-cfg"),
        ),
        (
            "github.com/kubernetes-csi/external-snapshotter/v8@v8.7.0",
            "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
            ("external-snapshotter-runner",),
        ),
    ],
)
def test_sidecar_roles_grant_exactly_what_upstream_grants(
    module_version: str, path: str, upstream_names: tuple[str, ...]
) -> None:
    upstream = {
        o["metadata"]["name"]: o for o in upstream_rbac(module_version, path) if "rules" in o
    }
    ours = {o["metadata"]["name"]: o for o in rbac_objects() if "rules" in o}
    for name in upstream_names:
        ours_name = f"csi-mock-{name}"
        extra = BEYOND_UPSTREAM.get(ours_name, set())
        assert rule_set(ours[ours_name]) == rule_set(upstream[name]) | extra, name
