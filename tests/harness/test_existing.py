"""Any cluster by its kubeconfig: which nodes the suites may use, what it cannot do, and
how drivers are deployed into it side by side (against tests/harness/deploy/fake_api.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from lightkube.codecs import from_dict
from lightkube.resources.core_v1 import Namespace

from csi_harness._internal.deploy.incluster import DriverPodsFailed
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube import apiproxy
from csi_harness._internal.kube.csinode import CSINodeResource
from csi_harness._internal.providers.base import (
    ClusterNode,
    ComponentMetrics,
    FeatureGates,
    ImageDeployments,
    KubeletRestarts,
    SchedulerRestarts,
    Unsupported,
    component_metrics,
    kubelet_restarts,
    scheduler_restarts,
)
from csi_harness._internal.providers.kubeconfig_cluster import KubeconfigCluster
from tests.harness.deploy.fake_api import FakeApi, ready_status, write_kubeconfig


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


def cluster(kube: FakeKube) -> KubeconfigCluster:
    existing = KubeconfigCluster(Path("/nowhere/kubeconfig"), sidecar_images={"x": "y"})
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


def test_a_foreign_cluster_tells_its_feature_gates_and_can_do_nothing_that_needs_its_making() -> (
    None
):
    foreign = cluster(FakeKube([]))
    assert isinstance(foreign, FeatureGates)
    assert not isinstance(foreign, SchedulerRestarts)
    assert not isinstance(foreign, KubeletRestarts)
    assert not isinstance(foreign, ComponentMetrics)


def test_restarting_the_scheduler_of_a_foreign_cluster_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="did not make"):
        scheduler_restarts(cluster(FakeKube([])))


def test_restarting_a_kubelet_of_a_foreign_cluster_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="only on the clusters it brings up"):
        kubelet_restarts(cluster(FakeKube([])))


def test_the_metrics_of_a_foreign_clusters_control_plane_are_unsupported() -> None:
    with pytest.raises(Unsupported, match="only on the clusters it brings up"):
        component_metrics(cluster(FakeKube([])))


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


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        ({"w1": {"CSIVolumeHealth": True}, "w2": {"CSIVolumeHealth": True}}, True),
        ({"w1": {"CSIVolumeHealth": False}, "w2": {"CSIVolumeHealth": False}}, False),
        ({"w1": {"CSIVolumeHealth": True}, "w2": {}}, None),  # the kubelets differ
        ({"w1": {"CSIVolumeHealth": True}}, None),  # w2 cannot be asked (404)
    ],
)
def test_kubelet_feature_gates_are_read_from_every_kubelets_configz(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    gates: dict[str, dict[str, bool]],
    expected: bool | None,
) -> None:
    asked: list[str] = []

    def configz(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        node = request.url.path.split("/")[4]
        if node not in gates:
            return httpx.Response(404, json={"kind": "Status"})
        return httpx.Response(200, json={"kubeletconfig": {"featureGates": gates[node]}})

    real_client = httpx.Client
    monkeypatch.setattr(
        apiproxy.httpx,
        "Client",
        lambda **kw: real_client(transport=httpx.MockTransport(configz), headers=kw["headers"]),
    )
    existing = KubeconfigCluster(write_kubeconfig(tmp_path / "kubeconfig"), sidecar_images={})
    existing._kube = FakeKube([node("w1"), node("w2")])  # type: ignore[assignment]

    assert existing.kubelet_feature_gate("CSIVolumeHealth") is expected
    assert asked[0] == "/api/v1/nodes/w1/proxy/configz"


# -- drivers side by side --------------------------------------------------------------

SIDECARS = {"csi-provisioner": "p:v6", "csi-attacher": "a:v4", "csi-resizer": "r:v1"}


def api_with_nodes(**fields: Any) -> FakeApi:
    api = FakeApi(nodes=["w1", "w2"], **fields)
    for name in api.nodes:
        api.objects[("Node", "", name)] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {}},
        }
    return api


def deploying_cluster(api: FakeApi, tmp_path: Path) -> KubeconfigCluster:
    existing = KubeconfigCluster(write_kubeconfig(tmp_path / "kubeconfig"), sidecar_images=SIDECARS)
    existing._kube = api  # type: ignore[assignment]
    return existing


def own(tag: str) -> DriverDeployment:
    return DriverDeployment(name=f"{tag}.csi-mock", suffix=f"-{tag}")


def settle(api: FakeApi) -> None:
    """Let the namespace controller and the kubelets finish what they do later."""
    for _ in range(api.termination_polls + api.deregistration_polls + 1):
        api.list(Namespace)
        api.list(CSINodeResource)


def drivers_of(api: FakeApi) -> set[str]:
    return {name for kind, _, name in api.objects if kind == "CSIDriver"}


def test_drivers_run_side_by_side(tmp_path: Path) -> None:
    assert deploying_cluster(api_with_nodes(), tmp_path).concurrent_drivers


def label_patches(api: Any) -> dict[str, list[dict[str, Any]]]:
    """Node -> the label changes patched onto it, in order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in api.events:
        if event.verb == "patch" and event.kind == "Node":
            body, _ = event.body
            found.setdefault(event.name, []).append(body["metadata"]["labels"])
    return found


