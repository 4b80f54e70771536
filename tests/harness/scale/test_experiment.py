"""The cluster a scale run brings up: nodes, driver (central or distributed), scheduler."""

from __future__ import annotations

import dataclasses

from csi_harness._internal.deploy.spec import ProvisionerMode
from csi_harness._internal.providers.local.config import Component
from csi_harness._internal.scale.comparisons import KEP1472, SCORING
from csi_harness._internal.scale.experiment import (
    JOURNAL_SIZE,
    Setup,
    cluster_config,
)
from csi_harness._internal.scale.workload import SizeRange

SETUP = Setup(nodes=50, pool="10Gi", pods=450, sizes=SizeRange.parse("1Gi"), seed=1)


def test_a_run_has_only_simulated_nodes_besides_the_kubelet_and_no_volume_limit() -> None:
    config = cluster_config(SETUP, KEP1472.variants[1])
    assert config.simulated_nodes == 50 and config.kubelet_nodes == 1
    assert config.zones == []
    assert config.name == "scale-no-tracking"
    driver = config.driver
    assert driver.storage_capacity is False
    assert driver.max_volumes_per_node == 0
    assert driver.node_pool_size == "10Gi"
    assert driver.storage_classes == ["csi-mock"]
    assert driver.overrides["admin"]["journal_size"] == JOURNAL_SIZE


def test_the_scheduler_runs_with_kubernetes_default_backoff_and_the_variant_gates() -> None:
    inverted = SCORING.variants[2]
    config = cluster_config(SETUP, inverted)
    assert config.scheduler["podMaxBackoffSeconds"] == 10
    assert config.scheduler["profiles"] == inverted.scheduler["profiles"]
    assert config.feature_gates_for(Component.SCHEDULER) == {"StorageCapacityScoring": True}


DISTRIBUTED = dataclasses.replace(SETUP, provisioning=ProvisionerMode.DISTRIBUTED)


def test_distributed_runs_a_provisioner_per_node_with_strict_topology() -> None:
    driver = cluster_config(DISTRIBUTED, KEP1472.variants[0]).driver
    assert driver.provisioner_mode is ProvisionerMode.DISTRIBUTED
    assert driver.strict_topology is True
    assert driver.attach_required is False


def test_distributed_without_tracking_also_stops_publishing_capacity_as_the_author_did() -> None:
    tracking, no_tracking = KEP1472.variants
    assert cluster_config(DISTRIBUTED, tracking).driver.publish_capacity is True
    assert cluster_config(DISTRIBUTED, no_tracking).driver.publish_capacity is False
    # Central keeps publishing (ignored by kube-scheduler), as the earlier runs did.
    assert cluster_config(SETUP, no_tracking).driver.publish_capacity is True


def test_gates_of_the_setup_go_to_every_variant_beneath_its_own() -> None:
    setup = dataclasses.replace(
        SETUP,
        scheduler_gates={"NominatedNodeNameForExpectation": False, "StorageCapacityScoring": True},
    )
    config = cluster_config(setup, KEP1472.variants[1])
    assert config.feature_gates_for(Component.SCHEDULER) == {
        "NominatedNodeNameForExpectation": False,
        "StorageCapacityScoring": False,
    }
