"""The driver pool's bookkeeping without a cluster: which fields make drivers
interchangeable, which idle driver goes when the pool is full, and what a view
difference says, how a reset waits. What it changes in place and puts back is
test_pool_in_place.py; what a reset leaves of a driver is shown on real clusters
(tests/e2e/test_driver_pool.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.pytest_plugin import pooled_drivers
from csi_harness._internal.pytest_plugin.driver_view import ClusterView
from csi_harness._internal.pytest_plugin.pool_in_place import NotReusable
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool, pool_key
from csi_mock.admin import AdminError
from csi_mock.admin.views import Limits

VIEW = ClusterView(None, {}, {}, {}, {})


@dataclass
class NodeAdmin:
    """An instance's admin API: what the pool asked of it, in order. It runs the node
    service, and the controller service where ``attach_limit`` is not None."""

    calls: list[str]
    max_volumes_per_node: int | None = 32
    attach_limit: int | None = None

    def __enter__(self) -> NodeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def limits(self) -> Limits:
        return Limits(self.max_volumes_per_node, self.attach_limit)

    def set_limits(
        self, *, max_volumes_per_node: int | None = None, attach_limit: int | None = None
    ) -> None:
        if attach_limit is not None:
            assert self.attach_limit is not None, "no controller service here (409)"
            self.calls.append(f"attach limit {attach_limit}")
        if max_volumes_per_node is not None:
            assert self.max_volumes_per_node is not None, "no node service here (409)"
            self.calls.append(f"limit {max_volumes_per_node}")

    def renew_registration(self) -> None:
        self.calls.append("renew")


@dataclass
class FakeDriver:
    spec: DriverDeployment
    removed: bool = False
    nodes: list[Any] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)
    paused: list[str] = field(default_factory=list)
    """Sidecars a test paused (``stop_component`` on an in-cluster controller's pod)."""

    def resume_paused(self) -> list[str]:
        resumed, self.paused = self.paused, []
        return resumed

    def adopt_spec(self, spec: DriverDeployment) -> None:
        assert (spec.name, spec.suffix) == (self.spec.name, self.spec.suffix)
        self.spec = spec

    def admin(self, instance: str = "controller") -> NodeAdmin:
        calls = self.calls.setdefault(instance, [])
        if instance == "controller":
            return NodeAdmin(calls, max_volumes_per_node=None, attach_limit=0)
        return NodeAdmin(calls)


def test_drivers_differing_only_in_name_suffix_and_in_place_fields_are_interchangeable() -> None:
    base = DriverDeployment().model_dump()

    assert pool_key({**base, "name": "a.csi-mock", "suffix": "-a"}) == pool_key(base)
    assert pool_key({**base, "max_volumes_per_node": 3}) == pool_key(base)
    assert pool_key({**base, "storage_capacity": False}) == pool_key(base)
    assert pool_key({**base, "storage_capacity": None}) == pool_key(base)
    assert pool_key({**base, "pod_info_on_mount": False}) != pool_key(base)
    assert pool_key({**base, "attach_required": True}) != pool_key(base)
    assert pool_key({**base, "attach_limit": 1}) == pool_key(base)


def test_a_view_difference_names_the_part_and_both_values() -> None:
    after = ClusterView(None, {}, {}, {}, {("fast", "node-1"): ("1Gi", None)})

    assert after.differences(VIEW) == [
        "capacity: {('fast', 'node-1'): ('1Gi', None)}, was {}",
    ]
    assert VIEW.differences(VIEW) == []


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> tuple[DriverPool, list[FakeDriver]]:
    return fake_pool(monkeypatch)


def fake_pool(monkeypatch: pytest.MonkeyPatch) -> tuple[DriverPool, list[FakeDriver]]:
    """A pool whose deployments are fakes and whose resets always succeed."""
    deployed: list[FakeDriver] = []

    def deploy(spec: DriverDeployment) -> FakeDriver:
        deployed.append(FakeDriver(spec))
        return deployed[-1]

    def remove(driver: FakeDriver) -> None:
        driver.removed = True

    monkeypatch.setattr(pooled_drivers, "observe", lambda kube, driver: VIEW)
    made = DriverPool(None, deploy, remove, domain="csi-mock", max_idle=2)  # type: ignore[arg-type]
    monkeypatch.setattr(made, "_reset", lambda driver, baseline: None)
    return made, deployed


def test_the_least_recently_returned_idle_driver_goes_when_the_pool_is_full(
    pool: tuple[DriverPool, list[FakeDriver]],
) -> None:
    made, deployed = pool
    base = DriverDeployment().model_dump()
    sizes = ("1Gi", "2Gi", "3Gi")
    drivers = [made.acquire({**base, "node_pool_size": size})[0] for size in sizes]

    for driver in drivers:
        made.release(driver, test_failed=False)

    assert [d.removed for d in deployed] == [True, False, False]
    again, reused = made.acquire({**base, "node_pool_size": "3Gi"})
    assert reused and again is drivers[2]
    _, reused = made.acquire({**base, "node_pool_size": "1Gi"})
    assert not reused and len(deployed) == 4


def test_a_failed_test_or_snapshot_driver_is_removed_with_the_reason(
    pool: tuple[DriverPool, list[FakeDriver]],
) -> None:
    made, deployed = pool
    base = DriverDeployment().model_dump()
    failed, _ = made.acquire(base)
    made.release(failed, test_failed=True)
    snapshots, _ = made.acquire({**base, "snapshots": "full"})
    made.release(snapshots, test_failed=False)

    assert all(d.removed for d in deployed)
    assert made.stats.not_reused == {"its test failed": 1, "not pooled (snapshots)": 1}
    assert made.stats.deployed == 2 and made.stats.reused == 0


@dataclass
class RefusingAdmin:
    """An instance's admin API that refuses ``refusals`` resets with ``status``."""

    refusals: int
    status: int = 409
    resets: int = 0

    def __enter__(self) -> RefusingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def reset(self) -> None:
        self.resets += 1
        if self.resets <= self.refusals:
            raise AdminError(self.status, "holds staging of volume v-1")


@dataclass
class OneInstanceDriver:
    admin_api: RefusingAdmin
    spec: DriverDeployment = field(default_factory=DriverDeployment)

    def admin(self, instance: str = "controller") -> RefusingAdmin:
        return self.admin_api


def reset_one(refusals: int, status: int = 409, settle: float = 5) -> RefusingAdmin:
    made = DriverPool(None, None, None, domain="csi-mock", settle_seconds=settle)  # type: ignore[arg-type]
    driver = OneInstanceDriver(RefusingAdmin(refusals, status))
    made._reset_instance(driver, "node-1")  # type: ignore[arg-type]
    return driver.admin_api


def test_a_reset_refused_while_a_kubelet_still_unstages_is_retried() -> None:
    assert reset_one(refusals=2).resets == 3


def test_a_reset_refused_for_longer_than_volumes_take_to_go_leaves_the_pool() -> None:
    with pytest.raises(NotReusable, match="reset refused by node-1: holds staging of volume v-1"):
        reset_one(refusals=1000, settle=1)


def test_a_reset_refused_for_another_reason_is_not_retried() -> None:
    with pytest.raises(NotReusable, match="reset refused by node-1"):
        reset_one(refusals=1000, status=400)
    admin = RefusingAdmin(refusals=1, status=400)
    with pytest.raises(NotReusable):
        DriverPool(None, None, None, domain="d")._reset_instance(OneInstanceDriver(admin), "n")  # type: ignore[arg-type]
    assert admin.resets == 1


def wait_view(monkeypatch: pytest.MonkeyPatch, views: list[ClusterView]) -> int:
    """``_wait_cluster_view`` for a deployed ``VIEW`` while the cluster shows ``views``
    in turn (the last one from then on); how many times it looked."""
    looks = 0

    def observe(kube: object, driver: object) -> ClusterView:
        nonlocal looks
        looks += 1
        return views[min(looks, len(views)) - 1]

    monkeypatch.setattr(pooled_drivers, "observe", observe)
    made = DriverPool(None, None, None, domain="csi-mock")  # type: ignore[arg-type]
    made._wait_cluster_view(OneInstanceDriver(RefusingAdmin(0)), VIEW)  # type: ignore[arg-type]
    return looks


def test_the_pool_waits_for_capacity_to_be_published_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    republishing = ClusterView(None, {}, {}, {}, {("ns/sc", "[]"): ("1Gi", None)})
    assert wait_view(monkeypatch, [republishing, republishing, VIEW]) == 3


def test_capacity_that_is_not_published_again_in_time_leaves_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    never = ClusterView(None, {}, {}, {}, {("ns/sc", "[]"): ("1Gi", None)})
    monkeypatch.setattr(pooled_drivers, "observe", lambda kube, driver: never)
    made = DriverPool(None, None, None, domain="csi-mock", view_seconds=0.3)  # type: ignore[arg-type]
    driver = OneInstanceDriver(RefusingAdmin(0), DriverDeployment(capacity_poll_interval="50ms"))
    started = time.monotonic()
    with pytest.raises(NotReusable, match=r"changed in the cluster: timed out after .*capacity"):
        made._wait_cluster_view(driver, VIEW)  # type: ignore[arg-type]
    assert 0.3 <= time.monotonic() - started < 2


def test_the_wait_for_the_deployed_view_is_at_least_view_seconds_or_three_polls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waited: list[float] = []

    def wait_for(what: str, probe: object, *, timeout: float, interval: float) -> list[str]:
        waited.append(timeout)
        return []

    monkeypatch.setattr(pooled_drivers, "wait_for", wait_for)
    pool = DriverPool(None, None, None, domain="csi-mock")  # type: ignore[arg-type]
    for poll in ("2s", "20s"):
        driver = OneInstanceDriver(RefusingAdmin(0), DriverDeployment(capacity_poll_interval=poll))
        pool._wait_cluster_view(driver, VIEW)  # type: ignore[arg-type]
    assert waited == [pooled_drivers.VIEW_SECONDS, 60]


def test_a_csidriver_the_test_replaced_leaves_the_pool_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing in the cluster puts back a CSIDriver that differs after the reset made it
    as deployed (another writer replaced it again): the first look says so, where waiting
    would take the capacity polls' timeout and end the same."""
    replaced = ClusterView({"attachRequired": True}, {}, {}, {}, {})
    with pytest.raises(NotReusable, match=r"for good: .*'attachRequired': True}, was None"):
        wait_view(monkeypatch, [replaced, VIEW])
