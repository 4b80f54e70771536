"""``ClusterRuns``: on a cluster of real nodes, kube-scheduler is restarted with a
variant's gates and configuration only when they differ from what it runs, left as
it is where the cluster cannot restart it (with the gates it runs recorded), and put
back at the end."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from csi_harness._internal.core.unsupported import Unsupported
from csi_harness._internal.scale.comparisons import KEP1472, SCORING, SCORING_GATE
from csi_harness._internal.scale.experiment import Setup
from csi_harness._internal.scale.on_cluster import ClusterRuns
from csi_harness._internal.scale.workload import SizeRange

SETUP = Setup(nodes=3, pool="10Gi", pods=3, sizes=SizeRange.parse("1Gi"), seed=1)


class FixedScheduler:
    """A cluster whose kube-scheduler's gates can be read (``FeatureGates``), but which
    cannot restart it (an existing cluster)."""

    name = "fake"

    def __init__(self, gates: dict[str, bool]) -> None:
        self.gates = gates

    def scheduler_feature_gate(self, gate: str) -> bool | None:
        return self.gates.get(gate)

    def kubelet_feature_gate(self, gate: str) -> bool | None:
        return None


class FakeScheduler(FixedScheduler):
    """A cluster that can also restart its kube-scheduler (``SchedulerRestarts``)."""

    def __init__(self, gates: dict[str, bool]) -> None:
        super().__init__(gates)
        self.restarts: list[tuple[dict[str, object], dict[str, bool]]] = []

    @property
    def scheduler_config(self) -> dict[str, object]:
        return dict(self.restarts[-1][0]) if self.restarts else {}

    def restart_scheduler(
        self, scheduler: Mapping[str, object], feature_gates: Mapping[str, bool] | None = None
    ) -> None:
        self.restarts.append((dict(scheduler), dict(feature_gates or {})))
        self.gates.update(feature_gates or {})


def runs(cluster: FixedScheduler) -> ClusterRuns:
    return ClusterRuns(cast(Any, cluster), "kind")


def test_a_scheduler_running_the_asked_gates_is_not_restarted() -> None:
    cluster = FakeScheduler({SCORING_GATE: False})
    gates = runs(cluster)._scheduler_for(SETUP, KEP1472.variants[0], lambda _: None)
    assert gates == {SCORING_GATE: False}
    assert cluster.restarts == []


def test_a_gate_left_at_its_default_is_set_once_for_every_variant_that_asks_it() -> None:
    cluster = FakeScheduler({})
    cluster_runs = runs(cluster)
    for variant in KEP1472.variants:
        cluster_runs._scheduler_for(SETUP, variant, lambda _: None)
    assert cluster.restarts == [({}, {SCORING_GATE: False})]
    cluster_runs.restore()
    assert cluster.restarts[-1] == ({}, {})


def test_a_variant_configuration_restarts_and_the_next_variant_gets_the_default_back() -> None:
    cluster = FakeScheduler({SCORING_GATE: True})
    cluster_runs = runs(cluster)
    _off, on, inverted = SCORING.variants
    for variant in (on, inverted, on):
        cluster_runs._scheduler_for(SETUP, variant, lambda _: None)
    assert [config for config, _ in cluster.restarts] == [inverted.scheduler, {}]


def test_where_the_scheduler_cannot_be_restarted_the_run_records_what_it_runs() -> None:
    said: list[str] = []
    cluster = FixedScheduler({})
    gates = runs(cluster)._scheduler_for(SETUP, KEP1472.variants[0], said.append)
    assert gates == {}
    assert "unknown: StorageCapacityScoring" in said[-1]
    assert "asked for StorageCapacityScoring=false" in said[-1]
    with pytest.raises(Unsupported, match="scoring-inverted needs its own kube-scheduler"):
        runs(cluster)._scheduler_for(SETUP, SCORING.variants[2], said.append)
