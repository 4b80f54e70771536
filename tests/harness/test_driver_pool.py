"""The driver pool's bookkeeping without a cluster: which fields make drivers
interchangeable, which idle driver goes when the pool is full, and what a view
difference says. What a reset leaves of a driver is shown on real clusters
(tests/e2e/test_driver_pool.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.pytest_plugin import pool_in_place, pooled_drivers
from csi_harness._internal.pytest_plugin.driver_view import ClusterView
from csi_harness._internal.pytest_plugin.pool_in_place import NotReusable, with_node_limit
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool, pool_key
from csi_mock.admin import AdminError

VIEW = ClusterView(None, {}, {}, {}, {})


@dataclass
class NodeAdmin:
    """A node instance's admin API: what the pool asked of it, in order."""

    calls: list[str]

    def __enter__(self) -> NodeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def set_limits(self, *, max_volumes_per_node: int) -> None:
        self.calls.append(f"limit {max_volumes_per_node}")

    def renew_registration(self) -> None:
        self.calls.append("renew")


@dataclass
class FakeDriver:
    spec: DriverDeployment
    removed: bool = False
    nodes: list[Any] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)

    def adopt_spec(self, spec: DriverDeployment) -> None:
        assert (spec.name, spec.suffix) == (self.spec.name, self.spec.suffix)
        self.spec = spec

    def admin(self, instance: str = "controller") -> NodeAdmin:
        return NodeAdmin(self.calls.setdefault(instance, []))


def test_drivers_differing_only_in_name_suffix_and_in_place_fields_are_interchangeable() -> None:
    base = DriverDeployment().model_dump()

    assert pool_key({**base, "name": "a.csi-mock", "suffix": "-a"}) == pool_key(base)
    assert pool_key({**base, "max_volumes_per_node": 3}) == pool_key(base)
    assert pool_key({**base, "storage_capacity": False}) == pool_key(base)
    assert pool_key({**base, "storage_capacity": None}) == pool_key(base)
    assert pool_key({**base, "pod_info_on_mount": False}) != pool_key(base)
    assert pool_key({**base, "attach_required": True}) != pool_key(base)
    assert pool_key({**base, "attach_limit": 1}) != pool_key(base)


def test_a_node_limit_shows_as_the_kubelet_writes_it() -> None:
    entry = {"name": "d", "nodeID": "n1", "topologyKeys": ["k"], "allocatable": {"count": 32}}
    view = ClusterView(None, {}, {"n1": entry}, {}, {})

    assert with_node_limit(view, 2).csinode_entries == {
        "n1": {**entry, "allocatable": {"count": 2}}
    }
    assert with_node_limit(view, 0).csinode_entries == {
        "n1": {"name": "d", "nodeID": "n1", "topologyKeys": ["k"]}
    }


def test_a_view_difference_names_the_part_and_both_values() -> None:
    after = ClusterView(None, {}, {}, {}, {("fast", "node-1"): ("1Gi", None)})

    assert after.differences(VIEW) == [
        "capacity: {('fast', 'node-1'): ('1Gi', None)}, was {}",
    ]
    assert VIEW.differences(VIEW) == []


class LimitRefusingAdmin(NodeAdmin):
    def set_limits(self, *, max_volumes_per_node: int) -> None:
        raise AdminError(400, f"max_volumes_per_node: {max_volumes_per_node} is not allowed")


def test_a_node_refusing_the_limit_makes_the_driver_not_reusable_and_stops_there() -> None:
    driver = FakeDriver(DriverDeployment(), nodes=[SimpleNamespace(name=n) for n in "abc"])
    admins = {"a": NodeAdmin([]), "b": LimitRefusingAdmin([]), "c": NodeAdmin([])}
    driver.admin = admins.__getitem__  # type: ignore[method-assign]

    with pytest.raises(NotReusable, match=r"^limit refused on b: max_volumes_per_node: 7 is"):
        pool_in_place.set_node_limit(driver, 7)  # type: ignore[arg-type]
    assert (admins["a"].calls, admins["c"].calls) == (["limit 7"], [])


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> tuple[DriverPool, list[FakeDriver]]:
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


def _csidriver(spec: dict[str, Any], labels: dict[str, str]) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(labels=labels), spec=SimpleNamespace(to_dict=lambda: spec)
    )


