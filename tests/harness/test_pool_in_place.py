"""What the driver pool changes of a driver in place and puts back after its test
(csi_harness/_internal/pytest_plugin/pool_in_place.py): a node limit on every node
instance (kept while the driver is idle), an attach limit on the instances that run the
controller service, the CSIDriver's storageCapacity patched, and
a CSIDriver the test replaced, deleted or made, made again as deployed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.pytest_plugin import pool_in_place, pooled_drivers
from csi_harness._internal.pytest_plugin.driver_view import ClusterView
from csi_harness._internal.pytest_plugin.pool_in_place import NotReusable, with_node_limit
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool
from csi_mock.admin import AdminError
from tests.harness.test_driver_pool import FakeDriver, NodeAdmin


def test_a_node_limit_shows_as_the_kubelet_writes_it() -> None:
    entry = {"name": "d", "nodeID": "n1", "topologyKeys": ["k"], "allocatable": {"count": 32}}
    view = ClusterView(None, {}, {"n1": entry}, {}, {})

    assert with_node_limit(view, 2).csinode_entries == {
        "n1": {**entry, "allocatable": {"count": 2}}
    }
    assert with_node_limit(view, 0).csinode_entries == {
        "n1": {"name": "d", "nodeID": "n1", "topologyKeys": ["k"]}
    }


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


def test_an_attach_limit_is_set_where_a_controller_runs_keeping_the_node_limit_there() -> None:
    """Central provisioning: the controller instance alone. Distributed: every node's
    instance runs a controller too, and is given its node limit in the same patch (the
    API would otherwise make the node limit follow the attach limit)."""
    central = FakeDriver(DriverDeployment(), nodes=[SimpleNamespace(name="n1")])
    central.instances = lambda: ["controller", "n1"]  # type: ignore[attr-defined]

    pool_in_place.set_attach_limit(central, 1)  # type: ignore[arg-type]

    assert central.calls == {"controller": ["attach limit 1"], "n1": []}
    distributed = FakeDriver(DriverDeployment(), nodes=[SimpleNamespace(name="n1")])
    admins = {"n1": NodeAdmin([], max_volumes_per_node=5, attach_limit=0)}
    distributed.admin = admins.__getitem__  # type: ignore[method-assign]
    distributed.instances = lambda: ["n1"]  # type: ignore[attr-defined]

    pool_in_place.set_attach_limit(distributed, 2)  # type: ignore[arg-type]

    assert admins["n1"].calls == ["attach limit 2", "limit 5"]


class AttachLimitRefusingAdmin(NodeAdmin):
    def set_limits(self, **limits: int | None) -> None:
        raise AdminError(400, f"attach_limit: {limits['attach_limit']} is not allowed")


def test_an_instance_refusing_the_attach_limit_makes_the_driver_not_reusable() -> None:
    driver = FakeDriver(DriverDeployment())
    refusing = AttachLimitRefusingAdmin([], max_volumes_per_node=None, attach_limit=0)
    driver.admin = lambda instance="controller": refusing  # type: ignore[method-assign]
    driver.instances = lambda: ["controller"]  # type: ignore[attr-defined]

    with pytest.raises(NotReusable, match=r"^attach limit refused on controller: attach_limit"):
        pool_in_place.set_attach_limit(driver, 1)  # type: ignore[arg-type]


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


@dataclass
class Kubelets:
    """What the CSINodes show of the driver: the deployed entries, or another limit
    after a registration (``registered``)."""

    deployed: ClusterView
    registered: int | None = None

    def entries(self, kube: object, driver: object) -> Any:
        if self.registered is None:
            return self.deployed.csinode_entries
        return with_node_limit(self.deployed, self.registered).csinode_entries


def limit_pool(
    monkeypatch: pytest.MonkeyPatch, kubelets: Kubelets
) -> tuple[DriverPool, list[ClusterView]]:
    """A pool of fake drivers on two nodes whose CSINodes show what ``kubelets`` says;
    the views its waits were for, in order."""
    waited: list[ClusterView] = []

    def deploy(spec: DriverDeployment) -> FakeDriver:
        return FakeDriver(spec, nodes=[SimpleNamespace(name="n1"), SimpleNamespace(name="n2")])

    csidriver = kubelets.deployed.csidriver
    monkeypatch.setattr(pooled_drivers, "observe", lambda kube, driver: kubelets.deployed)
    monkeypatch.setattr(pooled_drivers, "csinode_entries", kubelets.entries)
    made = DriverPool(
        FakeKube(live=dict(csidriver or {})), deploy, lambda driver: None, domain="csi-mock"
    )  # type: ignore[arg-type]
    monkeypatch.setattr(made, "_wait_volumes_gone", lambda driver: None)
    monkeypatch.setattr(made, "_reset_instance", lambda driver, instance: None)
    monkeypatch.setattr(made, "_wait_cluster_view", lambda driver, view: waited.append(view))
    monkeypatch.setattr(FakeDriver, "failed_component", lambda self: None, raising=False)
    monkeypatch.setattr(FakeDriver, "instances", lambda self: ["n1", "n2"], raising=False)
    return made, waited


DEPLOYED_VIEW = ClusterView(
    {"attachRequired": False, "storageCapacity": True},
    {},
    {"n1": {"name": "d", "nodeID": "n1", "allocatable": {"count": 32}}},
    {},
    {},
)


def test_a_pooled_driver_takes_another_node_limit_in_place_and_keeps_it_while_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The limit is set on every node instance, which then registers again; the pool
    waits for the CSINodes to show it. After the test the reset gives the instances the
    test's limit again (a reset gives them the deployed one) without registering: the
    next test that asks for the same limit gets the driver unchanged, one that asks for
    another has it changed then."""
    kubelets = Kubelets(DEPLOYED_VIEW)
    made, waited = limit_pool(monkeypatch, kubelets)
    base = DriverDeployment().model_dump()
    first, _ = made.acquire(base)
    made.release(first, test_failed=False)
    assert first.calls == {} and waited == [DEPLOYED_VIEW]

    again, reused = made.acquire({**base, "max_volumes_per_node": 1})

    assert reused and again is first and again.spec.max_volumes_per_node == 1
    assert again.spec.name == first.spec.name
    assert first.calls == {"n1": ["limit 1", "renew"], "n2": ["limit 1", "renew"]}
    assert waited[-1] == with_node_limit(DEPLOYED_VIEW, 1)
    assert made.stats.changed_in_place == 1
    kubelets.registered = 1

    made.release(again, test_failed=False)

    assert again.spec.max_volumes_per_node == 1
    assert first.calls["n1"] == ["limit 1", "renew", "limit 1"]
    assert waited[-1] == with_node_limit(DEPLOYED_VIEW, 1)

    same, reused = made.acquire({**base, "max_volumes_per_node": 1})
    assert reused and same is first and made.stats.changed_in_place == 1
    assert first.calls["n1"] == ["limit 1", "renew", "limit 1"]
    made.release(same, test_failed=False)

    back, reused = made.acquire(base)
    assert reused and back is first and back.spec.max_volumes_per_node == 32
    assert first.calls["n2"] == ["limit 1", "renew", "limit 1", "limit 1", "limit 32", "renew"]
    assert waited[-1] == DEPLOYED_VIEW


