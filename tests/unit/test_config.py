from pathlib import Path

import pytest

from csi_mock.config import ConfigError, Mode, load_config, validate_config
from csi_mock.model.snapshot import SnapshotAccounting


def base(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {"node": {"id": "n1"}}
    data.update(overrides)
    return data


def test_defaults_give_one_node_local_pool_with_topology() -> None:
    config = validate_config(base())
    assert config.mode is Mode.ALL
    (pool,) = config.effective_pools()
    assert pool.segment == {"topology.csi-mock.example/node": "n1"}


def test_quantities_in_kubernetes_notation_are_parsed() -> None:
    config = validate_config(base(pools=[{"name": "p", "size": "10Gi", "max_volume_size": "2G"}]))
    assert config.pools[0].size == 10 * 2**30
    assert config.pools[0].max_volume_size == 2 * 10**9


def test_a_bad_quantity_names_its_key_and_value() -> None:
    with pytest.raises(ConfigError, match=r"pools\.0\.size: .*'10Xi' is not a quantity"):
        validate_config(base(pools=[{"name": "p", "size": "10Xi"}]))


def test_an_unknown_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"node\.max_volume_per_node: unknown key"):
        validate_config(base(node={"id": "n1", "max_volume_per_node": 3}))


def test_a_pool_serving_an_undefined_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown kind 'gold'"):
        validate_config(base(pools=[{"name": "p", "size": 1, "kinds": ["gold"]}]))


def test_node_mode_requires_a_node_id() -> None:
    with pytest.raises(ConfigError, match=r"node\.id is required"):
        validate_config({"mode": "node"})


def test_controller_mode_needs_no_node_id() -> None:
    assert validate_config({"mode": "controller"}).mode is Mode.CONTROLLER


def test_invalid_topology_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a valid label key"):
        validate_config(base(pools=[{"name": "p", "size": 1, "segment": {"bad key": "x"}}]))


def test_duplicate_pool_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="unique: p"):
        validate_config(base(pools=[{"name": "p", "size": 1}, {"name": "p", "size": 2}]))


def test_load_config_reads_yaml_and_applies_dotted_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("node:\n  id: a\n  max_volumes_per_node: 3\n")
    config = load_config(path, {"node.max_volumes_per_node": 5})
    assert config.node.max_volumes_per_node == 5
    assert config.node.id == "a"


def test_load_config_reports_invalid_yaml_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("node: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path)


# -- node.registration -------------------------------------------------------------------


def registering(mode: str = "all", **registration: object) -> dict[str, object]:
    return base(mode=mode, node={"id": "n1", "registration": registration})


def test_registration_is_off_unless_configured() -> None:
    config = validate_config(base())
    assert config.node.registration is None
    assert config.registration_socket_path is None


def test_registration_defaults_to_the_kubelets_registry_and_the_drivers_own_socket() -> None:
    config = validate_config(registering())
    assert config.registration_socket_path == Path(
        "/var/lib/kubelet/plugins_registry/csi-mock.example-reg.sock"
    )
    assert config.kubelet_endpoint == config.socket_path


def test_the_registration_socket_is_named_after_the_driver() -> None:
    data = registering(plugins_registry="/registration")
    data["name"] = "hostpath.csi.k8s.io"
    assert validate_config(data).registration_socket_path == Path(
        "/registration/hostpath.csi.k8s.io-reg.sock"
    )


def test_a_configured_kubelet_endpoint_is_what_the_kubelet_is_told() -> None:
    config = validate_config(registering(kubelet_endpoint="/var/lib/kubelet/plugins/x/csi.sock"))
    assert config.kubelet_endpoint == Path("/var/lib/kubelet/plugins/x/csi.sock")


def test_registration_in_node_mode_is_accepted() -> None:
    assert validate_config(registering(mode="node")).registration_socket_path is not None


def test_registration_in_controller_mode_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"node\.registration needs the node service"):
        validate_config(registering(mode="controller"))


def test_a_relative_plugins_registry_is_refused_by_name() -> None:
    with pytest.raises(
        ConfigError, match=r"node\.registration\.plugins_registry: must be an absolute path"
    ):
        validate_config(registering(plugins_registry="plugins_registry"))


def test_a_kubelet_endpoint_url_is_refused_by_name() -> None:
    with pytest.raises(
        ConfigError,
        match=r"node\.registration\.kubelet_endpoint: must be a plain absolute path, without unix",
    ):
        validate_config(registering(kubelet_endpoint="unix:///var/lib/kubelet/x/csi.sock"))


def test_an_unknown_registration_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"node\.registration\.registry: unknown key"):
        validate_config(registering(registry="/registration"))


def test_a_registration_socket_path_too_long_for_a_unix_socket_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"node\.registration\.plugins_registry: .* 107 bytes"):
        validate_config(registering(plugins_registry="/" + "r" * 100))


def test_an_endpoint_too_long_for_a_unix_socket_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"  endpoint: the socket path .* is 115 bytes, longer"):
        validate_config(base(endpoint="unix:///" + "e" * 114))