@dataclass
class FakeKube:
    """The API server's side of one CSIDriver: the merge patches asked for and the spec
    it answers with (storageCapacity defaults to false, as in storage/v1); what was
    written (``writes``) and the live object (``live``: None for none, a 404)."""

    patches: list[dict[str, Any]] = field(default_factory=list)
    live: dict[str, Any] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)

    def patch(self, resource: Any, name: str, patch: dict[str, Any], **kw: Any) -> Any:
        self.patches.append(patch)
        self.get(resource, name)
        spec = {"attachRequired": False, **(self.live or {}), **patch["spec"]}
        spec["storageCapacity"] = bool(spec["storageCapacity"])
        self.live = spec
        return _csidriver(spec, self.labels)

    def get(self, resource: Any, name: str) -> Any:
        if self.live is None:
            raise ApiError(status=SimpleNamespace(code=404, message="not found"))  # type: ignore[arg-type]
        return _csidriver(self.live, self.labels)

    def delete(self, resource: Any, name: str) -> None:
        self.writes.append("delete")
        self.live = None

    def create(self, obj: Any) -> None:
        self.writes.append("create")
        self.live, self.labels = dict(obj.spec.to_dict()), dict(obj.metadata.labels)


def test_a_pooled_driver_takes_another_node_limit_in_place_and_gives_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The limit is set on every node instance, which then registers again; the pool
    waits for the CSINodes to show it. After the test the reset restores the deployed
    limit, the instances register again, and the pool waits for the deployed view."""
    entry = {"name": "d", "nodeID": "n1", "allocatable": {"count": 32}}
    csidriver = {"attachRequired": False, "storageCapacity": True}
    deployed_view = ClusterView(csidriver, {}, {"n1": entry}, {}, {})
    waited: list[ClusterView] = []
    deployed: list[FakeDriver] = []

    def deploy(spec: DriverDeployment) -> FakeDriver:
        nodes = [SimpleNamespace(name="n1"), SimpleNamespace(name="n2")]
        deployed.append(FakeDriver(spec, nodes=nodes))
        return deployed[-1]

    monkeypatch.setattr(pooled_drivers, "observe", lambda kube, driver: deployed_view)
    made = DriverPool(
        FakeKube(live=dict(csidriver)), deploy, lambda driver: None, domain="csi-mock"
    )  # type: ignore[arg-type]
    monkeypatch.setattr(made, "_wait_volumes_gone", lambda driver: None)
    monkeypatch.setattr(made, "_reset_instance", lambda driver, instance: None)
    monkeypatch.setattr(made, "_wait_cluster_view", lambda driver, view: waited.append(view))
    monkeypatch.setattr(FakeDriver, "failed_component", lambda self: None, raising=False)
    monkeypatch.setattr(FakeDriver, "instances", lambda self: ["n1", "n2"], raising=False)
    base = DriverDeployment().model_dump()

    first, _ = made.acquire(base)
    made.release(first, test_failed=False)
    assert first.calls == {} and waited == [deployed_view]

    again, reused = made.acquire({**base, "max_volumes_per_node": 1})

    assert reused and again is first and again.spec.max_volumes_per_node == 1
    assert again.spec.name == first.spec.name
    assert first.calls == {"n1": ["limit 1", "renew"], "n2": ["limit 1", "renew"]}
    assert waited[-1] == with_node_limit(deployed_view, 1)
    assert made.stats.changed_in_place == 1

    made.release(again, test_failed=False)

    assert again.spec.max_volumes_per_node == 32
    assert first.calls["n1"] == ["limit 1", "renew", "renew"]
    assert waited[-1] == deployed_view


def test_a_pooled_driver_takes_another_storage_capacity_in_place_and_gives_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CSIDriver's storageCapacity is patched to what the test asked for (unset:
    removed, so the API server's default), and the pool waits for the CSIDriver as
    the API server answered; after the test it is patched back and the pool waits for
    the deployed view. No node instance is asked anything."""
    deployed_view = ClusterView({"attachRequired": False, "storageCapacity": True}, {}, {}, {}, {})
    waited: list[ClusterView] = []
    kube = FakeKube(live=dict(deployed_view.csidriver or {}))
    made = DriverPool(kube, FakeDriver, lambda driver: None, domain="csi-mock")  # type: ignore[arg-type]
    monkeypatch.setattr(pooled_drivers, "observe", lambda kube, driver: deployed_view)
    monkeypatch.setattr(made, "_wait_volumes_gone", lambda driver: None)
    monkeypatch.setattr(made, "_reset_instance", lambda driver, instance: None)
    monkeypatch.setattr(made, "_wait_cluster_view", lambda driver, view: waited.append(view))
    monkeypatch.setattr(FakeDriver, "failed_component", lambda self: None, raising=False)
    monkeypatch.setattr(FakeDriver, "instances", lambda self: [], raising=False)
    base = DriverDeployment().model_dump()
    first, _ = made.acquire(base)
    made.release(first, test_failed=False)

    again, reused = made.acquire({**base, "storage_capacity": None})

    assert reused and again is first and again.spec.storage_capacity is None
    assert kube.patches[-1] == {"spec": {"storageCapacity": None}}
    assert waited[-1].csidriver == {"attachRequired": False, "storageCapacity": False}
    assert waited[-1].csinode_entries == deployed_view.csinode_entries
    assert made.stats.changed_in_place == 1 and again.calls == {}

    made.release(again, test_failed=False)

    assert again.spec.storage_capacity is True
    assert kube.patches[-1] == {"spec": {"storageCapacity": True}}
    assert waited[-1] == deployed_view


