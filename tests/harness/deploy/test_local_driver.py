"""LocalDriver as a ``csi_harness._internal.providers.base.Driver``: its instances and components,
the CSI
calls the harness makes itself, and component logs of this deployment only."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_harness._internal.core.processes import Supervisor
from csi_harness._internal.core.run_state import RunState
from csi_harness._internal.core.tools import Tools
from csi_harness._internal.deploy.local import DriverNode, LocalDriver
from csi_harness._internal.deploy.spec import NODE_TOPOLOGY_KEY, DriverDeployment
from csi_harness._internal.providers.base import ClusterNode
from csi_mock.proto import csi_pb2, csi_pb2_grpc

NODES = [ClusterNode("node-2", "zone-b", runs_pods=False), ClusterNode("node-1", "zone-a", True)]


@pytest.fixture
def root() -> Iterator[Path]:
    # Unix socket paths must stay under 108 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="ld-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def local_driver(root: Path, **fields: Any) -> LocalDriver:
    return LocalDriver(
        DriverDeployment(**fields),
        root=root,
        tools=Tools(root / "bin"),
        supervisor=Supervisor(RunState(run_dir=root), root / "logs"),
        nodes=[DriverNode(node, root / f"kubelet-{node.name}") for node in NODES],
        kubeconfig=root / "kubeconfig",
        kube=None,  # type: ignore[arg-type]
    )


def test_nodes_are_the_cluster_nodes_sorted_by_name(root: Path) -> None:
    driver = local_driver(root)
    assert driver.nodes == sorted(NODES, key=lambda n: n.name)
    assert [n.simulated for n in driver.driver_nodes] == [False, True]
    assert driver.driver_nodes[0].csi_socket == root / "kubelet-node-1/plugins/csi-mock/csi.sock"


def test_central_deployment_has_a_controller_and_an_instance_per_node(root: Path) -> None:
    """node-2 is simulated: its instance is served by the process of all simulated
    nodes' instances; node-1 has a kubelet and a process of its own."""
    driver = local_driver(root)
    assert driver.instances() == ["controller", "node-1", "node-2"]
    assert driver.admin_socket("node-2") == root / "node-2" / "admin.sock"
    assert driver.components() == [
        "csi-mock-controller",
        "csi-mock-node-node-1",
        "csi-mock-simulated-nodes",
        "csi-provisioner",
        "csi-attacher",
        "csi-resizer",
    ]


def test_distributed_deployment_has_only_node_instances_each_with_a_provisioner(
    root: Path,
) -> None:
    driver = local_driver(root, provisioner_mode="distributed")
    assert driver.instances() == ["node-1", "node-2"]
    assert driver.components() == [
        "csi-mock-node-node-1",
        "csi-mock-simulated-nodes",
        "csi-provisioner-node-1",
        "csi-provisioner-node-2",
    ]
    with pytest.raises(ValueError, match="no controller instance"):
        driver.admin("controller")


def test_an_unknown_instance_or_component_is_refused_by_name(root: Path) -> None:
    driver = local_driver(root)
    with pytest.raises(ValueError, match="'node-9' is no csi-mock instance"):
        driver.admin("node-9")
    # The driver's sidecars only, never the cluster's own processes.
    with pytest.raises(ValueError, match="'kube-scheduler' is no component of this driver"):
        driver.stop_component("kube-scheduler")
    with pytest.raises(ValueError, match="'etcd' is no component"):
        driver.component_log("etcd")


def test_admin_client_talks_to_the_instances_socket(root: Path) -> None:
    with local_driver(root).admin("node-1") as client:
        assert client.endpoint.socket == str(root / "node-1" / "admin.sock")


def test_component_log_starts_where_this_deployment_started_the_component(root: Path) -> None:
    driver = local_driver(root)
    log = driver.supervisor.log_path("csi-attacher")
    log.parent.mkdir(parents=True)
    log.write_text("a previous driver's attacher\n")
    driver._start_process("csi-attacher", ["sh", "-c", "echo this one"])
    driver.supervisor.stop("csi-attacher")
    text = driver.component_log("csi-attacher")
    assert "previous" not in text
    assert text.startswith("=== ") and "sh -c echo this one" in text


class _RecordingSupervisor(Supervisor):
    """Records what would be started instead of starting it."""

    def __init__(self, root: Path) -> None:
        super().__init__(RunState(run_dir=root), root / "logs")
        self.started: dict[str, list[str]] = {}

    def start(self, name: str, argv: Any, **_: Any) -> Any:
        self.started[name] = list(argv)

    def check_alive(self, names: Any = None) -> None:
        pass


def started_sidecars(root: Path, **fields: Any) -> dict[str, list[str]]:
    driver = local_driver(root, **fields)
    supervisor = _RecordingSupervisor(root)
    driver.supervisor = supervisor
    driver._start_sidecars()
    assert sorted(supervisor.started) == sorted(
        driver.process(c) for c in driver.components() if not c.startswith("csi-mock")
    )
    return supervisor.started


