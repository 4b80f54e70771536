"""What a run reads from the driver: CreateVolume answers by code from the journals
and counters of every provisioning instance, and the pools."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, cast

from csi_harness._internal.deploy.spec import (
    CONTROLLER,
    DriverDeployment,
    ProvisionerMode,
    node_pool_name,
)
from csi_harness._internal.scale.driver_readings import counted_calls, read_driver
from csi_harness._internal.scale.run_result import RunResult


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
    assert counted_calls(text, "CreateVolume") == {"OK": 12, "RESOURCE_EXHAUSTED": 3}


@dataclasses.dataclass
class FakeRecord:
    code: str
    time: float
    request: dict[str, Any] = dataclasses.field(default_factory=dict)


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
            [FakeRecord("OK", 101.0, {"name": "pvc-a"}), FakeRecord("RESOURCE_EXHAUSTED", 102.0)],
            Pool(node_pool_name("node-2"), 1, 10),
        ),
        "node-3": FakeAdmin(
            [FakeRecord("OK", 103.0, {"name": "pvc-b"})], Pool(node_pool_name("node-3"), 2, 10)
        ),
    }
    driver = SimpleNamespace(
        spec=DriverDeployment(provisioner_mode=ProvisionerMode.DISTRIBUTED),
        nodes=[SimpleNamespace(name=n, runs_pods=False) for n in names],
        admin=lambda instance: admins[instance],
    )
    result = RunResult("v", "v", 2, 10, 3, "1Gi", 1, 3, True, {})
    read_driver(cast(Any, driver), 100.0, result, names)
    assert (result.create_volume_calls, result.create_volume_ok) == (3, 2)
    assert result.resource_exhausted == 1
    assert result.exhausted_times == [2.0]
    assert result.journal_complete
    assert result.pool_used == {"node-2": 1, "node-3": 2}


def test_only_the_burst_nodes_pools_are_read() -> None:
    """The pools read are those of the nodes the burst could use (on the local provider
    the simulated ones, not the real kubelet's node), from the central controller."""
    pools = [Pool(node_pool_name(n), 5, 10) for n in ("kubelet-node", "node-2")]
    admin = FakeAdmin([FakeRecord("OK", 101.0)], pools[0])
    admin.pools = lambda: pools  # type: ignore[method-assign]
    asked: list[str] = []

    def admin_of(instance: str) -> FakeAdmin:
        asked.append(instance)
        return admin

    driver = SimpleNamespace(
        spec=DriverDeployment(provisioner_mode=ProvisionerMode.CENTRAL),
        nodes=[SimpleNamespace(name=n) for n in ("kubelet-node", "node-2")],
        admin=admin_of,
    )
    result = RunResult("v", "v", 1, 10, 1, "1Gi", 1, 1, True, {})
    read_driver(cast(Any, driver), 100.0, result, ["node-2"])
    assert asked == [CONTROLLER]
    assert result.pool_used == {"node-2": 5}
    assert result.pool_total == {"node-2": 10}


def test_a_volume_answered_ok_twice_is_counted_once() -> None:
    """external-provisioner may repeat a CreateVolume it already got an answer to; the
    driver answers OK again for the same name, and it is one volume (seen once in CI:
    48 OK answers for 47 claims)."""
    records = [
        FakeRecord("OK", 101.0, {"name": "pvc-a"}),
        FakeRecord("OK", 102.0, {"name": "pvc-a"}),
        FakeRecord("OK", 103.0, {"name": "pvc-b"}),
    ]
    driver = SimpleNamespace(
        spec=DriverDeployment(provisioner_mode=ProvisionerMode.CENTRAL),
        nodes=[SimpleNamespace(name="node-2")],
        admin=lambda instance: FakeAdmin(records, Pool(node_pool_name("node-2"), 3, 10)),
    )
    result = RunResult("v", "v", 1, 10, 2, "1Gi", 1, 2, True, {})
    read_driver(cast(Any, driver), 100.0, result, ["node-2"])
    assert (result.create_volume_calls, result.create_volume_ok) == (3, 2)
