"""The node simulator's registration of a plugin, as the kubelet's plugin watcher
does it: a failed attempt is tried again at the next poll, and concurrent edits of a
node's CSINode driver list lose nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import httpx2
import pytest

from csi_harness._internal.providers.local.node_simulator import NODE_ID_ANNOTATION, Simulator
from csi_harness._internal.providers.local.simulated_node import SimulatedNode
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


class SlowCSINodeApi:
    """A CSINode whose reads and writes each take a moment, so that two edits overlap
    unless something orders them (a merge patch replaces the whole driver list)."""

    def __init__(self, drivers: list[dict[str, Any]]) -> None:
        self.drivers = drivers

    async def get(self, resource: Any, name: str) -> Any:
        drivers = [dict(d) for d in self.drivers]
        await asyncio.sleep(0.01)
        return SimpleNamespace(spec={"drivers": drivers})

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> None:
        await asyncio.sleep(0.01)
        self.drivers = body["spec"]["drivers"]


async def test_a_registration_during_an_allocatable_refresh_keeps_both_entries(
    short_tmp_path: Path,
) -> None:
    # Seen as "not registered on: node-3" for 120 s in a local mission run: the
    # refresh of one driver's count wrote back a list read before another registered.
    api = SlowCSINodeApi([{"name": "a.example", "nodeID": "node-3"}])
    node = SimulatedNode("node-3", {}, short_tmp_path, {}, "v1.37.1")
    simulator = Simulator(api, [node])  # type: ignore[arg-type]
    b_entry = {"name": "b.example", "nodeID": "node-3"}
    a_count = {"name": "a.example", "nodeID": "node-3", "allocatable": {"count": 2}}

    changed = await asyncio.gather(
        simulator._edit_csinode_driver(node, "a.example", lambda _: a_count),
        simulator._edit_csinode_driver(node, "b.example", lambda _: b_entry),
    )

    assert changed == [True, True]
    assert sorted(api.drivers, key=lambda d: d["name"]) == [a_count, b_entry]


async def test_an_edit_that_changes_nothing_writes_nothing(short_tmp_path: Path) -> None:
    api = SlowCSINodeApi([{"name": "a.example", "nodeID": "node-3"}])
    node = SimulatedNode("node-3", {}, short_tmp_path, {}, "v1.37.1")
    simulator = Simulator(api, [node])  # type: ignore[arg-type]

    unchanged = await simulator._edit_csinode_driver(
        node, "a.example", lambda e: None if e is None else {**e, "allocatable": None}
    )
    absent = await simulator._edit_csinode_driver(node, "gone.example", lambda _: None)

    assert (unchanged, absent) == (False, False)


async def _serve(plugin: Plugin) -> grpc.aio.Server:
    server = grpc.aio.server()
    pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(plugin, server)
    csi_pb2_grpc.add_NodeServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{plugin.socket}")
    await server.start()
    return server


async def test_a_socket_made_anew_at_the_same_path_is_registered_again(
    short_tmp_path: Path,
) -> None:
    """As the kubelet's plugin watcher: a plugin that takes its socket away and serves
    it again (csi-mock's renewed registration) is deregistered and registered anew,
    however fast it comes back."""
    registry = short_tmp_path / "registry"
    registry.mkdir()
    plugin = Plugin(registry / "csi-mock.example-reg.sock")
    server = await _serve(plugin)
    api = FlakyApi(0)
    node = SimulatedNode("node-2", {}, registry, {}, "v1.37.1")
    stop = asyncio.Event()
    watch = asyncio.create_task(Simulator(api, [node]).watch_plugins(node, stop))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(10):
            while not plugin.statuses:
                await asyncio.sleep(0.05)
        await server.stop(None)
        plugin.socket.unlink(missing_ok=True)
        server = await _serve(plugin)
        async with asyncio.timeout(10):
            while len(plugin.statuses) < 2:
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await watch
        await server.stop(None)

    assert plugin.statuses == [True, True]
    assert node.registered == {plugin.socket: "csi-mock.example"}
    # In between, the driver was deregistered: its node ID annotation taken off.
    node_ids = [
        body["metadata"]["annotations"][NODE_ID_ANNOTATION]
        for kind, body in api.patches
        if kind == "Node"
    ]
    assert node_ids[0] is not None and node_ids[1] is None and node_ids[2] is not None
