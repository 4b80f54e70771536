"""Simulated nodes: what a kubelet does for the scheduler's and the volume
controllers' view of a node, without running pods.

For each simulated node this process
  * creates the Node (labels, allocatable, the controller-managed attach/detach
    annotation) and keeps it Ready: status heartbeat and a renewed Lease in
    kube-node-lease, as the node lifecycle controller expects;
  * creates the node's CSINode, owned by the Node;
  * watches the node's ``plugins_registry`` directory exactly like the kubelet's
    plugin watcher: for a new socket it calls the registration service's GetInfo,
    then NodeGetInfo on the driver's endpoint, and writes what the kubelet writes
    (CSINode driver entry with node ID, topology keys and ``allocatable.count``,
    topology labels and the ``csi.volume.kubernetes.io/nodeid`` annotation on the
    Node), then calls NotifyRegistrationStatus; a removed socket unregisters;
  * for a CSIDriver with ``nodeAllocatableUpdatePeriodSeconds``, asks NodeGetInfo
    again every period and updates ``allocatable.count``, as the kubelet does.

Pods bound to a simulated node never start; everything up to that point (scheduling,
binding, provisioning, attach) runs through the real control plane.

Run as ``python -m csi_harness._internal.providers.local.node_simulator SPEC.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import grpc
import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType

from csi_harness._internal.kube.csinode import CSINodeResource
from csi_harness._internal.providers.local.simulated_node import SimulatedNode, plugin_sockets
from csi_mock.proto import (
    csi_pb2,
    csi_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

log = logging.getLogger("node-simulator")

LEASE_SECONDS = 40
RENEW_EVERY = 10.0
STATUS_EVERY = 10.0
"""Seconds between status updates: the attach/detach controller assumes a freshly
attached volume mounted until the node's status says otherwise (no volumesInUse)."""
WATCH_EVERY = 0.25
ALLOCATABLE_POLL_EVERY = 1.0
API_FAILURES = (ApiError, httpx2.HTTPError)
"""What a request to an API server under load may end with (a 429 or 5xx, a read
timeout): the kubelet logs it and tries again later, and so does the simulator."""
NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Simulator:
    def __init__(self, client: AsyncClient, nodes: list[SimulatedNode]) -> None:
        self.client = client
        self.nodes = nodes

    async def run(self, stop: asyncio.Event) -> None:
        for node in self.nodes:
            await self.create_node(node)
        tasks = [asyncio.create_task(self.heartbeat(n, stop)) for n in self.nodes]
        tasks += [asyncio.create_task(self.watch_plugins(n, stop)) for n in self.nodes]
        tasks.append(asyncio.create_task(self.refresh_allocatable(stop)))
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def create_node(self, node: SimulatedNode) -> None:
        obj = node.node_object()
        try:
            await self.client.apply(cast(Node, Node.from_dict(obj)), force=True)
        except ApiError as exc:
            raise RuntimeError(f"cannot create node {node.name}: {exc.status.message}") from exc
        await self.update_status(node)
        await self.renew_lease(node)
        uid = (await self.client.get(Node, node.name)).metadata.uid  # type: ignore[union-attr]
        csinode = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {
                "name": node.name,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}
                ],
            },
            "spec": {"drivers": []},
        }
        with contextlib.suppress(ApiError):
            await self.client.create(CSINodeResource.from_dict(csinode))
        log.info("node %s created and Ready", node.name)

    async def update_status(self, node: SimulatedNode) -> None:
        await self.client.patch(Node.Status, node.name, node.status(), patch_type=PatchType.MERGE)

    async def renew_lease(self, node: SimulatedNode) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node.name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": node.name,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": _micro_now(),
            },
        }
        await self.client.apply(cast(Lease, Lease.from_dict(lease)), force=True)

    async def heartbeat(self, node: SimulatedNode, stop: asyncio.Event) -> None:
        since_status = 0.0
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), RENEW_EVERY)
            if stop.is_set():
                return
            try:
                await self.renew_lease(node)
                since_status += RENEW_EVERY
                if since_status >= STATUS_EVERY:
                    await self.update_status(node)
                    since_status = 0.0
            except Exception as exc:  # keep heartbeating through apiserver hiccups
                log.warning("heartbeat of %s failed: %s: %s", node.name, type(exc).__name__, exc)

    async def watch_plugins(self, node: SimulatedNode, stop: asyncio.Event) -> None:
        node.plugins_registry.mkdir(parents=True, exist_ok=True)
        while not stop.is_set():
            present = plugin_sockets(node.plugins_registry)
            replaced = {
                socket
                for socket, identity in present.items()
                if socket in node.registered and node.socket_ids.get(socket) != identity
            }
            for socket in sorted((node.registered.keys() - present.keys()) | replaced):
                await self.unregister(node, socket)
            for socket in sorted(present.keys() - node.registered.keys()):
                node.socket_ids[socket] = present[socket]
                await self.register(node, socket)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), WATCH_EVERY)

    async def register(self, node: SimulatedNode, socket: Path) -> None:
        try:
            async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
                registration = pluginregistration_pb2_grpc.RegistrationStub(channel)
                info = await registration.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=5)
                error = await self._install_driver(node, info)
                await registration.NotifyRegistrationStatus(
                    pluginregistration_pb2.RegistrationStatus(
                        plugin_registered=error is None, error=error or ""
                    ),
                    timeout=5,
                )
        except grpc.aio.AioRpcError as exc:
            # The kubelet retries a socket it cannot talk to; so do we (next poll).
            log.warning("%s: registration via %s failed: %s", node.name, socket, exc.details())
            return
        except API_FAILURES as exc:
            # Not registered: the next poll tries again. Raised, it would end this
            # node's plugin watch, and the driver would never be registered here (seen
            # with 50 nodes registering at once: a read timeout of the apiserver).
            log.warning(
                "%s: registration via %s failed: %s: %s", node.name, socket, type(exc).__name__, exc
            )
            return
        if error is None:
            node.registered[socket] = info.name
            node.endpoints[info.name] = info.endpoint
            node.allocatable_checked[info.name] = asyncio.get_running_loop().time()
            log.info("%s: registered driver %s (endpoint %s)", node.name, info.name, info.endpoint)
        else:
            node.registered[socket] = ""
            log.error("%s: rejected plugin at %s: %s", node.name, socket, error)

    async def _install_driver(
        self, node: SimulatedNode, info: pluginregistration_pb2.PluginInfo
    ) -> str | None:
        if info.type != "CSIPlugin":
            return f"plugin type {info.type!r} is not handled (only CSIPlugin)"
        if not any(v.split(".")[0] == "1" for v in info.supported_versions):
            return f"none of the versions {list(info.supported_versions)} is supported (1.x)"
        node_info = await _node_get_info(info.endpoint)
        segments = dict(node_info.accessible_topology.segments)
        entry: dict[str, Any] = {
            "name": info.name,
            "nodeID": node_info.node_id,
            "topologyKeys": sorted(segments) or None,
            "allocatable": _allocatable(node_info),
        }
        current = await self.client.get(Node, node.name)
        annotations = dict(current.metadata.annotations or {})  # type: ignore[union-attr]
        node_ids = json.loads(annotations.get(NODE_ID_ANNOTATION, "{}"))
        node_ids[info.name] = node_info.node_id
        await self.client.patch(
            Node,
            node.name,
            {
                "metadata": {
                    "labels": segments,
                    "annotations": {NODE_ID_ANNOTATION: json.dumps(node_ids, sort_keys=True)},
                }
            },
            patch_type=PatchType.MERGE,
        )
        await self._edit_csinode_driver(node, info.name, lambda _: entry)
        return None

    async def refresh_allocatable(self, stop: asyncio.Event) -> None:
        """Like the kubelet for a CSIDriver with ``nodeAllocatableUpdatePeriodSeconds``
        (MutableCSINodeAllocatableCount): every period, ask NodeGetInfo again and put
        a changed ``max_volumes_per_node`` into the CSINode's ``allocatable.count``."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), ALLOCATABLE_POLL_EVERY)
            periods: dict[str, float] = {}
            for node in self.nodes:
                for driver, endpoint in list(node.endpoints.items()):
                    if driver not in periods:
                        periods[driver] = await self._allocatable_period(driver)
                    period = periods[driver]
                    if not period or loop.time() - node.allocatable_checked[driver] < period:
                        continue
                    node.allocatable_checked[driver] = loop.time()
                    try:
                        await self._refresh_count(node, driver, endpoint)
                    except (grpc.aio.AioRpcError, *API_FAILURES) as exc:
                        log.warning(
                            "%s: allocatable refresh of %s failed: %s", node.name, driver, exc
                        )

    async def _allocatable_period(self, driver: str) -> float:
        try:
            csidriver = await self.client.get(CSIDriver, driver)
        except ApiError:
            return 0.0
        return float((csidriver.spec and csidriver.spec.nodeAllocatableUpdatePeriodSeconds) or 0)

    async def _refresh_count(self, node: SimulatedNode, driver: str, endpoint: str) -> None:
        allocatable = _allocatable(await _node_get_info(endpoint))

        def with_count(entry: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if entry is None else {**entry, "allocatable": allocatable}

        if await self._edit_csinode_driver(node, driver, with_count):
            log.info("%s: %s allocatable is now %s", node.name, driver, allocatable or "unset")

    async def unregister(self, node: SimulatedNode, socket: Path) -> None:
        name = node.registered.pop(socket)
        node.socket_ids.pop(socket, None)
        if not name:
            return
        node.endpoints.pop(name, None)
        node.allocatable_checked.pop(name, None)
        with contextlib.suppress(ApiError):
            await self._edit_csinode_driver(node, name, lambda _: None)
            current = await self.client.get(Node, node.name)
            annotations = dict(current.metadata.annotations or {})  # type: ignore[union-attr]
            node_ids = json.loads(annotations.get(NODE_ID_ANNOTATION, "{}"))
            node_ids.pop(name, None)
            value = json.dumps(node_ids, sort_keys=True) if node_ids else None
            await self.client.patch(
                Node,
                node.name,
                {"metadata": {"annotations": {NODE_ID_ANNOTATION: value}}},
                patch_type=PatchType.MERGE,
            )
        log.info("%s: unregistered driver %s", node.name, name)

    async def _edit_csinode_driver(
        self,
        node: SimulatedNode,
        driver: str,
        edit: Callable[[dict[str, Any] | None], dict[str, Any] | None],
    ) -> bool:
        """Replace ``driver``'s entry in the node's CSINode with ``edit(entry)`` (None:
        the entry is absent, or is to go); whether the CSINode changed."""
        async with node.csinode_lock:
            current = await self.client.get(CSINodeResource, node.name)
            drivers = list((current.spec or {}).get("drivers") or [])
            entry = next((d for d in drivers if d["name"] == driver), None)
            wanted = edit(entry)
            if wanted is not None:
                wanted = {k: v for k, v in wanted.items() if v is not None}
            if wanted == entry:
                return False
            drivers = [d for d in drivers if d["name"] != driver]
            if wanted is not None:
                drivers.append(wanted)
            await self.client.patch(
                CSINodeResource,
                node.name,
                {"spec": {"drivers": drivers}},
                patch_type=PatchType.MERGE,
            )
            return True


async def _node_get_info(endpoint: str) -> csi_pb2.NodeGetInfoResponse:
    async with grpc.aio.insecure_channel(f"unix://{endpoint}") as channel:
        return await csi_pb2_grpc.NodeStub(channel).NodeGetInfo(
            csi_pb2.NodeGetInfoRequest(), timeout=10
        )


def _allocatable(node_info: csi_pb2.NodeGetInfoResponse) -> dict[str, int] | None:
    """The CSINode driver entry's ``allocatable`` for this answer (None: no limit)."""
    count = node_info.max_volumes_per_node
    return {"count": count} if count > 0 else None


def load_nodes(spec_file: Path) -> tuple[Path, list[SimulatedNode]]:
    spec = json.loads(spec_file.read_text())
    nodes = [
        SimulatedNode(
            name=n["name"],
            labels=n["labels"],
            plugins_registry=Path(n["plugins_registry"]),
            capacity=n["capacity"],
            kubelet_version=spec["kubelet_version"],
        )
        for n in spec["nodes"]
    ]
    return Path(spec["kubeconfig"]), nodes


async def _main(spec_file: Path) -> None:
    kubeconfig, nodes = load_nodes(spec_file)
    client = AsyncClient(
        KubeConfig.from_file(kubeconfig), field_manager="csi-harness-node-simulator"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await Simulator(client, nodes).run(stop)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="node-simulator", description=__doc__.split("\n")[0])
    parser.add_argument("spec", type=Path, help="JSON file written by the local provider")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(_main(args.spec))


if __name__ == "__main__":
    main()
