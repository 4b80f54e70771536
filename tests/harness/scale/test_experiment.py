"""The cluster a scale run brings up, and how it reads the driver's counters."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from csi_harness._internal.deploy.spec import ProvisionerMode, node_pool_name
from csi_harness._internal.providers.local.config import Component
from csi_harness._internal.scale.comparisons import KEP1472, SCORING
from csi_harness._internal.scale.experiment import (
    JOURNAL_SIZE,
    RunResult,
    Setup,
    _counted_calls,
    _read_driver,
    cluster_config,
    create_paced,
)
from csi_harness._internal.scale.workload import SizeRange, creation_offsets

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


@dataclasses.dataclass
class FakeRecord:
    code: str
    time: float


@dataclasses.dataclass
class FakeAdmin:
    records: list[FakeRecord]
    pool: Pool

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def journal(self, method: str) -> list[FakeRecord]:
        assert method == "CreateVolume"
        return self.records

    def metrics_text(self) -> str:
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.code] = counts.get(record.code, 0) + 1
        return "\n".join(
            f'csi_mock_rpc_total{{code="{code}",method="CreateVolume"}} {n}.0'
            for code, n in counts.items()
        )

    def pools(self) -> list[Pool]:
        return [self.pool]


@dataclasses.dataclass
class Pool:
    name: str
    used: int
    total: int


def test_distributed_counts_every_nodes_create_volume_answers_and_its_pool() -> None:
    names = ["node-2", "node-3"]
    admins = {
        "node-2": FakeAdmin(
            [FakeRecord("OK", 101.0), FakeRecord("RESOURCE_EXHAUSTED", 102.0)],
            Pool(node_pool_name("node-2"), 1, 10),
        ),
        "node-3": FakeAdmin([FakeRecord("OK", 103.0)], Pool(node_pool_name("node-3"), 2, 10)),
    }
    driver = SimpleNamespace(
        distributed=True,
        driver_nodes=[SimpleNamespace(name=n) for n in names],
        nodes=[SimpleNamespace(name=n, runs_pods=False) for n in names],
        admin=lambda instance: admins[instance],
    )
    result = RunResult("v", "v", 2, 10, 3, "1Gi", 1, 3, True, {})
    _read_driver(cast(Any, driver), 100.0, result)
    assert (result.create_volume_calls, result.create_volume_ok) == (3, 2)
    assert result.resource_exhausted == 1
    assert result.exhausted_times == [2.0]
    assert result.journal_complete
    assert result.pool_used == {"node-2": 1, "node-3": 2}


def test_paced_creation_does_not_let_a_slow_answer_hold_back_the_next() -> None:
    created: list[tuple[str, float]] = []

    def slow_create(manifest: dict[str, Any]) -> None:
        time.sleep(0.3)
        created.append((manifest["name"], time.monotonic()))

    manifests = [{"name": str(i)} for i in range(10)]
    start = time.monotonic()
    create_paced(slow_create, manifests, creation_offsets(10, 100.0), start)
    # One after the other this takes 3 s; paced with parallel creators about 0.4 s.
    assert time.monotonic() - start < 2.0
    assert sorted(name for name, _ in created) == sorted(m["name"] for m in manifests)


def test_paced_creation_raises_the_first_failure_and_stops_creating() -> None:
    created: list[str] = []

    def create(manifest: dict[str, Any]) -> None:
        if manifest["name"] == "2":
            raise RuntimeError("refused")
        created.append(manifest["name"])

    manifests = [{"name": str(i)} for i in range(50)]
    with pytest.raises(RuntimeError, match="refused"):
        create_paced(create, manifests, creation_offsets(50, 100.0), time.monotonic())
    assert len(created) < 49


def test_without_a_rate_objects_are_created_one_after_the_other_in_order() -> None:
    created: list[str] = []
    manifests = [{"name": str(i)} for i in range(5)]
    create_paced(lambda m: created.append(m["name"]), manifests, creation_offsets(5, None), 0.0)
    assert created == ["0", "1", "2", "3", "4"]
