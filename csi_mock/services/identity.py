"""The CSI Identity service."""

from __future__ import annotations

from typing import Any

import grpc

from csi_mock import __version__
from csi_mock.backend.switches import Switches
from csi_mock.config import DriverConfig
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.services.readiness import Readiness

Context = grpc.aio.ServicerContext[Any, Any]
Service = pb.PluginCapability.Service
Expansion = pb.PluginCapability.VolumeExpansion


class IdentityServicer(pb_grpc.IdentityServicer):
    def __init__(self, config: DriverConfig, readiness: Readiness, switches: Switches) -> None:
        self._config = config
        self._readiness = readiness
        self._switches = switches

    async def GetPluginInfo(
        self, request: pb.GetPluginInfoRequest, context: Context
    ) -> pb.GetPluginInfoResponse:
        return pb.GetPluginInfoResponse(
            name=self._config.name,
            vendor_version=__version__,
            manifest={"mode": self._config.mode.value},
        )

    async def GetPluginCapabilities(
        self, request: pb.GetPluginCapabilitiesRequest, context: Context
    ) -> pb.GetPluginCapabilitiesResponse:
        # A plugin-wide fact: a node-mode process belongs to a plugin whose controller
        # runs elsewhere, and sidecars/csi-sanity ask the node socket about it.
        capabilities = [_service(Service.CONTROLLER_SERVICE)]
        if self._config.topology:
            capabilities.append(_service(Service.VOLUME_ACCESSIBILITY_CONSTRAINTS))
        if self._switches.expansion:
            online = self._switches.online_expansion
            kind = Expansion.ONLINE if online else Expansion.OFFLINE
            capabilities.append(pb.PluginCapability(volume_expansion=Expansion(type=kind)))
        return pb.GetPluginCapabilitiesResponse(capabilities=capabilities)

    async def Probe(self, request: pb.ProbeRequest, context: Context) -> pb.ProbeResponse:
        response = pb.ProbeResponse()
        response.ready.value = self._readiness.ready
        return response


def _service(kind: pb.PluginCapability.Service.Type.ValueType) -> pb.PluginCapability:
    return pb.PluginCapability(service=Service(type=kind))
