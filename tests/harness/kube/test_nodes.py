"""Picking nodes by what a test needs (csi_harness/_internal/providers/base.py), never by name."""

from __future__ import annotations

import pytest

from csi_harness._internal.kube.nodes import (
    ClusterNode,
    Unsupported,
    pick_nodes,
    scheduling_nodes,
)

REAL_A = ClusterNode("node-1", "zone-a", runs_pods=True)
SIMULATED_B = ClusterNode("node-2", "zone-b", runs_pods=False)
SIMULATED_A = ClusterNode("node-3", "zone-a", runs_pods=False)
LOCAL = [SIMULATED_A, REAL_A, SIMULATED_B]
"""The local provider's default nodes, out of order."""
KIND = [ClusterNode(f"worker-{i}", None, runs_pods=True) for i in (2, 1, 3)]


def test_the_first_nodes_by_name_are_picked() -> None:
    assert pick_nodes(LOCAL, 2) == [REAL_A, SIMULATED_B]


def test_nodes_are_picked_by_whether_they_run_pods() -> None:
    assert pick_nodes(LOCAL, 1, runs_pods=True) == [REAL_A]
    assert pick_nodes(LOCAL, 2, runs_pods=False) == [SIMULATED_B, SIMULATED_A]


def test_nodes_are_picked_by_zone() -> None:
    assert pick_nodes(LOCAL, 2, zone="zone-a") == [REAL_A, SIMULATED_A]
    assert pick_nodes(LOCAL, 1, zone="zone-a", runs_pods=False) == [SIMULATED_A]


def test_picking_none_gives_none() -> None:
    assert pick_nodes(KIND, 0, runs_pods=False) == []


@pytest.mark.parametrize(
    ("count", "runs_pods", "zone", "message"),
    [
        (4, None, None, "needs 4 nodes; the cluster has 3"),
        (2, True, None, "needs 2 nodes that run pods; the cluster has 1"),
        (3, False, None, "needs 3 simulated nodes; the cluster has 2"),
        (2, None, "zone-b", "needs 2 nodes in zone zone-b; the cluster has 1"),
    ],
)
def test_too_few_matching_nodes_is_unsupported_saying_how_many(
    count: int, runs_pods: bool | None, zone: str | None, message: str
) -> None:
    with pytest.raises(Unsupported) as raised:
        pick_nodes(LOCAL, count, runs_pods=runs_pods, zone=zone)
    assert str(raised.value) == message


def test_a_cluster_without_simulated_nodes_has_none_to_pick() -> None:
    with pytest.raises(Unsupported, match="needs 1 simulated nodes; the cluster has 0"):
        pick_nodes(KIND, 1, runs_pods=False)


def test_pods_that_only_need_scheduling_go_to_the_simulated_nodes_when_there_are_some() -> None:
    assert scheduling_nodes(LOCAL) == [SIMULATED_B, SIMULATED_A]


def test_pods_that_only_need_scheduling_go_to_any_node_where_every_node_is_real() -> None:
    assert [n.name for n in scheduling_nodes(KIND)] == ["worker-1", "worker-2", "worker-3"]
