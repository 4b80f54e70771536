"""LocalDriver's instances: which csi-mock processes a deployment has."""

from pathlib import Path
from typing import Any, cast

import pytest

from harness.deploy.local import DriverNode, LocalDriver
from harness.deploy.spec import DriverDeployment
from harness.local.tools import Tools


def local_driver(root: Path, **fields: Any) -> LocalDriver:
    return LocalDriver(
        DriverDeployment(**fields),
        root=root,
        tools=Tools(root / "bin"),
        supervisor=cast(Any, None),
        nodes=[
            DriverNode("node-1", "zone-a", root / "kubelet-1", False),
            DriverNode("node-2", "zone-b", root / "kubelet-2", True),
        ],
        kubeconfig=root / "kubeconfig",
        kube=cast(Any, None),
    )


def test_central_deployment_has_a_controller_and_an_instance_per_node(tmp_path: Path) -> None:
    driver = local_driver(tmp_path)
    assert driver.admin_sockets() == {
        "controller": tmp_path / "controller" / "admin.sock",
        "node-1": tmp_path / "node-1" / "admin.sock",
        "node-2": tmp_path / "node-2" / "admin.sock",
    }


def test_distributed_deployment_has_only_node_instances(tmp_path: Path) -> None:
    driver = local_driver(tmp_path, provisioner_mode="distributed")
    assert list(driver.admin_sockets()) == ["node-1", "node-2"]
    with pytest.raises(ValueError, match="no controller instance"):
        driver.admin_socket("controller")
