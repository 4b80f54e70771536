from pathlib import Path

import pytest

from csi_mock.config import ConfigError, Mode, load_config, validate_config


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
