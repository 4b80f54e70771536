"""The CSI Node service."""

from __future__ import annotations

from typing import Any

import grpc

from csi_mock.backend.conditions import HEALTHY_MESSAGE, VolumeConditions
from csi_mock.backend.health import ReportedHealth, node_volume_health
from csi_mock.backend.node import Node
from csi_mock.backend.switches import Switches
from csi_mock.config import DriverConfig
from csi_mock.model.errors import InvalidArgument, Unimplemented
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.services.convert import (
    optional_capability,
    topology_to_pb,
    volume_health_to_pb,
)

Context = grpc.aio.ServicerContext[Any, Any]
RPC = pb.NodeServiceCapability.RPC
MOUNT_GROUP_FIELD = "volume_capability.mount.volume_mount_group"
MAX_GROUP_ID = (1 << 31) - 1


def node_capabilities(config: DriverConfig, switches: Switches) -> pb.NodeGetCapabilitiesResponse:
    """What the node service advertises, from the configuration and the switches."""
    rpcs = []
    if config.node.stage_unstage:
        rpcs.append(RPC.STAGE_UNSTAGE_VOLUME)
    if switches.volume_stats:
        rpcs.append(RPC.GET_VOLUME_STATS)
        if config.node.volume_condition:
            rpcs.append(RPC.VOLUME_CONDITION)
    rpcs.append(RPC.SINGLE_NODE_MULTI_WRITER)
    if switches.node_expansion:
        rpcs.append(RPC.EXPAND_VOLUME)
    if config.node.volume_mount_group:
        rpcs.append(RPC.VOLUME_MOUNT_GROUP)
    if config.node.volume_health:
        rpcs.append(RPC.GET_VOLUME_HEALTH)
    if config.node.storage_health:
        rpcs.append(RPC.GET_STORAGE_HEALTH)
    return pb.NodeGetCapabilitiesResponse(
        capabilities=[pb.NodeServiceCapability(rpc=RPC(type=rpc)) for rpc in rpcs]
    )


def add_node_capabilities_to_server(
    config: DriverConfig, switches: Switches, server: grpc.aio.Server
) -> None:
    """Serve the Node service's NodeGetCapabilities alone, in a controller without a
    node service (gRPC answers every other Node call UNIMPLEMENTED). external-resizer
    asks the controller's socket whether the node expands volumes, and without
    controller expansion resizes only for the node (its trivial resizer) when it does;
    it exits if the call fails."""

    async def capabilities(
        request: pb.NodeGetCapabilitiesRequest, context: Context
    ) -> pb.NodeGetCapabilitiesResponse:
        return node_capabilities(config, switches)

    handler = grpc.unary_unary_rpc_method_handler(
        capabilities,
        request_deserializer=pb.NodeGetCapabilitiesRequest.FromString,
        response_serializer=pb.NodeGetCapabilitiesResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("csi.v1.Node", {"NodeGetCapabilities": handler}),)
    )


