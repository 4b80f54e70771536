from pathlib import Path

import pytest
from pydantic import ValidationError

from csi_harness._internal.core.validation import describe_validation_error
from csi_harness._internal.kube.feature_gates import format_feature_gates
from csi_harness._internal.providers.local.config import (
    Component,
    LocalClusterConfig,
    NodeType,
)


def test_nodes_are_named_node_1_to_n() -> None:
    config = LocalClusterConfig(simulated_nodes=3)
    assert [n.name for n in config.nodes()] == ["node-1", "node-2", "node-3", "node-4"]
    assert [n.index for n in config.nodes()] == [0, 1, 2, 3]


def test_first_node_is_the_kubelet_the_rest_are_simulated() -> None:
    types = [n.type for n in LocalClusterConfig(simulated_nodes=2).nodes()]
    assert types == [NodeType.KUBELET, NodeType.SIMULATED, NodeType.SIMULATED]


def test_no_simulated_nodes_leaves_only_the_kubelet() -> None:
    (node,) = LocalClusterConfig(simulated_nodes=0).nodes()
    assert node.type is NodeType.KUBELET


def test_nodes_get_zones_round_robin() -> None:
    config = LocalClusterConfig(simulated_nodes=4, zones=["a", "b"])
    assert [n.zone for n in config.nodes()] == ["a", "b", "a", "b", "a"]


def test_nodes_have_no_zone_when_zones_are_empty() -> None:
    config = LocalClusterConfig(simulated_nodes=2, zones=[])
    assert [n.zone for n in config.nodes()] == [None, None, None]


def test_duplicate_zones_are_rejected() -> None:
    with pytest.raises(ValidationError, match="zones must be unique"):
        LocalClusterConfig(zones=["a", "b", "a"])


def test_unknown_keys_are_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as raised:
        LocalClusterConfig.model_validate({"simulated_node": 3})
    assert "simulated_node" in describe_validation_error(raised.value, "cluster.yaml")


def test_validation_error_description_names_source_and_key() -> None:
    with pytest.raises(ValidationError) as raised:
        LocalClusterConfig.model_validate({"simulated_nodes": -1})
    text = describe_validation_error(raised.value, "cluster.yaml")
    assert text.startswith("cluster.yaml: invalid cluster configuration")
    assert "simulated_nodes:" in text


def test_feature_gates_for_a_component_are_the_common_ones_plus_its_own() -> None:
    config = LocalClusterConfig(
        feature_gates={"A": True, "B": True},
        component_feature_gates={Component.KUBELET: {"B": False, "C": True}},
    )
    assert config.feature_gates_for(Component.KUBELET) == {"A": True, "B": False, "C": True}
    assert config.feature_gates_for(Component.SCHEDULER) == {"A": True, "B": True}


def test_feature_gates_for_does_not_change_the_common_gates() -> None:
    config = LocalClusterConfig(
        feature_gates={"A": True}, component_feature_gates={Component.KUBELET: {"A": False}}
    )
    config.feature_gates_for(Component.KUBELET)
    assert config.feature_gates == {"A": True}


def test_component_feature_gates_accept_component_names_from_yaml() -> None:
    config = LocalClusterConfig.model_validate(
        {"component_feature_gates": {"kube-scheduler": {"A": True}}}
    )
    assert config.feature_gates_for(Component.SCHEDULER) == {"A": True}


def test_format_feature_gates_sorts_and_spells_booleans_lowercase() -> None:
    assert format_feature_gates({"B": False, "A": True}) == "A=true,B=false"


def test_effective_run_dir_defaults_to_the_cluster_name_under_the_run_root() -> None:
    config = LocalClusterConfig(name="my-cluster")
    assert config.effective_run_dir == Path("/var/lib/csi-harness/my-cluster")


def test_effective_run_dir_is_the_given_run_dir(tmp_path: Path) -> None:
    assert LocalClusterConfig(run_dir=tmp_path).effective_run_dir == tmp_path


@pytest.mark.parametrize("name", ["", "Upper", "-leading", "trailing-", "x" * 33, "a/b"])
def test_cluster_names_that_are_not_short_dns_labels_are_rejected(name: str) -> None:
    with pytest.raises(ValidationError):
        LocalClusterConfig(name=name)
