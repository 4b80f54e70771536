"""CSI calls made inside a pod: the program kubectl exec runs there answers like the
driver's own socket does. Here "the pod" is this machine: the runner runs the program
with this interpreter against a csi-mock served in-process from a configuration the
in-cluster deployment renders."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from csi_harness._internal.core.commands import CommandFailed, run_command
from csi_harness._internal.deploy.incluster_objects import render_objects
from csi_harness._internal.deploy.pod_csi import PodCsiCaller
from csi_harness._internal.deploy.spec import NODE_TOPOLOGY_KEY, ZONE_TOPOLOGY_KEY, DriverDeployment
from csi_harness._internal.providers.base import ClusterNode
from csi_mock.config import validate_config
from csi_mock.proto import csi_pb2
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.server import Driver, DriverServer

NODES = [ClusterNode("worker", "zone-a", True), ClusterNode("worker2", "zone-b", True)]


def rendered_node_config(tmp_path: Path) -> dict[str, Any]:
    """worker's distributed-mode configuration, moved from the pod's paths to tmp_path
    and without kubelet registration (no kubelet here)."""
    objects = render_objects(
        DriverDeployment(provisioner_mode="distributed", node_pool_size="8Gi"),
        NODES,
        image="i",
        sidecar_images={"csi-provisioner": "p"},
        admin_token="t" * 16,
        generation="1",
    )
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    config: dict[str, Any] = yaml.safe_load(config_map["data"]["node-worker.yaml"])
    config.update(
        endpoint=f"unix://{tmp_path}/csi.sock",
        state_dir=str(tmp_path / "state"),
        admin={"socket": str(tmp_path / "admin.sock")},
    )
    config["node"].pop("registration")
    config["node"]["mount"] = "directory"
    return config


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[DriverServer]:
    server = DriverServer(Driver.open(validate_config(rendered_node_config(tmp_path))))
    await server.start()
    yield server
    await server.stop(grace=1)


class LocalPod:
    """A runner that checks the kubectl command line, then runs its program here."""

    def __init__(self) -> None:
        self.argv: list[str] = []

    def __call__(self, argv: Sequence[str]) -> str:
        self.argv = list(argv)
        command = self.argv[self.argv.index("--") + 1 :]
        assert command[0] == "python3"
        return run_command([sys.executable, *command[1:]])


def caller(socket: Path, runner: LocalPod) -> PodCsiCaller:
    return PodCsiCaller(
        kubectl="/opt/kubectl",
        kubeconfig=Path("/k/config"),
        namespace="csi-mock",
        container="csi-mock",
        endpoint=f"unix://{socket}",
        run=runner,
    )


async def test_get_capacity_in_the_pod_answers_as_the_socket_does(served: DriverServer) -> None:
    runner = LocalPod()
    request = csi_pb2.GetCapacityRequest(
        parameters={"kind": "mirrored"},
        accessible_topology=csi_pb2.Topology(segments={NODE_TOPOLOGY_KEY: "worker"}),
    )
    reply = await asyncio.to_thread(
        caller(served.socket_path, runner).call,
        "csi-mock-node-abc",
        "Controller",
        "GetCapacity",
        request,
        csi_pb2.GetCapacityResponse,
    )
    async with grpc.aio.insecure_channel(f"unix://{served.socket_path}") as channel:
        direct = await pb_grpc.ControllerStub(channel).GetCapacity(request)
    assert reply == direct
    assert reply.available_capacity == 4 << 30  # 8Gi, mirrored costs twice
    assert runner.argv[:7] == [
        "/opt/kubectl",
        "--kubeconfig=/k/config",
        "--namespace=csi-mock",
        "exec",
        "csi-mock-node-abc",
        "--container=csi-mock",
        "--",
    ]


async def test_node_get_info_in_the_pod_reports_the_nodes_own_segment(
    served: DriverServer,
) -> None:
    reply = await asyncio.to_thread(
        caller(served.socket_path, LocalPod()).call,
        "pod",
        "Node",
        "NodeGetInfo",
        csi_pb2.NodeGetInfoRequest(),
        csi_pb2.NodeGetInfoResponse,
    )
    assert reply.node_id == "worker"
    assert dict(reply.accessible_topology.segments) == {
        NODE_TOPOLOGY_KEY: "worker",
        ZONE_TOPOLOGY_KEY: "zone-a",
    }


def test_a_failed_call_names_the_status(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed, match="UNAVAILABLE"):
        caller(tmp_path / "nothing.sock", LocalPod()).call(
            "pod", "Node", "NodeGetInfo", csi_pb2.NodeGetInfoRequest(), csi_pb2.NodeGetInfoResponse
        )