def test_deploy_driver_deploys_beside_the_clusters_driver_and_remove_driver_removes_it(
    tmp_path: Path,
) -> None:
    api = api_with_nodes()
    existing = deploying_cluster(api, tmp_path)
    own_driver = existing.redeploy_driver(DriverDeployment())
    a = existing.deploy_driver(own("a"))
    b = existing.deploy_driver(own("b"))
    assert existing.driver is own_driver
    assert drivers_of(api) == {"csi-mock.example", "a.csi-mock", "b.csi-mock"}
    assert [n.name for n in a.nodes] == ["w1", "w2"]
    existing.remove_driver(a)
    settle(api)
    assert existing.driver is own_driver
    assert drivers_of(api) == {"csi-mock.example", "b.csi-mock"}
    # Its topology labels are taken off every node; no other driver's.
    keys = {"topology.a.csi-mock/node": None, "topology.a.csi-mock/zone": None}
    assert label_patches(api) == {"w1": [keys], "w2": [keys]}
    assert api.namespaced("csi-mock-a") == []
    assert api.namespaced("csi-mock-b")
    assert api.registered == {n: {"csi-mock.example", "b.csi-mock"} for n in ("w1", "w2")}
    existing.remove_driver(b)
    existing.remove_driver()  # the cluster's own: its labels are the cluster's
    settle(api)
    assert [len(patches) for patches in label_patches(api).values()] == [2, 2]
    assert existing.driver is None
    assert drivers_of(api) == set()
    assert {ns for _, ns, _ in api.objects} == {"", "csi-mock"}  # as ``remove`` promises
    assert api.pods == [] and api.capacities == []


def test_deploy_driver_needs_a_suffix_and_a_name_of_its_own(tmp_path: Path) -> None:
    existing = deploying_cluster(api_with_nodes(), tmp_path)
    with pytest.raises(ValueError, match="suffix"):
        existing.deploy_driver(DriverDeployment(name="x.csi-mock"))
    existing.redeploy_driver(DriverDeployment())
    with pytest.raises(ValueError, match="name of its own"):
        existing.deploy_driver(DriverDeployment(suffix="-x"))


def test_a_driver_that_cannot_start_is_removed_again(tmp_path: Path) -> None:
    def status(role: str, node: str) -> dict[str, Any]:
        if role != "controller":
            return ready_status(role, node)
        waiting = {"reason": "ErrImageNeverPull", "message": "image not present"}
        return {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "csi-attacher",
                    "image": "a:v4",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": waiting},
                }
            ],
        }

    api = api_with_nodes(pod_status=status)
    existing = deploying_cluster(api, tmp_path)
    with pytest.raises(DriverPodsFailed, match="ErrImageNeverPull"):
        existing.deploy_driver(own("a"))
    settle(api)
    assert existing.driver is None
    assert drivers_of(api) == set()
    assert [key for key in api.objects if key[0] != "Node"] == []


def test_admin_instances_are_those_of_the_clusters_own_driver(tmp_path: Path) -> None:
    existing = deploying_cluster(api_with_nodes(), tmp_path)
    assert existing.admin_instances() == {}
    existing.redeploy_driver(DriverDeployment())
    existing.deploy_driver(own("a"))
    clients = existing.admin_instances()
    try:
        assert sorted(clients) == ["controller", "w1", "w2"]
        for client in clients.values():
            assert "/namespaces/csi-mock/pods/" in client.endpoint.base_url
    finally:
        for client in clients.values():
            client.close()


def test_a_driver_deployed_elsewhere_is_refused(tmp_path: Path) -> None:
    existing = deploying_cluster(api_with_nodes(), tmp_path)
    with pytest.raises(TypeError, match="not deployed by this cluster"):
        existing.remove_driver(object())  # type: ignore[arg-type]


def test_a_foreign_cluster_runs_csi_mock_from_the_images_it_names() -> None:
    foreign = cluster(FakeKube([]))
    assert isinstance(foreign, ImageDeployments)
    assert foreign.sidecar_images == {"x": "y"}