def test_a_pooled_driver_takes_another_attach_limit_in_place_and_is_given_back_as_deployed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller instance is given the test's attach limit and nothing else is
    asked or awaited (the cluster does not show it); after the test the driver's spec
    is the deployed one again (the instance's reset puts its configured limit back,
    shown on clusters by tests/e2e/test_driver_pool.py), so the next test asking for
    the deployed fields gets it unchanged."""
    made, waited = limit_pool(monkeypatch, Kubelets(DEPLOYED_VIEW))
    monkeypatch.setattr(FakeDriver, "instances", lambda self: ["controller", "n1", "n2"])
    base = DriverDeployment().model_dump()
    first, _ = made.acquire(base)
    made.release(first, test_failed=False)

    limited, reused = made.acquire({**base, "attach_limit": 1})

    assert reused and limited is first and limited.spec.attach_limit == 1
    assert first.calls == {"controller": ["attach limit 1"], "n1": [], "n2": []}
    assert waited[-1] == DEPLOYED_VIEW and made.stats.changed_in_place == 1

    made.release(limited, test_failed=False)
    assert limited.spec.attach_limit == 0 and waited[-1] == DEPLOYED_VIEW

    again, reused = made.acquire(base)
    assert reused and again is first and made.stats.changed_in_place == 1
    assert first.calls["controller"] == ["attach limit 1"]


def test_a_sidecar_the_test_paused_goes_on_before_the_reset_waits_for_the_volumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A paused sidecar (the attacher a skip-attach test pauses) is resumed first, since
    detaching and deleting the test's volumes may need it, and then runs as deployed:
    the driver is pooled and handed on. A component whose pod went stays stopped."""
    made, _ = limit_pool(monkeypatch, Kubelets(DEPLOYED_VIEW))
    order: list[str] = []

    def failed(self: FakeDriver) -> str | None:
        return "stopped: " + ", ".join(self.paused) if self.paused else None

    def volumes_gone(driver: FakeDriver) -> None:
        order.append("volumes gone" if not driver.paused else "volumes wait on a paused sidecar")

    monkeypatch.setattr(FakeDriver, "failed_component", failed)
    monkeypatch.setattr(made, "_wait_volumes_gone", volumes_gone)
    base = DriverDeployment().model_dump()
    driver, _ = made.acquire(base)
    driver.paused = ["csi-attacher"]

    made.release(driver, test_failed=False)

    assert order == ["volumes gone"] and driver.paused == [] and made.stats.not_reused == {}
    again, reused = made.acquire(base)
    assert reused and again is driver
    monkeypatch.setattr(FakeDriver, "failed_component", lambda self: "stopped: csi-mock-node-n1")
    made.release(again, test_failed=False)
    assert made.stats.not_reused == {"a component stopped": 1}
    assert made.acquire(base)[0] is not driver


