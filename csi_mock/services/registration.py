"""Kubelet plugin registration: what node-driver-registrar would otherwise do.

The kubelet's plugin watcher finds `<plugins_registry>/<name>-reg.sock`, asks GetInfo
for the driver's name and CSI endpoint, calls NodeGetInfo on that endpoint, writes the
CSINode object and reports the outcome with NotifyRegistrationStatus. Removing the
socket deregisters the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from csi_mock.config import DriverConfig
from csi_mock.proto import pluginregistration_pb2 as reg
from csi_mock.proto import pluginregistration_pb2_grpc as reg_grpc

log = logging.getLogger("csi_mock.registration")

Context = grpc.aio.ServicerContext[Any, Any]

CSI_PLUGIN_TYPE = "CSIPlugin"
SUPPORTED_VERSIONS = ("1.0.0",)
"""The versions node-driver-registrar reports; the kubelet wants a 1.x among them."""


@dataclass
class KubeletRegistration:
    """The registration socket and the kubelet's last verdict on it."""

    socket: Path
    registered: bool | None = None
    """None until the kubelet calls NotifyRegistrationStatus."""
    error: str | None = None
    """The kubelet's reason when it did not register the driver."""
    renewer: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    """Set by the server that serves the socket (``renew``)."""

    def record(self, registered: bool, error: str) -> None:
        self.registered = registered
        self.error = error or None

    async def renew(self) -> None:
        """Take the socket away and serve it again, so that the kubelet deregisters the
        driver and registers it anew: it asks NodeGetInfo again and rewrites the
        driver's CSINode entry (a changed ``max_volumes_per_node`` becomes its
        allocatable count). The kubelet's verdict is None again until it calls."""
        if self.renewer is None:
            raise RuntimeError("the registration socket is not served yet")
        self.registered = None
        self.error = None
        await self.renewer()


class RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(self, config: DriverConfig, registration: KubeletRegistration) -> None:
        self._config = config
        self._registration = registration

    async def GetInfo(self, request: reg.InfoRequest, context: Context) -> reg.PluginInfo:
        endpoint = str(self._config.kubelet_endpoint)
        log.debug("kubelet asked for plugin info; endpoint %s", endpoint)
        return reg.PluginInfo(
            type=CSI_PLUGIN_TYPE,
            name=self._config.name,
            endpoint=endpoint,
            supported_versions=SUPPORTED_VERSIONS,
        )

    async def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: Context
    ) -> reg.RegistrationStatusResponse:
        # node-driver-registrar exits on a refusal so that its pod restarts; the driver
        # keeps serving instead and shows the verdict in /healthz.
        self._registration.record(request.plugin_registered, request.error)
        if request.plugin_registered:
            log.info("registered with the kubelet as %s", self._config.name)
        else:
            log.error(
                "the kubelet did not register %s: %s",
                self._config.name,
                request.error or "no reason given",
            )
        return reg.RegistrationStatusResponse()