def test_the_reset_puts_back_a_storage_capacity_the_test_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test that turns its CSIDriver's storageCapacity off itself (as the scheduler
    requeue test does) leaves a driver the reset patches back to the deployed value:
    a patch, not a new object."""

    def turn_off(kube: FakeKube) -> None:
        kube.live = {"attachRequired": True, "storageCapacity": False}

    kube = put_back_after(monkeypatch, turn_off)

    assert kube.patches == [{"spec": {"storageCapacity": True}}]
    assert kube.live == {"attachRequired": True, "storageCapacity": True}
    assert kube.writes == []


def test_a_driver_without_a_csidriver_object_has_none_to_patch() -> None:
    without = DriverDeployment(csidriver=False)

    assert not pool_in_place.csidriver_differs(
        without, without.model_copy(update={"storage_capacity": False})
    )
    assert pool_in_place.csidriver_differs(
        DriverDeployment(), DriverDeployment(storage_capacity=False)
    )


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


def put_back_after(monkeypatch: pytest.MonkeyPatch, change: Any) -> FakeKube:
    """A pooled driver whose test did ``change`` to its CSIDriver (a FakeKube), then
    its reset: the FakeKube as the reset left it."""
    deployed = {"attachRequired": True, "storageCapacity": True}
    kube = FakeKube(live=dict(deployed), labels={"app.kubernetes.io/instance": "d"})
    made = DriverPool(kube, FakeDriver, lambda driver: None, domain="csi-mock")  # type: ignore[arg-type]
    monkeypatch.setattr(
        pooled_drivers, "observe", lambda kube, driver: ClusterView(deployed, {}, {}, {}, {})
    )
    monkeypatch.setattr(made, "_wait_volumes_gone", lambda driver: None)
    monkeypatch.setattr(made, "_reset_instance", lambda driver, instance: None)
    monkeypatch.setattr(made, "_wait_cluster_view", lambda driver, view: None)
    monkeypatch.setattr(FakeDriver, "failed_component", lambda self: None, raising=False)
    monkeypatch.setattr(FakeDriver, "instances", lambda self: [], raising=False)
    driver, _ = made.acquire(DriverDeployment().model_dump())
    kube.writes.clear()
    change(kube)
    made.release(driver, test_failed=False)
    assert made.stats.not_reused == {} and made.stats.resets == 1
    return kube


def test_the_reset_makes_again_a_csidriver_the_test_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """attachRequired cannot be patched: a test that flips it deletes the CSIDriver
    and makes another. The reset makes the deployed one again, labels and all, so the
    driver is pooled instead of removed."""

    def flip(kube: FakeKube) -> None:
        kube.live, kube.labels = {"attachRequired": False, "storageCapacity": True}, {}

    kube = put_back_after(monkeypatch, flip)

    assert kube.live == {"attachRequired": True, "storageCapacity": True}
    assert kube.labels == {"app.kubernetes.io/instance": "d"}
    assert kube.writes == ["delete", "create"]


def test_the_reset_makes_again_a_csidriver_the_test_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def delete(kube: FakeKube) -> None:
        kube.live = None

    kube = put_back_after(monkeypatch, delete)

    assert kube.live == {"attachRequired": True, "storageCapacity": True}
    assert kube.writes == ["create"]


def test_a_csidriver_as_deployed_is_not_written_again(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = put_back_after(monkeypatch, lambda kube: None)

    assert kube.writes == []


def test_a_deployment_whose_csidriver_was_not_seen_is_not_put_back() -> None:
    """observe() reads an API error as "no CSIDriver": with one deployed, a baseline
    without it cannot be trusted, and putting it back would delete the real one."""
    kube = FakeKube(live={"attachRequired": True})
    with pytest.raises(NotReusable, match="was not seen after the deployment"):
        pool_in_place.put_back_csidriver(kube, DriverDeployment(), None, {})  # type: ignore[arg-type]
    assert kube.writes == [] and kube.live == {"attachRequired": True}
