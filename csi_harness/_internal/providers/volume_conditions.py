"""Setting a volume's condition on a deployed driver, whichever of its instances report
it: the controller (ListVolumes, ControllerGetVolume) and every node instance
(NodeGetVolumeStats). Each instance keeps its own (docs/admin-api.md)."""

from __future__ import annotations

from http import HTTPStatus

from csi_harness._internal.deploy.spec import CONTROLLER
from csi_harness._internal.providers.base import Driver
from csi_mock.admin.client import AdminError


def set_volume_condition(
    driver: Driver, volume_id: str, *, abnormal: bool, message: str = ""
) -> list[str]:
    """Set the condition on every instance that takes it; the instances set, in order.

    The controller knows every volume of a central deployment: a volume it does not
    have is a ValueError before any node is told. In a distributed deployment each node
    instance runs a controller of its own volumes; those without the volume answer 404
    and are left out, and a ValueError says when none takes it."""
    taken = []
    for instance in driver.instances():
        with driver.admin(instance) as admin:
            try:
                admin.set_condition(volume_id, abnormal=abnormal, message=message)
            except AdminError as error:
                if error.status != HTTPStatus.NOT_FOUND:
                    raise
                if instance == CONTROLLER:
                    break
                continue
        taken.append(instance)
    if not taken:
        raise ValueError(f"no instance of {driver.spec.name} has volume {volume_id!r}")
    return taken


def clear_volume_condition(driver: Driver, volume_id: str) -> None:
    """Make the volume healthy again on every instance (where it has no condition, or
    is unknown, nothing changes)."""
    for instance in driver.instances():
        with driver.admin(instance) as admin:
            try:
                admin.clear_condition(volume_id)
            except AdminError as error:
                if error.status != HTTPStatus.NOT_FOUND:
                    raise
