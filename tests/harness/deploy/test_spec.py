from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from csi_harness._internal.deploy.sidecars import provisioner_flags
from csi_harness._internal.deploy.spec import (
    CONTROLLER,
    NODE_TOPOLOGY_KEY,
    ZONE_TOPOLOGY_KEY,
    DriverDeployment,
    ProvisionerMode,
    capacity_instance,
    csidriver_object,
    deep_merge,
    driver_config_for,
    storage_class_objects,
)
from csi_mock.config import DriverConfig, Mode, validate_config

NODES: list[tuple[str, str | None]] = [
    ("node-1", "zone-a"),
    ("node-2", "zone-b"),
    ("node-3", "zone-a"),
]


def pools_by_name(spec: DriverDeployment, nodes: list[tuple[str, str | None]]) -> dict[str, Any]:
    return {pool["name"]: pool for pool in spec.pool_configs(nodes)}


# -- pools --------------------------------------------------------------------------


def test_every_node_gets_a_local_pool_reachable_only_from_it() -> None:
    pools = pools_by_name(DriverDeployment(node_pool_size="5Gi"), NODES)
    assert pools == {
        f"{node}-local": {
            "name": f"{node}-local",
            "size": "5Gi",
            "segment": {NODE_TOPOLOGY_KEY: node},
        }
        for node, _ in NODES
    }


def test_node_pool_sizes_override_the_size_per_node() -> None:
    spec = DriverDeployment(node_pool_size="5Gi", node_pool_sizes={"node-2": "1Gi"})
    sizes = {name: pool["size"] for name, pool in pools_by_name(spec, NODES).items()}
    assert sizes == {"node-1-local": "5Gi", "node-2-local": "1Gi", "node-3-local": "5Gi"}


def test_node_pool_sizes_give_pools_to_listed_nodes_when_the_default_is_none() -> None:
    spec = DriverDeployment(node_pool_size=None, node_pool_sizes={"node-3": "2Gi"})
    assert list(pools_by_name(spec, NODES)) == ["node-3-local"]


def test_no_zone_pools_by_default() -> None:
    names = pools_by_name(DriverDeployment(), NODES)
    assert all(name.endswith("-local") for name in names)


def test_zone_pool_size_adds_one_pool_per_zone_reachable_from_the_zone() -> None:
    spec = DriverDeployment(node_pool_size=None, zone_pool_size="100Gi")
    assert spec.pool_configs(NODES) == [
        {"name": "zone-a-shared", "size": "100Gi", "segment": {ZONE_TOPOLOGY_KEY: "zone-a"}},
        {"name": "zone-b-shared", "size": "100Gi", "segment": {ZONE_TOPOLOGY_KEY: "zone-b"}},
    ]


def test_nodes_without_a_zone_add_no_zone_pool() -> None:
    spec = DriverDeployment(node_pool_size=None, zone_pool_size="100Gi")
    assert spec.pool_configs([("node-1", None), ("node-2", None)]) == []


def test_max_volume_size_is_set_on_every_pool() -> None:
    spec = DriverDeployment(zone_pool_size="100Gi", max_volume_size="3Gi")
    assert {pool["max_volume_size"] for pool in spec.pool_configs(NODES)} == {"3Gi"}


def test_driver_deployment_rejects_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="node_pool"):
        DriverDeployment.model_validate({"node_pool": "1Gi"})


def test_distributed_provisioning_refuses_attach_required() -> None:
    with pytest.raises(ValidationError, match="distributed needs attach_required false"):
        DriverDeployment(provisioner_mode="distributed", attach_required=True)


def test_without_the_resizer_mutable_parameters_are_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match="resizer is false but mutable_parameters"):
        DriverDeployment(resizer=False, mutable_parameters={"iops": []})


def test_distributed_provisioning_refuses_zone_pools() -> None:
    with pytest.raises(ValidationError, match="distributed cannot have zone pools"):
        DriverDeployment(provisioner_mode="distributed", zone_pool_size="10Gi")


def test_distributed_provisioning_with_node_pools_is_valid() -> None:
    spec = DriverDeployment(provisioner_mode="distributed", node_pool_sizes={"node-2": "1Gi"})
    assert spec.provisioner_mode == "distributed"


# -- driver configuration -----------------------------------------------------------


def controller_config(spec: DriverDeployment, **paths: Any) -> dict[str, Any]:
    return driver_config_for(
        spec,
        mode="controller",
        nodes=NODES,
        endpoint="unix:///run/test/controller.sock",
        state_dir=Path("/run/test/controller"),
        **paths,
    )


def node_config(spec: DriverDeployment, node: tuple[str, str | None]) -> dict[str, Any]:
    return driver_config_for(
        spec,
        mode="node",
        nodes=NODES,
        node=node,
        endpoint=f"unix:///run/test/{node[0]}.sock",
        state_dir=Path("/run/test") / node[0],
    )


def test_controller_config_has_no_node_section() -> None:
    assert "node" not in controller_config(DriverDeployment())


