"""What a scale run reads from the driver at its end: every CreateVolume answer from
the journals of the instances that provision, checked against their counters, and
each simulated node's pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from csi_harness._internal.deploy.spec import CONTROLLER, ProvisionerMode, node_pool_name
from csi_harness._internal.providers.base import Driver

if TYPE_CHECKING:
    from csi_harness._internal.scale.run_result import RunResult


def read_driver(
    driver: Driver, wall_start: float, result: RunResult, burst_nodes: Sequence[str]
) -> None:
    """CreateVolume answers from the journals of the instances that provision (the
    controller, or every node's with distributed provisioning), pool usage of each of
    ``burst_nodes`` (from the same instances)."""
    records: list[Any] = []
    counted: dict[str, int] = {}
    pools: dict[str, Any] = {}
    complete = True
    distributed = driver.spec.provisioner_mode is ProvisionerMode.DISTRIBUTED
    provisioning = [n.name for n in driver.nodes] if distributed else [CONTROLLER]
    for instance in provisioning:
        with driver.admin(instance) as admin:
            journal = admin.journal(method="CreateVolume")
            calls = counted_calls(admin.metrics_text(), "CreateVolume")
            pools |= {pool.name: pool for pool in admin.pools()}
        whole = len(journal) >= sum(calls.values())
        complete = complete and whole
        exhausted = sum(1 for r in journal if r.code == "RESOURCE_EXHAUSTED")
        if not whole:
            exhausted = calls.get("RESOURCE_EXHAUSTED", 0)
        if exhausted:
            result.exhausted_by_instance[instance] = exhausted
        records += journal
        for code, n in calls.items():
            counted[code] = counted.get(code, 0) + n
    result.journal_complete = complete
    codes: dict[str, int] = {}
    for record in records:
        codes[record.code] = codes.get(record.code, 0) + 1
        if record.code == "RESOURCE_EXHAUSTED":
            result.exhausted_times.append(record.time - wall_start)
    if not result.journal_complete:
        codes = counted
    result.create_volume_calls = sum(codes.values())
    answered_ok = codes.pop("OK", 0)
    # external-provisioner may ask again for a volume it already got (once in CI: 48 OK
    # answers for 47 claims, every claim bound; a claim's volume has one name): with the
    # whole journal, a name answered OK twice is one volume; without it, the counters.
    result.create_volume_ok = (
        len({record.request.get("name") for record in records if record.code == "OK"})
        if result.journal_complete
        else answered_ok
    )
    result.resource_exhausted = codes.pop("RESOURCE_EXHAUSTED", 0)
    result.other_errors = codes
    result.exhausted_times.sort()
    for node in burst_nodes:
        pool = pools.get(node_pool_name(node))
        if pool is not None:
            result.pool_used[node] = pool.used
            result.pool_total[node] = pool.total


def counted_calls(metrics: str, method: str) -> dict[str, int]:
    """csi_mock_rpc_total of ``method`` by code, from the Prometheus text."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "csi_mock_rpc_total" and sample.labels.get("method") == method:
                code = sample.labels.get("code", "")
                counts[code] = counts.get(code, 0) + int(sample.value)
    return counts
