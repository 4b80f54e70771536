"""Any cluster by its kubeconfig: which nodes the suites may use, what it cannot do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lightkube.codecs import from_dict

from harness.cluster import ClusterNode, Unsupported
from harness.existing import ExistingCluster


def node(
    name: str, *, zone: str | None = None, control_plane: bool = False, taint: str | None = None
) -> Any:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    spec = (
        {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": taint}]}
        if taint
        else {}
    )
    return from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
    )


def scheduler_pod(command: list[str]) -> Any:
    return from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kube-scheduler-cp"},
            "spec": {"containers": [{"name": "kube-scheduler", "command": command}]},
        }
    )


class FakeKube:
    def __init__(self, nodes: list[Any], pods: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.nodes, self.pods = nodes, list(pods)

    def list(self, resource: Any, **_: Any) -> list[Any]:
        return self.nodes if resource.__name__ == "Node" else self.pods


def cluster(kube: FakeKube) -> ExistingCluster:
    existing = ExistingCluster(Path("/nowhere/kubeconfig"), sidecar_images={"x": "y"})
    existing._kube = kube  # type: ignore[assignment]
    return existing


def test_nodes_leave_out_a_tainted_control_plane_and_keep_zones() -> None:
    kube = FakeKube(
        [
            node("w2", zone="b"),
            node("cp", control_plane=True, taint="NoSchedule"),
            node("w1", zone="a"),
        ]
    )
    assert cluster(kube).nodes() == [
        ClusterNode("w1", "a", runs_pods=True),
        ClusterNode("w2", "b", runs_pods=True),
    ]


def test_an_untainted_control_plane_takes_pods_and_counts() -> None:
    kube = FakeKube([node("single", control_plane=True)])
    assert [n.name for n in cluster(kube).nodes()] == ["single"]


def test_restarting_the_scheduler_of_a_foreign_cluster_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="did not make"):
        cluster(FakeKube([])).restart_scheduler({"profiles": []})


def test_a_cluster_without_nodes_that_take_pods_is_refused() -> None:
    kube = FakeKube([node("cp", control_plane=True, taint="NoSchedule")])
    with pytest.raises(Unsupported, match="no node that takes pods"):
        cluster(kube).check_reachable()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["kube-scheduler", "--feature-gates=A=true,StorageCapacityScoring=false"], False),
        (["kube-scheduler", "--feature-gates=StorageCapacityScoring=true"], True),
        (["kube-scheduler", "--v=2"], None),
    ],
)
def test_scheduler_feature_gates_are_read_from_the_scheduler_pod(
    command: list[str], expected: bool | None
) -> None:
    kube = FakeKube([], [scheduler_pod(command)])
    assert cluster(kube).scheduler_feature_gate("StorageCapacityScoring") is expected
