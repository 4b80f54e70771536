"""The CSI Node service."""

from __future__ import annotations

from typing import Any

import grpc

from csi_mock.backend.node import Node
from csi_mock.config import DriverConfig
from csi_mock.model.errors import Unimplemented
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.services.convert import optional_capability, topology_to_pb

Context = grpc.aio.ServicerContext[Any, Any]
RPC = pb.NodeServiceCapability.RPC


class NodeServicer(pb_grpc.NodeServicer):
    def __init__(self, config: DriverConfig, node: Node) -> None:
        self._config = config
        self._node = node

    async def NodeStageVolume(
        self, request: pb.NodeStageVolumeRequest, context: Context
    ) -> pb.NodeStageVolumeResponse:
        self._require_staging("NodeStageVolume")
        self._node.stage(
            request.volume_id,
            request.staging_target_path,
            optional_capability(request),
            dict(request.publish_context),
            dict(request.volume_context),
        )
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
        self._node.publish(
            request.volume_id,
            request.target_path,
            request.staging_target_path,
            optional_capability(request),
            request.readonly,
            dict(request.publish_context),
            dict(request.volume_context),
        )
        return pb.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(
        self, request: pb.NodeUnpublishVolumeRequest, context: Context
    ) -> pb.NodeUnpublishVolumeResponse:
        await self._node.unpublish(request.volume_id, request.target_path)
        return pb.NodeUnpublishVolumeResponse()

    async def NodeGetVolumeStats(
        self, request: pb.NodeGetVolumeStatsRequest, context: Context
    ) -> pb.NodeGetVolumeStatsResponse:
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
        return pb.NodeGetVolumeStatsResponse(
            usage=usage,
            volume_condition=pb.VolumeCondition(
                abnormal=stats.abnormal is not None, message=stats.abnormal or "healthy"
            ),
        )

    async def NodeExpandVolume(
        self, request: pb.NodeExpandVolumeRequest, context: Context
    ) -> pb.NodeExpandVolumeResponse:
        if not self._config.controller.expansion:
            raise Unimplemented("volume expansion is disabled (controller.expansion: false)")
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
        rpcs = [RPC.GET_VOLUME_STATS, RPC.VOLUME_CONDITION, RPC.SINGLE_NODE_MULTI_WRITER]
        if self._config.node.stage_unstage:
            rpcs.insert(0, RPC.STAGE_UNSTAGE_VOLUME)
        if self._config.controller.expansion:
            rpcs.append(RPC.EXPAND_VOLUME)
        return pb.NodeGetCapabilitiesResponse(
            capabilities=[pb.NodeServiceCapability(rpc=RPC(type=rpc)) for rpc in rpcs]
        )

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
