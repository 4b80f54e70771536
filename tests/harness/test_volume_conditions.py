"""set_volume_condition / clear_volume_condition: every instance of a deployed driver
that has the volume reports its condition."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from csi_harness import clear_volume_condition, set_volume_condition
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_mock.admin.client import AdminError


@dataclass
class FakeAdmin:
    """One instance's admin API: the volumes its controller has (None: node-only)."""

    volumes: set[str] | None
    conditions: dict[str, tuple[bool, str]] = field(default_factory=dict)

    def set_condition(self, volume_id: str, *, abnormal: bool, message: str = "") -> None:
        self._known(volume_id)
        self.conditions[volume_id] = (abnormal, message)

    def clear_condition(self, volume_id: str) -> None:
        self._known(volume_id)
        self.conditions.pop(volume_id, None)

    def _known(self, volume_id: str) -> None:
        if self.volumes is not None and volume_id not in self.volumes:
            raise AdminError(404, f"volume {volume_id!r} does not exist", "volume_id")


@dataclass
class FakeDriver:
    admins: dict[str, FakeAdmin]
    spec: DriverDeployment = field(default_factory=DriverDeployment)

    def instances(self) -> list[str]:
        return list(self.admins)

    @contextmanager
    def admin(self, instance: str = "controller") -> Iterator[FakeAdmin]:
        yield self.admins[instance]


def central() -> FakeDriver:
    return FakeDriver(
        {"controller": FakeAdmin({"vol-1"}), "node-1": FakeAdmin(None), "node-2": FakeAdmin(None)}
    )


def test_the_condition_reaches_the_controller_and_every_node() -> None:
    driver = central()

    taken = set_volume_condition(driver, "vol-1", abnormal=True, message="degraded")  # type: ignore[arg-type]

    assert taken == ["controller", "node-1", "node-2"]
    for admin in driver.admins.values():
        assert admin.conditions == {"vol-1": (True, "degraded")}


def test_instances_without_the_volume_are_left_out() -> None:
    driver = FakeDriver({"node-1": FakeAdmin({"vol-1"}), "node-2": FakeAdmin({"vol-2"})})

    assert set_volume_condition(driver, "vol-2", abnormal=True) == ["node-2"]  # type: ignore[arg-type]


def test_a_volume_the_controller_does_not_have_is_refused_before_any_node_is_told() -> None:
    driver = central()

    with pytest.raises(ValueError, match=r"no instance of csi-mock\.example has volume 'vol-9'"):
        set_volume_condition(driver, "vol-9", abnormal=True)  # type: ignore[arg-type]

    assert all(not admin.conditions for admin in driver.admins.values())


def test_a_volume_no_distributed_instance_has_is_refused() -> None:
    driver = FakeDriver({"node-1": FakeAdmin({"vol-1"}), "node-2": FakeAdmin({"vol-2"})})

    with pytest.raises(ValueError, match="has volume 'vol-9'"):
        set_volume_condition(driver, "vol-9", abnormal=True)  # type: ignore[arg-type]


def test_clearing_makes_it_healthy_everywhere() -> None:
    driver = central()
    set_volume_condition(driver, "vol-1", abnormal=True)  # type: ignore[arg-type]

    clear_volume_condition(driver, "vol-1")  # type: ignore[arg-type]

    assert all(not admin.conditions for admin in driver.admins.values())
