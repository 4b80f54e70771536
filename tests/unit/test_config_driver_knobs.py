"""The expansion, stats, condition and mount-group keys of the driver configuration."""

from __future__ import annotations

import pytest

from csi_mock.backend.switches import Switches
from csi_mock.config import ConfigError, validate_config


def base(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {"node": {"id": "n1"}}
    data.update(overrides)
    return data


def test_defaults_keep_todays_behaviour() -> None:
    config = validate_config(base())

    assert Switches.from_config(config) == Switches(
        controller_expansion=True,
        node_expansion=True,
        node_expansion_required=True,
        online_expansion=True,
        volume_stats=True,
    )
    assert (config.node.volume_condition, config.controller.volume_condition) == (True, False)
    assert config.node.volume_mount_group is False


def test_node_expansion_follows_controller_expansion_unless_given() -> None:
    assert validate_config(base(controller={"expansion": False})).node_expansion is False
    node_only = validate_config(
        base(controller={"expansion": False}, node={"id": "n1", "expansion": True})
    )
    assert (node_only.controller.expansion, node_only.node_expansion) == (False, True)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"online_expansion": "sometimes"}, "online_expansion"),
        (
            {"controller": {"node_expansion_required": "perhaps"}},
            "controller.node_expansion_required",
        ),
        ({"controller": {"volume_condition": [1]}}, "controller.volume_condition"),
        ({"node": {"id": "n1", "expansion": "maybe"}}, "node.expansion"),
        ({"node": {"id": "n1", "volume_stats": "often"}}, "node.volume_stats"),
        ({"node": {"id": "n1", "volume_condition": 7}}, "node.volume_condition"),
        ({"node": {"id": "n1", "volume_mount_group": "gid"}}, "node.volume_mount_group"),
        ({"node": {"id": "n1", "max_expansion_size": "2Xi"}}, "node.max_expansion_size"),
        ({"node": {"id": "n1", "max_expansion_size": -1}}, "node.max_expansion_size"),
    ],
)
def test_a_bad_knob_value_is_refused_naming_its_key(overrides: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        validate_config(base(**overrides))

    assert f"\n  {key}: " in str(raised.value)


def test_max_expansion_size_takes_a_quantity() -> None:
    config = validate_config(base(node={"id": "n1", "max_expansion_size": "2Gi"}))

    assert config.node.max_expansion_size == 2 << 30
