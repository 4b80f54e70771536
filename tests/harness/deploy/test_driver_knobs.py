"""The driver knobs of a DriverDeployment become csi-mock configuration keys that
csi-mock accepts, in the controller's and every node's configuration."""

from __future__ import annotations

from typing import Any

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_mock.backend.switches import Switches
from csi_mock.config import DriverConfig, validate_config
from tests.harness.deploy.test_spec import NODES, controller_config, node_config

KNOBS: dict[str, Any] = {
    "controller_expansion": False,
    "node_expansion": True,
    "node_expansion_required": False,
    "online_expansion": False,
    "volume_stats": False,
    "controller_volume_condition": True,
    "volume_mount_group": True,
    "volume_health": True,
    "storage_health": True,
}


def both(spec: DriverDeployment) -> tuple[DriverConfig, DriverConfig]:
    return (
        validate_config(controller_config(spec)),
        validate_config(node_config(spec, NODES[0])),
    )


def test_default_knobs_add_nothing_to_the_configuration() -> None:
    assert "node" not in controller_config(DriverDeployment())
    assert "online_expansion" not in controller_config(DriverDeployment())


def test_every_knob_reaches_both_processes() -> None:
    controller, node = both(DriverDeployment(**KNOBS))

    expected = Switches(
        controller_expansion=False,
        node_expansion=True,
        node_expansion_required=False,
        online_expansion=False,
        volume_stats=False,
    )
    assert Switches.from_config(controller) == expected
    assert Switches.from_config(node) == expected
    assert controller.controller.volume_condition is True
    assert node.node.volume_mount_group is True
    assert (node.node.volume_health, node.node.storage_health) == (True, True)
    assert controller.controller.volume_health is True


def test_node_only_expansion_is_advertised_by_the_controllers_socket_too() -> None:
    controller, _ = both(DriverDeployment(controller_expansion=False, node_expansion=True))

    assert Switches.from_config(controller).expansion is True