def test_an_admin_socket_too_long_for_a_unix_socket_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"  admin\.socket: .* is 111 bytes, longer than 107"):
        validate_config(base(admin={"socket": "/" + "a" * 110}))


def test_a_state_dir_too_long_for_its_admin_socket_is_refused_naming_both_fixes() -> None:
    with pytest.raises(
        ConfigError, match=r"state_dir: the admin socket .* set admin\.socket to a shorter path"
    ):
        validate_config(base(state_dir="/" + "s" * 100))


# -- controller.modify --------------------------------------------------------------------


def modifying(**modify: object) -> dict[str, object]:
    return base(controller={"modify": modify})


def test_modify_is_off_unless_configured() -> None:
    assert validate_config(base()).controller.modify is None
    assert validate_config(base(controller={"modify": None})).controller.modify is None


def test_modify_without_mutable_parameters_allows_any_name_and_value() -> None:
    modify = validate_config(modifying()).controller.modify
    assert modify is not None
    assert modify.rules().allowed is None


def test_mutable_parameters_map_names_to_allowed_values_in_order() -> None:
    config = validate_config(
        modifying(mutable_parameters={"iops": [], "tier": ["gold", "silver", "bronze"]})
    )
    assert config.controller.modify is not None
    assert config.controller.modify.rules().allowed == {
        "iops": (),
        "tier": ("gold", "silver", "bronze"),
    }


def test_yaml_numbers_and_booleans_are_allowed_values_as_kubernetes_writes_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "node: {id: n1}\ncontroller:\n  modify:\n    mutable_parameters:\n"
        "      iops: [1000, 2.5]\n      encrypted: [true, false]\n"
    )
    modify = load_config(path).controller.modify
    assert modify is not None
    assert modify.mutable_parameters == {"iops": ["1000", "2.5"], "encrypted": ["true", "false"]}


def test_an_empty_mutable_parameter_name_is_refused_by_key() -> None:
    with pytest.raises(
        ConfigError,
        match=r"controller\.modify\.mutable_parameters: a parameter name must not be empty",
    ):
        validate_config(modifying(mutable_parameters={"": []}))


def test_the_kind_parameter_cannot_be_mutable() -> None:
    with pytest.raises(
        ConfigError, match=r"controller\.modify\.mutable_parameters: 'kind' selects the volume"
    ):
        validate_config(modifying(mutable_parameters={"kind": ["fast"]}))


def test_a_mutable_parameter_without_a_list_of_values_is_refused_by_key() -> None:
    with pytest.raises(ConfigError, match=r"controller\.modify\.mutable_parameters\.tier: "):
        validate_config(modifying(mutable_parameters={"tier": "gold"}))


def test_an_unknown_modify_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"controller\.modify\.parameters: unknown key"):
        validate_config(modifying(parameters={"tier": []}))


# -- controller.snapshots and controller.clones -------------------------------------------


def test_snapshots_and_clones_are_off_unless_configured(tmp_path: Path) -> None:
    path = tmp_path / "driver.yaml"
    path.write_text("node: {id: n1}\ncontroller:\n  snapshots:\n")  # a bare key is null
    for config in (validate_config(base()), load_config(path)):
        assert config.controller.snapshots is None
        assert config.controller.clones is False


def test_an_empty_snapshots_section_turns_snapshots_on_with_full_accounting() -> None:
    snapshots = validate_config(base(controller={"snapshots": {}})).controller.snapshots
    assert snapshots is not None
    assert (snapshots.accounting, snapshots.ready_after) == (SnapshotAccounting.FULL, 0.0)


def test_snapshot_settings_take_a_policy_and_a_go_duration(tmp_path: Path) -> None:
    path = tmp_path / "driver.yaml"
    path.write_text(
        "node: {id: n1}\ncontroller:\n  clones: true\n  snapshots:\n"
        "    accounting: copy_on_write\n    ready_after: 1m30s\n"
    )
    controller = load_config(path).controller
    assert controller.snapshots is not None and controller.clones
    assert controller.snapshots.accounting is SnapshotAccounting.COPY_ON_WRITE
    assert controller.snapshots.ready_after == 90.0


@pytest.mark.parametrize(
    ("snapshots", "message"),
    [
        ({"accounting": "thin"}, r"controller\.snapshots\.accounting: .*'full', 'used'"),
        ({"ready_after": "soon"}, r"controller\.snapshots\.ready_after: 'soon' is not a duration"),
        ({"ready_after": "-1s"}, r"controller\.snapshots\.ready_after: .*greater than or equal"),
        ({"ready": "0s"}, r"controller\.snapshots\.ready: unknown key"),
    ],
)
def test_a_bad_snapshot_setting_names_its_key(snapshots: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config(base(controller={"snapshots": snapshots}))


def test_a_neighbour_that_is_not_a_plain_program_name_is_refused_by_key() -> None:
    with pytest.raises(ConfigError, match=r"admin\.neighbours\.1: .*'\.\./bin/sh'"):
        validate_config(
            {"mode": "controller", "admin": {"neighbours": ["csi-attacher", "../bin/sh"]}}
        )
