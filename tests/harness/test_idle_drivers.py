"""Where a driver pool keeps its idle drivers: in the process, or in a directory the
session's pytest-xdist workers share and hand drivers over through."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csi_harness._internal.deploy.incluster import InClusterDriver
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube.nodes import ClusterNode
from csi_harness._internal.providers.base import DriverHandover
from csi_harness._internal.pytest_plugin.driver_view import ClusterView
from csi_harness._internal.pytest_plugin.idle_drivers import (
    IdleDrivers,
    PooledDriver,
    SharedIdleDrivers,
)

VIEW = ClusterView(
    {"attachRequired": True},
    {"sc": {"provisioner": "d"}},
    {"n1": {"name": "d", "nodeID": "n1"}},
    {"n1": {"topology.csi-mock/node": "n1"}},
    {("ns/sc", "[('k', 'v')]"): ("1Gi", None)},
)


@dataclass
class HandedDriver:
    """A driver as another process adopts it: only its handover state."""

    state: dict[str, object]

    @property
    def name(self) -> str:
        return str(self.state["name"])


class HandingCluster:
    """``DriverHandover`` for drivers that are their state."""

    def handover(self, driver: Any) -> dict[str, object]:
        return dict(driver.state)

    def adopt_driver(self, state: Mapping[str, object]) -> Any:
        return HandedDriver(dict(state))


def pooled(name: str, key: str = "k", limit: int = 32) -> PooledDriver:
    spec = DriverDeployment(name=f"{name}.csi-mock", suffix=f"-{name}")
    left_with = {"max_volumes_per_node": limit}
    return PooledDriver(HandedDriver({"name": name}), key, VIEW, spec, {"l": name}, left_with)


def store(directory: Path, max_idle: int, cluster: HandingCluster, user: int) -> SharedIdleDrivers:
    """A store as the process ``user`` opens it (every user counts as running)."""
    return SharedIdleDrivers(directory, max_idle, cluster, user=user, running=lambda pid: True)


def names(drivers: list[PooledDriver]) -> list[str]:
    return [d.driver.name for d in drivers]  # type: ignore[attr-defined]


def test_in_process_the_latest_of_a_key_is_taken_and_the_oldest_goes_when_full() -> None:
    idle = IdleDrivers(max_idle=2)
    assert idle.put(pooled("a", "k1")) == []
    assert idle.put(pooled("b", "k2")) == []
    assert names(idle.put(pooled("c", "k1"))) == ["a"]

    assert idle.take("k1").driver.name == "c"  # type: ignore[union-attr, attr-defined]
    assert idle.take("k1") is None
    assert names(idle.close()) == ["b"] and idle.close() == []


def test_a_driver_left_with_the_in_place_fields_asked_for_is_taken_first(tmp_path: Path) -> None:
    """Changing a node limit is a registration with every kubelet: of a key's idle
    drivers, one already left with the limit asked for goes first, else the latest."""
    for idle in (IdleDrivers(max_idle=4), store(tmp_path, 4, HandingCluster(), 1)):
        for name, limit in (("a", 1), ("b", 32), ("c", 32)):
            idle.put(pooled(name, limit=limit))

        taken = [
            idle.take("k", {"max_volumes_per_node": limit}).driver.name  # type: ignore[union-attr, attr-defined]
            for limit in (1, 1, 32)
        ]

        assert taken == ["a", "c", "b"]
        assert idle.take("k", {"max_volumes_per_node": 1}) is None


def test_a_driver_one_process_returns_another_takes_with_what_the_pool_knew(
    tmp_path: Path,
) -> None:
    cluster = HandingCluster()
    one = store(tmp_path, 4, cluster, 1)
    other = store(tmp_path, 4, cluster, 2)
    given = pooled("a")

    assert one.put(given) == []
    taken = other.take("k")

    assert taken is not None and taken.driver.name == "a"  # type: ignore[attr-defined]
    assert (taken.key, taken.baseline, taken.deployed) == ("k", VIEW, given.deployed)
    assert taken.csidriver_labels == {"l": "a"}
    assert taken.left_with == {"max_volumes_per_node": 32}
    assert one.take("k") is None and other.take("other key") is None


def test_the_shared_store_keeps_max_idle_per_process_and_returns_the_oldest_to_remove(
    tmp_path: Path,
) -> None:
    cluster = HandingCluster()
    one, other = store(tmp_path, 1, cluster, 1), store(tmp_path, 1, cluster, 2)
    assert one.put(pooled("a")) == [] and other.put(pooled("b")) == []

    evicted = one.put(pooled("c"))

    assert names(evicted) == ["a"]
    assert other.take("k").driver.name == "c"  # type: ignore[union-attr, attr-defined]


def test_a_process_that_ends_takes_away_what_no_longer_fits_and_the_last_all(
    tmp_path: Path,
) -> None:
    cluster = HandingCluster()
    one, other = store(tmp_path, 1, cluster, 1), store(tmp_path, 1, cluster, 2)
    one.put(pooled("a"))
    other.put(pooled("b"))

    assert names(one.close()) == ["a"]
    assert names(other.close()) == ["b"]
    assert list(tmp_path.glob("*.json")) == []


def test_a_process_that_died_without_closing_leaves_its_share_to_the_last_one(
    tmp_path: Path,
) -> None:
    cluster = HandingCluster()
    running = {1, 2}

    def opened(user: int) -> SharedIdleDrivers:
        return SharedIdleDrivers(tmp_path, 1, cluster, user=user, running=running.__contains__)

    one, other = opened(1), opened(2)
    one.put(pooled("a"))
    other.put(pooled("b"))
    running.discard(2)  # killed: it never closes

    assert names(one.close()) == ["a", "b"]


def test_a_cluster_view_survives_json() -> None:
    assert ClusterView.from_json(json.loads(json.dumps(VIEW.to_json()))) == VIEW


def test_an_in_cluster_driver_taken_over_has_the_deployments_token_and_restarts(
    tmp_path: Path,
) -> None:
    def made(spec: DriverDeployment) -> InClusterDriver:
        return InClusterDriver(
            spec,
            nodes=[ClusterNode("n1", "zone-a", True)],
            kube=None,  # type: ignore[arg-type]
            kubeconfig=tmp_path / "kubeconfig",
            kubectl="kubectl",
            image="csi-mock",
            sidecar_images={},
            generation="1",
        )

    spec = DriverDeployment(name="d1.csi-mock", suffix="-d1")
    deployed = made(spec)
    deployed._restarts_when_ready = {"pod/csi-attacher": 2}
    state = json.loads(json.dumps(deployed.handover()))
    assert state["nodes"] == [["n1", "zone-a", True]]  # adopting asks the cluster nothing

    adopted = made(spec)
    adopted.take_over(state)

    assert (adopted.generation, adopted.admin_token) == (deployed.generation, deployed.admin_token)
    assert adopted._restarts_when_ready == {"pod/csi-attacher": 2}
    assert adopted.spec == deployed.spec
    assert isinstance(HandingCluster(), DriverHandover)
