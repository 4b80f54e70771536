"""The node simulator's registration of a plugin, as the kubelet's plugin watcher
does it: a failed attempt is tried again at the next poll."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import httpx2
import pytest

from csi_harness._internal.providers.local.node_simulator import SimulatedNode, Simulator
from csi_mock.proto import (
    csi_pb2,
    csi_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)


class Plugin(pluginregistration_pb2_grpc.RegistrationServicer, csi_pb2_grpc.NodeServicer):
    """Registration and NodeGetInfo on one socket, as csi-mock serves them."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.statuses: list[bool] = []

    async def GetInfo(self, request: Any, context: Any) -> Any:
        return pluginregistration_pb2.PluginInfo(
            type="CSIPlugin",
            name="csi-mock.example",
            endpoint=str(self.socket),
            supported_versions=["1.0.0"],
        )

    async def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.statuses.append(request.plugin_registered)
        return pluginregistration_pb2.RegistrationStatusResponse()

    async def NodeGetInfo(self, request: Any, context: Any) -> Any:
        return csi_pb2.NodeGetInfoResponse(
            node_id="node-2",
            accessible_topology=csi_pb2.Topology(
                segments={"topology.csi-mock.example/node": "node-2"}
            ),
        )


class FlakyApi:
    """An API client whose first ``failures`` requests time out."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def _maybe_fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise httpx2.ReadTimeout("timed out")

    async def get(self, resource: Any, name: str) -> Any:
        self._maybe_fail()
        return SimpleNamespace(metadata=SimpleNamespace(annotations={}), spec={"drivers": []})

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> None:
        self._maybe_fail()
        self.patches.append((resource.__name__, body))


@pytest.mark.parametrize("failures", [1, 2])
async def test_an_api_timeout_during_registration_is_retried_at_the_next_poll(
    short_tmp_path: Path, failures: int
) -> None:
    socket = short_tmp_path / "reg.sock"
    plugin = Plugin(socket)
    server = grpc.aio.server()
    pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(plugin, server)
    csi_pb2_grpc.add_NodeServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    try:
        api = FlakyApi(failures)
        node = SimulatedNode("node-2", {}, short_tmp_path, {}, "v1.37.1")
        simulator = Simulator(api, [node])  # type: ignore[arg-type]
        await simulator.register(node, socket)  # the API times out: not registered
        assert node.registered == {}
        while api.failures:
            await simulator.register(node, socket)
        await simulator.register(node, socket)
        assert node.registered == {socket: "csi-mock.example"}
        (driver,) = api.patches[-1][1]["spec"]["drivers"]
        assert driver["nodeID"] == "node-2"
        assert plugin.statuses[-1] is True
    finally:
        await server.stop(None)
