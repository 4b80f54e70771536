"""The admin API's routes, one module per resource."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from csi_mock.admin.routes.capacity_freeze import CapacityRoutes
from csi_mock.admin.routes.conditions import ConditionRoutes
from csi_mock.admin.routes.faults import FaultRoutes
from csi_mock.admin.routes.health import HealthRoutes
from csi_mock.admin.routes.journal import JournalRoutes
from csi_mock.admin.routes.limits import LimitsRoutes
from csi_mock.admin.routes.neighbours import NeighbourRoutes
from csi_mock.admin.routes.pools import PoolRoutes
from csi_mock.admin.routes.registration import RegistrationRoutes
from csi_mock.admin.routes.reset import ResetRoutes
from csi_mock.admin.routes.snapshots import SnapshotRoutes
from csi_mock.admin.routes.switches import SwitchRoutes
from csi_mock.admin.routes.volume_health import VolumeHealthRoutes
from csi_mock.admin.routes.volumes import VolumeRoutes

if TYPE_CHECKING:
    from csi_mock.driver import Driver


class Routes(Protocol):
    def register(self, router: web.UrlDispatcher) -> None: ...


def all_routes(driver: Driver) -> list[Routes]:
    return [
        HealthRoutes(driver),
        FaultRoutes(driver),
        PoolRoutes(driver),
        CapacityRoutes(driver),
        LimitsRoutes(driver),
        RegistrationRoutes(driver),
        SwitchRoutes(driver),
        VolumeRoutes(driver),
        ConditionRoutes(driver),
        VolumeHealthRoutes(driver),
        SnapshotRoutes(driver),
        JournalRoutes(driver),
        NeighbourRoutes(driver),
        ResetRoutes(driver),
    ]