def test_a_driver_left_with_a_limit_is_expected_with_it_when_another_field_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A driver deployed with the default limit, left with 1 by its last test, handed
    to a test that asks for 1 and another storageCapacity: only the CSIDriver is
    patched, and the CSINodes are expected to show 1, not the deployed limit."""
    kubelets = Kubelets(DEPLOYED_VIEW)
    made, waited = limit_pool(monkeypatch, kubelets)
    base = DriverDeployment().model_dump()
    driver, _ = made.acquire(base)
    made.release(driver, test_failed=False)
    made.acquire({**base, "max_volumes_per_node": 1})
    kubelets.registered = 1
    made.release(driver, test_failed=False)
    calls = list(driver.calls["n1"])

    again, reused = made.acquire({**base, "max_volumes_per_node": 1, "storage_capacity": None})

    assert reused and again is driver and driver.calls["n1"] == calls
    assert waited[-1].csinode_entries == with_node_limit(DEPLOYED_VIEW, 1).csinode_entries
    assert waited[-1].csidriver == {"attachRequired": False, "storageCapacity": False}


def test_a_limit_the_test_registered_itself_is_registered_again_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test may change an instance's limit and have it registered (the kubelet
    refresh case); the reset gives the instances the limit back, and as the CSINodes
    still show the test's, they register again before the pool waits for them."""
    kubelets = Kubelets(DEPLOYED_VIEW)
    made, waited = limit_pool(monkeypatch, kubelets)
    driver, _ = made.acquire(DriverDeployment().model_dump())
    kubelets.registered = 7

    made.release(driver, test_failed=False)

    assert driver.calls == {"n1": ["renew"], "n2": ["renew"]}
    assert waited == [DEPLOYED_VIEW] and made.stats.not_reused == {}


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
    monkeypatch.setattr(pooled_drivers, "csinode_entries", lambda kube, driver: {})
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


def put_back_after(monkeypatch: pytest.MonkeyPatch, change: Any) -> FakeKube:
    """A pooled driver whose test did ``change`` to its CSIDriver (a FakeKube), then
    its reset: the FakeKube as the reset left it."""
    deployed = {"attachRequired": True, "storageCapacity": True}
    kube = FakeKube(live=dict(deployed), labels={"app.kubernetes.io/instance": "d"})
    made = DriverPool(kube, FakeDriver, lambda driver: None, domain="csi-mock")  # type: ignore[arg-type]
    monkeypatch.setattr(
        pooled_drivers, "observe", lambda kube, driver: ClusterView(deployed, {}, {}, {}, {})
    )
    monkeypatch.setattr(pooled_drivers, "csinode_entries", lambda kube, driver: {})
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


def test_a_deployment_whose_instances_report_another_limit_is_expected_as_deployed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spec's ``overrides`` may give the node instances a start-up limit other than
    ``max_volumes_per_node``: with the deployed limit asked for again, the pool expects
    the CSINodes as they were after the deployment, not the spec's count."""
    reported = dataclasses.replace(
        DEPLOYED_VIEW, csinode_entries=with_node_limit(DEPLOYED_VIEW, 5).csinode_entries
    )
    made, waited = limit_pool(monkeypatch, Kubelets(reported))
    base = DriverDeployment().model_dump()
    driver, _ = made.acquire(base)
    made.release(driver, test_failed=False)
    made.acquire({**base, "storage_capacity": None})

    assert waited[0] == reported and waited[1].csinode_entries == reported.csinode_entries
    assert driver.calls == {} and made.stats.not_reused == {}


def test_csinodes_the_api_server_does_not_show_make_the_instances_register_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made, waited = limit_pool(monkeypatch, Kubelets(DEPLOYED_VIEW))

    def refused(kube: object, driver: object) -> Any:
        raise ApiError(status=SimpleNamespace(code=503, message="busy"))  # type: ignore[arg-type]

    monkeypatch.setattr(pooled_drivers, "csinode_entries", refused)
    driver, _ = made.acquire(DriverDeployment().model_dump())

    made.release(driver, test_failed=False)

    assert driver.calls == {"n1": ["renew"], "n2": ["renew"]}
    assert waited == [DEPLOYED_VIEW] and made.stats.resets == 1


def test_a_test_is_handed_the_idle_driver_left_with_its_limit_whatever_else_it_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reset puts storageCapacity back and keeps the limit: of two idle drivers, the
    one left with the limit asked for is handed on, though it went idle first."""
    kubelets = Kubelets(DEPLOYED_VIEW)
    made, _ = limit_pool(monkeypatch, kubelets)
    base = DriverDeployment().model_dump()
    limited, _ = made.acquire({**base, "max_volumes_per_node": 1})
    other, _ = made.acquire(base)
    made.release(limited, test_failed=False)
    made.release(other, test_failed=False)

    taken, reused = made.acquire({**base, "max_volumes_per_node": 1, "storage_capacity": None})

    assert reused and taken is limited and made.stats.changed_in_place == 1