def test_central_resizer_dials_the_controller_socket_with_the_sidecars_credentials(
    root: Path,
) -> None:
    started = started_sidecars(root, suffix="-abc")
    resizer = started["csi-resizer-abc"]
    assert resizer[0] == str(root / "bin" / "csi-resizer")
    assert f"--csi-address={root / 'controller' / 'csi.sock'}" in resizer
    assert f"--kubeconfig={root / 'kubeconfig'}" in resizer
    assert "--leader-election=false" in resizer
    for sidecar in ("csi-provisioner-abc", "csi-attacher-abc"):
        assert started[sidecar][1:3] == resizer[1:3]


def test_a_deployment_without_the_resizer_starts_none(root: Path) -> None:
    started = started_sidecars(root, suffix="-abc", resizer=False)
    assert sorted(started) == ["csi-attacher-abc", "csi-provisioner-abc"]


def test_distributed_deployment_starts_no_resizer(root: Path) -> None:
    started = started_sidecars(root, provisioner_mode="distributed")
    assert sorted(started) == ["csi-provisioner-node-1", "csi-provisioner-node-2"]
    socket = root / "kubelet-node-2" / "plugins" / "csi-mock" / "csi.sock"
    assert f"--csi-address={socket}" in started["csi-provisioner-node-2"]
    assert "--node-deployment" in started["csi-provisioner-node-2"]


class _Controller(csi_pb2_grpc.ControllerServicer):
    def __init__(self) -> None:
        self.requests: list[csi_pb2.GetCapacityRequest] = []

    def GetCapacity(
        self, request: csi_pb2.GetCapacityRequest, context: grpc.ServicerContext
    ) -> csi_pb2.GetCapacityResponse:
        self.requests.append(request)
        response = csi_pb2.GetCapacityResponse(available_capacity=7 << 30)
        response.maximum_volume_size.value = 3 << 30
        return response


class _Node(csi_pb2_grpc.NodeServicer):
    def NodeGetInfo(
        self, request: csi_pb2.NodeGetInfoRequest, context: grpc.ServicerContext
    ) -> csi_pb2.NodeGetInfoResponse:
        return csi_pb2.NodeGetInfoResponse(
            node_id="id-of-node-2",
            accessible_topology=csi_pb2.Topology(segments={"zone": "zone-b"}),
        )


def serve(socket: Path, controller: _Controller) -> grpc.Server:
    socket.parent.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    csi_pb2_grpc.add_ControllerServicer_to_server(controller, server)
    csi_pb2_grpc.add_NodeServicer_to_server(_Node(), server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    return server


def test_get_capacity_asks_the_controller_for_the_segment_and_class_parameters(
    root: Path,
) -> None:
    driver = local_driver(root)
    controller = _Controller()
    server = serve(driver.controller_socket, controller)
    try:
        answer = driver.get_capacity({"node": "node-1"}, {"kind": "mirrored"})
    finally:
        server.stop(None)
    assert answer == (7 << 30, 3 << 30)
    (request,) = controller.requests
    assert dict(request.parameters) == {"kind": "mirrored"}
    assert dict(request.accessible_topology.segments) == {"node": "node-1"}


def test_distributed_get_capacity_asks_the_instance_of_the_segments_node(root: Path) -> None:
    driver = local_driver(root, provisioner_mode="distributed")
    controller = _Controller()
    (node_2,) = [n for n in driver.driver_nodes if n.name == "node-2"]
    server = serve(node_2.csi_socket, controller)
    try:
        assert driver.get_capacity({NODE_TOPOLOGY_KEY: "node-2"}, {}) == (7 << 30, 3 << 30)
    finally:
        server.stop(None)
    assert len(controller.requests) == 1
    with pytest.raises(ValueError, match=re.escape(f"the segment needs {NODE_TOPOLOGY_KEY}")):
        driver.get_capacity({"zone": "zone-a"}, {})


def test_node_get_info_asks_the_nodes_own_instance(root: Path) -> None:
    driver = local_driver(root)
    (node_2,) = [n for n in driver.driver_nodes if n.name == "node-2"]
    server = serve(node_2.csi_socket, _Controller())
    try:
        assert driver.node_get_info("node-2") == ("id-of-node-2", {"zone": "zone-b"})
    finally:
        server.stop(None)


@pytest.mark.parametrize("mode", ["central", "distributed"])
def test_sidecars_are_stopped_before_the_csi_mock_instances_they_talk_to(
    root: Path, mode: str
) -> None:
    driver = local_driver(root, provisioner_mode=mode, suffix="-d123456")
    order = driver.stop_order()
    assert sorted(order) == sorted(driver.processes())
    instances = [i for i, name in enumerate(order) if name.startswith("csi-mock-")]
    sidecars = [i for i, name in enumerate(order) if not name.startswith("csi-mock-")]
    assert sidecars and instances and max(sidecars) < min(instances)