class NodeServicer(pb_grpc.NodeServicer):
    def __init__(
        self,
        config: DriverConfig,
        node: Node,
        switches: Switches,
        conditions: VolumeConditions,
        health: ReportedHealth,
    ) -> None:
        self._config = config
        self._node = node
        self._switches = switches
        self._conditions = conditions
        self._health = health

    async def NodeStageVolume(
        self, request: pb.NodeStageVolumeRequest, context: Context
    ) -> pb.NodeStageVolumeResponse:
        self._require_staging("NodeStageVolume")
        group = self._mount_group(request)
        self._node.stage(
            request.volume_id,
            request.staging_target_path,
            optional_capability(request),
            dict(request.publish_context),
            dict(request.volume_context),
        )
        if group is not None:
            self._node.apply_mount_group(request.volume_id, request.staging_target_path, group)
        return pb.NodeStageVolumeResponse()

    async def NodeUnstageVolume(
        self, request: pb.NodeUnstageVolumeRequest, context: Context
    ) -> pb.NodeUnstageVolumeResponse:
        self._require_staging("NodeUnstageVolume")
        self._node.unstage(request.volume_id, request.staging_target_path)
        return pb.NodeUnstageVolumeResponse()

    async def NodePublishVolume(
        self, request: pb.NodePublishVolumeRequest, context: Context
    ) -> pb.NodePublishVolumeResponse:
        group = self._mount_group(request)
        self._node.publish(
            request.volume_id,
            request.target_path,
            request.staging_target_path,
            optional_capability(request),
            request.readonly,
            dict(request.publish_context),
            dict(request.volume_context),
        )
        if group is not None:
            self._node.apply_mount_group(request.volume_id, request.target_path, group)
        return pb.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(
        self, request: pb.NodeUnpublishVolumeRequest, context: Context
    ) -> pb.NodeUnpublishVolumeResponse:
        await self._node.unpublish(request.volume_id, request.target_path)
        return pb.NodeUnpublishVolumeResponse()

    async def NodeGetVolumeStats(
        self, request: pb.NodeGetVolumeStatsRequest, context: Context
    ) -> pb.NodeGetVolumeStatsResponse:
        if not self._switches.volume_stats:
            raise Unimplemented("NodeGetVolumeStats is disabled (node.volume_stats: false)")
        stats = await self._node.stats(request.volume_id, request.volume_path)
        Unit = pb.VolumeUsage.Unit
        usage = [
            pb.VolumeUsage(
                unit=Unit.BYTES,
                total=stats.total_bytes,
                used=stats.used_bytes,
                available=stats.available_bytes,
            )
        ]
        if not stats.block:  # A raw device has no inodes of its own.
            usage.append(
                pb.VolumeUsage(
                    unit=Unit.INODES,
                    total=stats.total_inodes,
                    used=stats.used_inodes,
                    available=max(0, stats.total_inodes - stats.used_inodes),
                )
            )
        response = pb.NodeGetVolumeStatsResponse(usage=usage)
        if self._config.node.volume_condition:
            # A condition set through the admin API wins over what the node measured.
            condition = self._conditions.of(request.volume_id)
            if condition is not None:
                response.volume_condition.abnormal = condition.abnormal
                response.volume_condition.message = condition.message
            else:
                response.volume_condition.abnormal = stats.abnormal is not None
                response.volume_condition.message = stats.abnormal or HEALTHY_MESSAGE
        return response

    async def NodeGetVolumeHealth(
        self, request: pb.NodeGetVolumeHealthRequest, context: Context
    ) -> pb.NodeGetVolumeHealthResponse:
        if not self._config.node.volume_health:
            raise Unimplemented("NodeGetVolumeHealth is disabled (node.volume_health: false)")
        entries = node_volume_health(self._health, self._node.store, request.volume_id)
        return pb.NodeGetVolumeHealthResponse(
            volume_health=volume_health_to_pb(request.volume_id, entries)
        )

    async def NodeGetStorageHealth(
        self, request: pb.NodeGetStorageHealthRequest, context: Context
    ) -> pb.NodeGetStorageHealthResponse:
        if not self._config.node.storage_health:
            raise Unimplemented("NodeGetStorageHealth is disabled (node.storage_health: false)")
        Backend = pb.NodeGetStorageHealthResponse.StorageBackendHealth
        return pb.NodeGetStorageHealthResponse(
            backend_health=[
                Backend(
                    status=pb.StorageHealthErrorType.Value(entry.status),
                    reason=entry.reason,
                    message=entry.message,
                )
                for entry in self._health.storage()
            ]
        )

    async def NodeExpandVolume(
        self, request: pb.NodeExpandVolumeRequest, context: Context
    ) -> pb.NodeExpandVolumeResponse:
        if not self._switches.node_expansion:
            raise Unimplemented("node expansion is disabled (node.expansion: false)")
        size = self._node.expand(
            request.volume_id,
            request.volume_path,
            request.capacity_range.required_bytes,
            request.capacity_range.limit_bytes,
        )
        return pb.NodeExpandVolumeResponse(capacity_bytes=size)

    async def NodeGetCapabilities(
        self, request: pb.NodeGetCapabilitiesRequest, context: Context
    ) -> pb.NodeGetCapabilitiesResponse:
        return node_capabilities(self._config, self._switches)

    def _mount_group(
        self, request: pb.NodeStageVolumeRequest | pb.NodePublishVolumeRequest
    ) -> int | None:
        """The request's volume_mount_group as a group ID; None when not given. Kubernetes
        passes the pod's fsGroup, a number."""
        given = request.volume_capability.mount.volume_mount_group
        if not given:
            return None
        if not self._config.node.volume_mount_group:
            raise InvalidArgument(
                f"{MOUNT_GROUP_FIELD} is given but VOLUME_MOUNT_GROUP is not advertised"
                " (node.volume_mount_group: false)"
            )
        if not given.isascii() or not given.isdigit() or int(given) > MAX_GROUP_ID:
            raise InvalidArgument(f"{MOUNT_GROUP_FIELD} {given!r} is not a numeric group ID")
        return int(given)

    def _require_staging(self, method: str) -> None:
        if not self._config.node.stage_unstage:
            raise Unimplemented(f"{method}: staging is disabled (node.stage_unstage: false)")

    async def NodeGetInfo(
        self, request: pb.NodeGetInfoRequest, context: Context
    ) -> pb.NodeGetInfoResponse:
        info = self._node.info()
        response = pb.NodeGetInfoResponse(
            node_id=info.node_id, max_volumes_per_node=info.max_volumes_per_node
        )
        if info.segment:
            response.accessible_topology.CopyFrom(topology_to_pb(info.segment))
        return response
