"""The cluster a scale run brings up, and how it reads the driver's counters."""

from __future__ import annotations

from csi_harness._internal.providers.local.config import Component
from csi_harness._internal.scale.comparisons import KEP1472, SCORING
from csi_harness._internal.scale.experiment import (
    JOURNAL_SIZE,
    Setup,
    _counted_calls,
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


def test_counted_calls_are_read_by_method_and_code_from_the_metrics_text() -> None:
    text = "\n".join(
        [
            "# HELP csi_mock_rpc_total CSI RPCs handled, by method and status code",
            'csi_mock_rpc_total{code="OK",method="CreateVolume"} 12.0',
            'csi_mock_rpc_total{code="RESOURCE_EXHAUSTED",method="CreateVolume"} 3.0',
            'csi_mock_rpc_total{code="OK",method="GetCapacity"} 99.0',
            'csi_mock_rpc_created{code="OK",method="CreateVolume"} 1.7e9',
        ]
    )
    assert _counted_calls(text, "CreateVolume") == {"OK": 12, "RESOURCE_EXHAUSTED": 3}