def test_controller_config_has_the_pools_of_every_node() -> None:
    spec = DriverDeployment(zone_pool_size="1Ti")
    assert controller_config(spec)["pools"] == spec.pool_configs(NODES)


def test_node_config_names_the_node_and_its_topology_segment() -> None:
    config = node_config(DriverDeployment(max_volumes_per_node=7), ("node-2", "zone-b"))
    assert config["node"] == {
        "id": "node-2",
        "segment": {NODE_TOPOLOGY_KEY: "node-2", ZONE_TOPOLOGY_KEY: "zone-b"},
        "max_volumes_per_node": 7,
    }


def test_node_segment_has_no_zone_for_a_node_without_zone() -> None:
    config = node_config(DriverDeployment(), ("node-1", None))
    assert config["node"]["segment"] == {NODE_TOPOLOGY_KEY: "node-1"}


def test_paths_are_passed_as_strings() -> None:
    config = controller_config(DriverDeployment(), backend_dir=Path("/run/test/backend"))
    assert config["state_dir"] == "/run/test/controller"
    assert config["backend_dir"] == "/run/test/backend"


def test_driver_config_carries_name_attach_mode_kinds_and_attach_limit() -> None:
    spec = DriverDeployment(
        name="other.example",
        attach_required=True,
        kinds={"fast": 1.5},
        default_kind="fast",
        attach_limit=4,
    )
    config = controller_config(spec)
    assert config["name"] == "other.example"
    assert config["attach_required"] is True
    assert config["kinds"] == {"fast": {"cost": 1.5}}
    assert config["default_kind"] == "fast"
    assert config["controller"] == {"attach_limit": 4}


def test_overrides_are_deep_merged_into_the_config() -> None:
    spec = DriverDeployment(
        attach_limit=3, overrides={"log_level": "debug", "controller": {"expansion": False}}
    )
    config = controller_config(spec)
    assert config["log_level"] == "debug"
    assert config["controller"] == {"attach_limit": 3, "expansion": False}


def test_overrides_are_merged_into_the_node_section_too() -> None:
    spec = DriverDeployment(overrides={"node": {"stage_unstage": False}})
    node = node_config(spec, ("node-1", "zone-a"))["node"]
    assert node["stage_unstage"] is False
    assert node["id"] == "node-1"


def test_journal_requests_whole_goes_to_every_instance_beside_its_admin_socket() -> None:
    spec = DriverDeployment(journal_requests="whole")
    config = controller_config(spec, admin={"socket": "/run/test/admin.sock"})
    assert config["admin"] == {"socket": "/run/test/admin.sock", "journal_requests": "whole"}
    assert node_config(spec, ("node-1", "zone-a"))["admin"] == {"journal_requests": "whole"}
    assert "admin" not in controller_config(DriverDeployment())
    validated = DriverConfig.model_validate(config)
    assert validated.admin.journal_requests.value == "whole"


def test_deep_merge_leaves_both_inputs_unchanged() -> None:
    base = {"a": {"b": 1, "list": [1]}}
    extra = {"a": {"c": 2}}
    merged = deep_merge(base, extra)
    merged["a"]["list"].append(2)
    assert base == {"a": {"b": 1, "list": [1]}}
    assert extra == {"a": {"c": 2}}
    assert merged == {"a": {"b": 1, "c": 2, "list": [1, 2]}}


