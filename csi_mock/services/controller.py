"""The CSI Controller service."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from csi_mock.backend.conditions import HEALTHY, VolumeConditions
from csi_mock.backend.controller import (
    VOLUME_CONTEXT_ACCESS_TYPE,
    VOLUME_CONTEXT_KIND,
    VOLUME_CONTEXT_POOL,
    VOLUME_CONTEXT_SIZE,
    Controller,
    CreateRequest,
    VolumeStatus,
)
from csi_mock.backend.health import ReportedHealth, abnormal_page
from csi_mock.backend.switches import Switches
from csi_mock.config import DriverConfig
from csi_mock.model.errors import FailedPrecondition, InvalidArgument, Unimplemented
from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import ContentSource, SourceType, Volume
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.services.convert import (
    capabilities_from_pb,
    capability_from_pb,
    optional_capability,
    topology_to_pb,
    volume_health_to_pb,
)

Context = grpc.aio.ServicerContext[Any, Any]
RPC = pb.ControllerServiceCapability.RPC

LIST_CHUNK = 200
"""Volumes a ListVolumes without max_entries reads and converts at a time (about 10 ms
of work), pausing LIST_PAUSE seconds between chunks for other calls. A bare sleep(0) is
one turn of the loop, too few for a waiting call to be received and answered."""
LIST_PAUSE = 0.001


class ControllerServicer(pb_grpc.ControllerServicer):
    def __init__(
        self,
        config: DriverConfig,
        controller: Controller,
        switches: Switches,
        conditions: VolumeConditions,
        health: ReportedHealth,
    ) -> None:
        self._config = config
        self._controller = controller
        self._switches = switches
        self._conditions = conditions
        self._health = health

    async def CreateVolume(
        self, request: pb.CreateVolumeRequest, context: Context
    ) -> pb.CreateVolumeResponse:
        if request.mutable_parameters and self._config.controller.modify is None:
            raise InvalidArgument(
                "mutable_parameters is not supported (no MODIFY_VOLUME capability)"
            )
        source = self._content_source(request)
        requirements = request.accessibility_requirements
        create = CreateRequest(
            name=request.name,
            capabilities=capabilities_from_pb(request.volume_capabilities),
            required_bytes=request.capacity_range.required_bytes,
            limit_bytes=request.capacity_range.limit_bytes,
            parameters=dict(request.parameters),
            requisite=[dict(t.segments) for t in requirements.requisite],
            preferred=[dict(t.segments) for t in requirements.preferred],
            mutable_parameters=dict(request.mutable_parameters),
            content_source=source,
        )
        if source is None:
            volume = self._controller.create_volume(create)
        else:
            volume = await self._controller.create_volume_from_source(create)
        return pb.CreateVolumeResponse(volume=self._volume_to_pb(volume))

    def _content_source(self, request: pb.CreateVolumeRequest) -> ContentSource | None:
        """The request's volume_content_source; refused as before when neither
        snapshots nor clones are configured."""
        if not request.HasField("volume_content_source"):
            return None
        controller = self._config.controller
        if controller.snapshots is None and not controller.clones:
            raise InvalidArgument("volume_content_source is not supported (no snapshots/clones)")
        message = request.volume_content_source
        which = message.WhichOneof("type")
        if which == "snapshot":
            if not message.snapshot.snapshot_id:
                raise InvalidArgument("volume_content_source.snapshot.snapshot_id is required")
            return ContentSource(SourceType.SNAPSHOT, message.snapshot.snapshot_id)
        if which == "volume":
            if not message.volume.volume_id:
                raise InvalidArgument("volume_content_source.volume.volume_id is required")
            return ContentSource(SourceType.VOLUME, message.volume.volume_id)
        raise InvalidArgument("volume_content_source: a snapshot or a volume is required")

    async def DeleteVolume(
        self, request: pb.DeleteVolumeRequest, context: Context
    ) -> pb.DeleteVolumeResponse:
        await self._controller.delete_volume(request.volume_id)
        return pb.DeleteVolumeResponse()

    async def ControllerPublishVolume(
        self, request: pb.ControllerPublishVolumeRequest, context: Context
    ) -> pb.ControllerPublishVolumeResponse:
        self._require_attach("ControllerPublishVolume")
        publish_context = self._controller.publish(
            request.volume_id, request.node_id, optional_capability(request), request.readonly
        )
        return pb.ControllerPublishVolumeResponse(publish_context=publish_context)

    async def ControllerUnpublishVolume(
        self, request: pb.ControllerUnpublishVolumeRequest, context: Context
    ) -> pb.ControllerUnpublishVolumeResponse:
        self._require_attach("ControllerUnpublishVolume")
        self._controller.unpublish(request.volume_id, request.node_id)
        return pb.ControllerUnpublishVolumeResponse()

    async def ValidateVolumeCapabilities(
        self, request: pb.ValidateVolumeCapabilitiesRequest, context: Context
    ) -> pb.ValidateVolumeCapabilitiesResponse:
        problem = self._controller.validate_capabilities(
            request.volume_id,
            capabilities_from_pb(request.volume_capabilities),
            dict(request.parameters),
            dict(request.mutable_parameters),
        )
        if problem is not None:
            return pb.ValidateVolumeCapabilitiesResponse(message=problem)
        confirmed = pb.ValidateVolumeCapabilitiesResponse.Confirmed(
            volume_context=request.volume_context,
            volume_capabilities=request.volume_capabilities,
            parameters=request.parameters,
        )
        if self._config.controller.modify is not None:
            confirmed.mutable_parameters.update(request.mutable_parameters)
        return pb.ValidateVolumeCapabilitiesResponse(confirmed=confirmed)

    async def ListVolumes(
        self, request: pb.ListVolumesRequest, context: Context
    ) -> pb.ListVolumesResponse:
        # Without max_entries the reply holds every volume: read and convert them a
        # chunk at a time and let other calls run in between, so 20,000 volumes do not
        # hold the event loop for most of a second. Between chunks the driver's own
        # tokens carry on where the last chunk ended, like a CO paging through.
        entries: list[pb.ListVolumesResponse.Entry] = []
        token = request.starting_token
        while True:
            statuses, token = self._controller.list_volumes(
                request.max_entries or LIST_CHUNK, token
            )
            entries += [self._volume_entry(status) for status in statuses]
            if request.max_entries or not token:
                return pb.ListVolumesResponse(entries=entries, next_token=token)
            await asyncio.sleep(LIST_PAUSE)

    async def GetCapacity(
        self, request: pb.GetCapacityRequest, context: Context
    ) -> pb.GetCapacityResponse:
        for index, capability in enumerate(request.volume_capabilities):
            capability_from_pb(capability, f"volume_capabilities[{index}]")
        location = (
            dict(request.accessible_topology.segments)
            if request.HasField("accessible_topology")
            else None
        )
        report = self._controller.capacity(location, dict(request.parameters))
        response = pb.GetCapacityResponse(available_capacity=report.available_capacity)
        if self._config.controller.report_maximum_volume_size:
            response.maximum_volume_size.value = report.maximum_volume_size
        response.minimum_volume_size.value = report.minimum_volume_size
        return response

    async def ControllerGetCapabilities(
        self, request: pb.ControllerGetCapabilitiesRequest, context: Context
    ) -> pb.ControllerGetCapabilitiesResponse:
        rpcs = [
            RPC.CREATE_DELETE_VOLUME,
            RPC.LIST_VOLUMES,
            RPC.GET_CAPACITY,
            RPC.GET_VOLUME,
            RPC.SINGLE_NODE_MULTI_WRITER,
        ]
        if self._config.attach_required:
            rpcs += [RPC.PUBLISH_UNPUBLISH_VOLUME, RPC.PUBLISH_READONLY]
            rpcs.append(RPC.LIST_VOLUMES_PUBLISHED_NODES)
        if self._switches.controller_expansion:
            rpcs.append(RPC.EXPAND_VOLUME)
        if self._config.controller.volume_condition:
            rpcs.append(RPC.VOLUME_CONDITION)
        if self._config.controller.volume_health:
            rpcs += [RPC.GET_VOLUME_HEALTH, RPC.LIST_VOLUME_HEALTH]
        if self._config.controller.modify is not None:
            rpcs.append(RPC.MODIFY_VOLUME)
        if self._config.controller.snapshots is not None:
            rpcs += [RPC.CREATE_DELETE_SNAPSHOT, RPC.LIST_SNAPSHOTS, RPC.GET_SNAPSHOT]
        if self._config.controller.clones:
            rpcs.append(RPC.CLONE_VOLUME)
        return pb.ControllerGetCapabilitiesResponse(
            capabilities=[pb.ControllerServiceCapability(rpc=RPC(type=rpc)) for rpc in rpcs]
        )

    async def ControllerExpandVolume(
        self, request: pb.ControllerExpandVolumeRequest, context: Context
    ) -> pb.ControllerExpandVolumeResponse:
        if not self._switches.controller_expansion:
            raise Unimplemented("controller expansion is disabled (controller.expansion: false)")
        if not self._switches.online_expansion:
            published = self._controller.get_volume(request.volume_id).published_nodes
            if published:
                raise FailedPrecondition(
                    f"volume {request.volume_id} is published on {', '.join(published)};"
                    " online expansion is disabled (online_expansion: false)"
                )
        volume = self._controller.expand_volume(
            request.volume_id,
            request.capacity_range.required_bytes,
            request.capacity_range.limit_bytes,
        )
        return pb.ControllerExpandVolumeResponse(
            capacity_bytes=volume.size,
            node_expansion_required=self._switches.node_expansion_required,
        )

    async def ControllerModifyVolume(
        self, request: pb.ControllerModifyVolumeRequest, context: Context
    ) -> pb.ControllerModifyVolumeResponse:
        self._controller.modify_volume(request.volume_id, dict(request.mutable_parameters))
        return pb.ControllerModifyVolumeResponse()

    async def ControllerGetVolume(
        self, request: pb.ControllerGetVolumeRequest, context: Context
    ) -> pb.ControllerGetVolumeResponse:
        status: VolumeStatus = self._controller.get_volume(request.volume_id)
        reply_status = pb.ControllerGetVolumeResponse.VolumeStatus(
            published_node_ids=list(status.published_nodes)
        )
        if self._config.controller.volume_condition:
            reply_status.volume_condition.CopyFrom(self._condition_of(status.volume.id))
        return pb.ControllerGetVolumeResponse(
            volume=self._volume_to_pb(status.volume), status=reply_status
        )

    async def ControllerGetVolumeHealth(
        self, request: pb.ControllerGetVolumeHealthRequest, context: Context
    ) -> pb.ControllerGetVolumeHealthResponse:
        self._require_volume_health("ControllerGetVolumeHealth")
        volume_id = self._controller.get_volume(request.volume_id).volume.id
        entries = self._health.of_volume(volume_id) or ()
        return pb.ControllerGetVolumeHealthResponse(
            volume_health=volume_health_to_pb(volume_id, entries)
        )

    async def ControllerListVolumeHealth(
        self, request: pb.ControllerListVolumeHealthRequest, context: Context
    ) -> pb.ControllerListVolumeHealthResponse:
        self._require_volume_health("ControllerListVolumeHealth")
        page, next_token = abnormal_page(
            self._health,
            self._controller.store.all_volume_ids(),
            request.max_entries,
            request.starting_token,
        )
        return pb.ControllerListVolumeHealthResponse(
            entries=[volume_health_to_pb(volume_id, entries) for volume_id, entries in page],
            next_token=next_token,
        )

    # -- snapshots (UNIMPLEMENTED without controller.snapshots) ---------------------------

    async def CreateSnapshot(
        self, request: pb.CreateSnapshotRequest, context: Context
    ) -> pb.CreateSnapshotResponse:
        snapshot = await self._controller.snapshots.create(
            request.name,
            request.source_volume_id,
            dict(request.parameters),
            accessibility_given=request.HasField("accessibility_requirements"),
        )
        return pb.CreateSnapshotResponse(snapshot=self._snapshot_to_pb(snapshot))

    async def DeleteSnapshot(
        self, request: pb.DeleteSnapshotRequest, context: Context
    ) -> pb.DeleteSnapshotResponse:
        await self._controller.snapshots.delete(request.snapshot_id)
        return pb.DeleteSnapshotResponse()

    async def ListSnapshots(
        self, request: pb.ListSnapshotsRequest, context: Context
    ) -> pb.ListSnapshotsResponse:
        snapshots, next_token = self._controller.snapshots.list(
            request.max_entries,
            request.starting_token,
            request.snapshot_id,
            request.source_volume_id,
        )
        return pb.ListSnapshotsResponse(
            entries=[
                pb.ListSnapshotsResponse.Entry(snapshot=self._snapshot_to_pb(snapshot))
                for snapshot in snapshots
            ],
            next_token=next_token,
        )

    async def GetSnapshot(
        self, request: pb.GetSnapshotRequest, context: Context
    ) -> pb.GetSnapshotResponse:
        snapshot = self._controller.snapshots.get(request.snapshot_id)
        return pb.GetSnapshotResponse(snapshot=self._snapshot_to_pb(snapshot))

    # -- helpers -------------------------------------------------------------------------

    def _require_attach(self, method: str) -> None:
        if not self._config.attach_required:
            raise Unimplemented(f"{method}: attach is disabled (attach_required: false)")

    def _require_volume_health(self, method: str) -> None:
        if not self._config.controller.volume_health:
            raise Unimplemented(f"{method} is disabled (controller.volume_health: false)")

    def _volume_entry(self, status: VolumeStatus) -> pb.ListVolumesResponse.Entry:
        entry_status = pb.ListVolumesResponse.VolumeStatus(
            published_node_ids=list(status.published_nodes)
        )
        if self._config.controller.volume_condition:
            entry_status.volume_condition.CopyFrom(self._condition_of(status.volume.id))
        return pb.ListVolumesResponse.Entry(
            volume=self._volume_to_pb(status.volume), status=entry_status
        )

    def _condition_of(self, volume_id: str) -> pb.VolumeCondition:
        condition = self._conditions.of(volume_id) or HEALTHY
        return pb.VolumeCondition(abnormal=condition.abnormal, message=condition.message)

    def _volume_to_pb(self, volume: Volume) -> pb.Volume:
        message = pb.Volume(
            volume_id=volume.id,
            capacity_bytes=volume.size,
            volume_context={
                VOLUME_CONTEXT_SIZE: str(volume.size),
                VOLUME_CONTEXT_POOL: volume.pool,
                VOLUME_CONTEXT_KIND: volume.kind,
                VOLUME_CONTEXT_ACCESS_TYPE: volume.access_type.value,
            },
        )
        if self._config.topology and volume.segment:
            message.accessible_topology.append(topology_to_pb(volume.segment))
        source = volume.content_source
        if source is not None and source.type is SourceType.SNAPSHOT:
            message.content_source.snapshot.snapshot_id = source.id
        elif source is not None:
            message.content_source.volume.volume_id = source.id
        return message

    def _snapshot_to_pb(self, snapshot: Snapshot) -> pb.Snapshot:
        message = pb.Snapshot(
            size_bytes=snapshot.size,
            snapshot_id=snapshot.id,
            source_volume_id=snapshot.source_volume_id,
            ready_to_use=self._controller.snapshots.ready_to_use(snapshot),
        )
        message.creation_time.FromNanoseconds(round(snapshot.created_at * 1e9))
        return message
