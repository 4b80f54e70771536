"""The services running in this process; a knob for one that is not running is a 409."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from csi_mock.admin.errors import ApiError
from csi_mock.backend.controller import Controller
from csi_mock.backend.node import Node

if TYPE_CHECKING:
    from csi_mock.driver import Driver


def controller_of(driver: Driver, field: str | None = None) -> Controller:
    if driver.controller is None:
        raise _not_running("controller", driver, field)
    return driver.controller


def node_of(driver: Driver, field: str | None = None) -> Node:
    if driver.node is None:
        raise _not_running("node", driver, field)
    return driver.node


def _not_running(service: str, driver: Driver, field: str | None) -> ApiError:
    mode = driver.config.mode.value
    message = f"the {service} service does not run in this process (mode {mode})"
    return ApiError(HTTPStatus.CONFLICT, message, field)