def test_deep_merge_replaces_lists_and_scalars() -> None:
    assert deep_merge({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": 5}) == {"a": [3], "b": 5}


def test_csi_mock_accepts_the_controller_config() -> None:
    spec = DriverDeployment(zone_pool_size="1Ti", max_volume_size="2Gi", attach_limit=2)
    driver = validate_config(controller_config(spec, backend_dir=Path("/run/test/backend")))
    assert driver.mode is Mode.CONTROLLER
    assert [pool.name for pool in driver.pools] == [
        "node-1-local",
        "node-2-local",
        "node-3-local",
        "zone-a-shared",
        "zone-b-shared",
    ]


@pytest.mark.parametrize("node", [*NODES, ("node-4", None)], ids=lambda n: n[0])
def test_csi_mock_accepts_the_node_config(node: tuple[str, str | None]) -> None:
    spec = DriverDeployment(zone_pool_size="1Ti", overrides={"log_level": "debug"})
    driver = validate_config(node_config(spec, node))
    assert driver.mode is Mode.NODE
    assert driver.node.id == node[0]
    assert driver.node_segment()[NODE_TOPOLOGY_KEY] == node[0]


# -- Kubernetes objects -------------------------------------------------------------


def test_csidriver_object_is_named_after_the_driver() -> None:
    obj = csidriver_object(DriverDeployment(name="other.example"))
    assert obj["kind"] == "CSIDriver"
    assert obj["metadata"]["name"] == "other.example"


@pytest.mark.parametrize("attach_required", [True, False])
def test_csidriver_object_sets_attach_required(attach_required: bool) -> None:
    obj = csidriver_object(DriverDeployment(attach_required=attach_required))
    assert obj["spec"]["attachRequired"] is attach_required


@pytest.mark.parametrize("storage_capacity", [True, False])
def test_csidriver_object_sets_storage_capacity(storage_capacity: bool) -> None:
    obj = csidriver_object(DriverDeployment(storage_capacity=storage_capacity))
    assert obj["spec"]["storageCapacity"] is storage_capacity


def test_csidriver_object_leaves_storage_capacity_unset_for_none() -> None:
    obj = csidriver_object(DriverDeployment(storage_capacity=None))
    assert "storageCapacity" not in obj["spec"]


def test_storage_class_objects_are_all_manifests_by_default() -> None:
    names = [obj["metadata"]["name"] for obj in storage_class_objects(DriverDeployment())]
    assert names == ["csi-mock", "csi-mock-mirrored", "csi-mock-immediate"]


def test_storage_class_objects_are_filtered_by_name() -> None:
    spec = DriverDeployment(storage_classes=["csi-mock-immediate"])
    (obj,) = storage_class_objects(spec)
    assert obj["metadata"]["name"] == "csi-mock-immediate"


def test_storage_class_objects_use_the_drivers_name_as_provisioner() -> None:
    objects = storage_class_objects(DriverDeployment(name="other.example"))
    assert {obj["provisioner"] for obj in objects} == {"other.example"}


def test_storage_classes_ask_for_kinds_the_driver_defines() -> None:
    spec = DriverDeployment()
    kinds = {obj["parameters"]["kind"] for obj in storage_class_objects(spec)}
    assert kinds <= set(spec.kinds)


def test_a_suffixed_deployment_has_names_of_its_own() -> None:
    spec = DriverDeployment(name="d1a2b3c.csi-mock.example", suffix="-d1a2b3c")
    assert spec.node_topology_key == "topology.d1a2b3c.csi-mock.example/node"
    assert spec.zone_topology_key == "topology.d1a2b3c.csi-mock.example/zone"
    assert spec.namespace == "csi-mock-d1a2b3c"
    assert spec.storage_class() == "csi-mock-d1a2b3c"
    assert spec.storage_class("csi-mock-mirrored") == "csi-mock-mirrored-d1a2b3c"
    assert spec.segment("n1", "zone-a") == {
        "topology.d1a2b3c.csi-mock.example/node": "n1",
        "topology.d1a2b3c.csi-mock.example/zone": "zone-a",
    }
    classes = storage_class_objects(spec)
    assert {c["metadata"]["name"] for c in classes} == {
        "csi-mock-d1a2b3c",
        "csi-mock-mirrored-d1a2b3c",
        "csi-mock-immediate-d1a2b3c",
    }
    assert {c["provisioner"] for c in classes} == {spec.name}
    config = driver_config_for(spec, mode="node", nodes=[("n1", None)], node=("n1", None))
    assert config["node_topology_key"] == spec.node_topology_key
    assert config["pools"][0]["segment"] == {spec.node_topology_key: "n1"}


def test_the_default_deployment_keeps_the_published_names() -> None:
    spec = DriverDeployment()
    assert (spec.node_topology_key, spec.zone_topology_key) == (
        NODE_TOPOLOGY_KEY,
        ZONE_TOPOLOGY_KEY,
    )
    assert spec.namespace == "csi-mock" and spec.storage_class() == "csi-mock"


@pytest.mark.parametrize("suffix", ["d1", "-", "-UPPER", "-has_underscore", "-" + "x" * 13])
def test_a_suffix_that_cannot_end_a_name_is_refused(suffix: str) -> None:
    with pytest.raises(ValueError, match="suffix"):
        DriverDeployment(suffix=suffix)


def test_provisioner_keeps_its_own_api_rate_unless_one_is_given() -> None:
    default = provisioner_flags(DriverDeployment(), capacity_ownerref_level=-1)
    assert not [f for f in default if f.startswith("--kube-api-qps")]
    raised = provisioner_flags(DriverDeployment(provisioner_api_qps=50), capacity_ownerref_level=-1)
    assert "--kube-api-qps=50" in raised and "--kube-api-burst=100" in raised


def test_provisioner_api_qps_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="provisioner_api_qps"):
        DriverDeployment(provisioner_api_qps=0)


def test_the_controller_answers_get_capacity_for_every_segment_of_a_central_deployment() -> None:
    spec = DriverDeployment()
    assert capacity_instance(spec, {spec.node_topology_key: "node-2"}) == CONTROLLER
    assert capacity_instance(spec, {}) == CONTROLLER


def test_a_distributed_deployment_answers_get_capacity_on_the_segments_node() -> None:
    spec = DriverDeployment(provisioner_mode=ProvisionerMode.DISTRIBUTED)
    segment = {spec.node_topology_key: "node-2", spec.zone_topology_key: "zone-b"}
    assert capacity_instance(spec, segment) == "node-2"
    with pytest.raises(ValueError, match=r"the segment needs topology\.csi-mock\.example/node"):
        capacity_instance(spec, {spec.zone_topology_key: "zone-b"})
