"""Drivers kept between tests (of one pytest process, or of every pytest-xdist worker of
the session where the cluster hands drivers over: ``idle_drivers``), so that a test
whose driver is the same as an earlier one's gets that one reset instead of a new
deployment.

A driver goes back to the pool after its test only if nothing of the test is left:
  - the test passed, and no component of the driver was stopped or has died;
  - no PersistentVolume or VolumeAttachment of the driver is left in the cluster;
  - every csi-mock instance accepts ``POST /v1/reset``, which it refuses while it holds
    a volume, snapshot, attachment, staging or publication, and which puts its fault
    rules, pools, capacity, limits, switches, conditions and journal back to start-up
    (a refusal is retried for ``SETTLE_SECONDS``: a kubelet may unstage a volume after
    its pod and PV are gone);
  - what the cluster shows of the driver is again what it showed right after the
    deployment: its CSIDriver, its StorageClasses, its CSINode entries (node ID,
    topology keys, allocatable count: that of the node limit the driver keeps from its
    test, below), the nodes' topology labels and the
    CSIStorageCapacity objects of its StorageClasses in any namespace: the ones it
    published (waited for: external-provisioner polls) and none that a test made. A
    CSIDriver the test replaced (``attachRequired`` cannot be patched), deleted or made
    is first made again as deployed (``put_back_csidriver``).
Otherwise it is removed, as every driver was before the pool, and the reason is kept.

Drivers are pooled by their deployment without name, suffix and the fields that can
change in place (``IN_PLACE``, pool_in_place.py), so a test only ever gets a driver
deployed from exactly the fields it asked for, or one changed in place to them and shown
so by the cluster: a node limit set on every node instance and registered with the
kubelets again, CSIDriver fields patched; the pool waits until the cluster shows the
change and the driver's capacity is published as before. After the test, the reset
puts the deployed fields back, and the driver is pooled only once the cluster shows it
as deployed, with one exception: the node limit stays as the test had it until a test
asks for another (each change is a registration with every kubelet), and a test is
handed an idle driver left with the limit it asks for when there is one. Drivers with
snapshots are not pooled (their VolumeSnapshotContents and classes are outside these
checks).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import PersistentVolume
from lightkube.resources.storage_v1 import VolumeAttachment

from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import Cluster, Driver
from csi_harness._internal.pytest_plugin.driver_view import (
    LASTING,
    ClusterView,
    csinode_entries,
    observe,
)
from csi_harness._internal.pytest_plugin.family_progress import FamilyProgress
from csi_harness._internal.pytest_plugin.idle_drivers import IdleDrivers, IdleStore, PooledDriver
from csi_harness._internal.pytest_plugin.pool_in_place import (
    IN_PLACE,
    NotReusable,
    csidriver_differs,
    csidriver_labels,
    kept_while_idle,
    patch_csidriver,
    put_back_csidriver,
    register_again,
    set_attach_limit,
    set_node_limit,
    with_node_limit,
)
from csi_mock.admin import AdminError
from csi_mock.model.duration import parse_duration

log = logging.getLogger("csi_harness.driver_pool")

MAX_IDLE = 2
"""Idle drivers one pytest process keeps (with a shared store: each of the session's
workers adds as many); the least recently returned goes beyond that."""
SETTLE_SECONDS = 20.0
"""How long a driver's volumes and attachments may take to go after its test."""
VIEW_SECONDS = 30.0
"""How long a reset waits, at least, for the cluster to show the driver as deployed
(three capacity polls if they take longer). external-provisioner's polls and the
kubelets' registrations run late on a loaded cluster: on two cores at six workers
a reset waited out 11 s four times in one run, where a new driver took 45-65 s."""


def pool_key(fields: Mapping[str, Any]) -> str:
    """Drivers deployed from equal fields, name, suffix and ``IN_PLACE`` aside, are
    interchangeable."""
    spec = DriverDeployment.model_validate(dict(fields))
    return spec.model_dump_json(exclude={"name", "suffix", *IN_PLACE})


@dataclass
class PoolStats:
    """What the pool did in this process, for the session's summary and benchmarks."""

    deployed: int = 0
    reused: int = 0
    deploy_seconds: float = 0.0
    reset_seconds: float = 0.0
    resets: int = 0
    changed_in_place: int = 0
    """Reused drivers whose ``IN_PLACE`` fields were changed for their test."""
    not_reused: Counter[str] = field(default_factory=Counter)
    """Why drivers were removed instead of pooled, by the first words of the reason."""


class DriverPool:
    """Drivers handed from test to test by ``pool_key``; the idle ones are kept in
    ``idle`` (this process's, or the session's workers' shared store).

    ``deploy`` deploys a driver from a spec (beside the others) and ``remove`` removes
    one: the cluster's own, or a test's stand-ins."""

    def __init__(
        self,
        kube: Client,
        deploy: Callable[[DriverDeployment], Driver],
        remove: Callable[[Driver], None],
        *,
        domain: str,
        max_idle: int = MAX_IDLE,
        idle: IdleStore | None = None,
        progress: FamilyProgress | None = None,
        settle_seconds: float = SETTLE_SECONDS,
        view_seconds: float = VIEW_SECONDS,
    ) -> None:
        self._kube = kube
        self._deploy = deploy
        self._remove = remove
        self._domain = domain
        self._idle: IdleStore = idle if idle is not None else IdleDrivers(max_idle)
        """Where the idle drivers are (``max_idle`` is its size when not given)."""
        self._progress = progress
        """How many tests of each family have yet to take a driver (None: unknown, so
        some may): a driver whose family has none left is removed, not kept idle."""
        self._settle = settle_seconds
        self._view_seconds = view_seconds
        self._lent: dict[int, PooledDriver] = {}
        """The poolable drivers handed out, by the id of their driver."""
        self.stats = PoolStats()

    @classmethod
    def for_cluster(
        cls,
        cluster: Cluster,
        kube: Client,
        *,
        domain: str,
        idle: IdleStore | None = None,
        progress: FamilyProgress | None = None,
    ) -> DriverPool:
        return cls(
            kube,
            cluster.deploy_driver,
            cluster.remove_driver,
            domain=domain,
            idle=idle,
            progress=progress,
        )

    def acquire(self, fields: Mapping[str, Any]) -> tuple[Driver, bool]:
        """A driver deployed from ``fields`` (its own name and suffix added): an idle one
        if there is one, else a new one. Also says whether it was reused."""
        key = pool_key(fields)
        if self._progress is not None:
            self._progress.start(key)
        prefer = kept_while_idle(DriverDeployment.model_validate(dict(fields)))
        while (pooled := self._idle.take(key, prefer)) is not None:
            try:
                self._change_in_place(pooled, fields)
            except NotReusable as why:
                self._discard(pooled.driver, why)
                continue
            self._lent[id(pooled.driver)] = pooled
            self.stats.reused += 1
            return pooled.driver, True
        tag = "d" + secrets.token_hex(3)
        spec = DriverDeployment.model_validate(
            {**fields, "name": f"{tag}.{self._domain}", "suffix": f"-{tag}"}
        )
        started = time.monotonic()
        driver = self._deploy(spec)
        self.stats.deploy_seconds += time.monotonic() - started
        self.stats.deployed += 1
        if spec.snapshots is None:
            baseline = observe(self._kube, driver)
            labels = csidriver_labels(self._kube, spec.name) if baseline.csidriver else None
            self._lent[id(driver)] = PooledDriver(driver, key, baseline, spec, labels or {})
        return driver, False

    def release(self, driver: Driver, *, test_failed: bool) -> None:
        """After the test: reset the driver and keep it, or remove it saying why."""
        pooled = self._lent.pop(id(driver), None)
        try:
            if pooled is None:
                raise NotReusable("not pooled (snapshots)")
            if test_failed:
                raise NotReusable("its test failed")
            if self._progress is not None and self._progress.left(pooled.key) == 0:
                finished = NotReusable("no test of its family left to take it")
                # The family's other idle drivers too: no test will take them either.
                while (idle := self._idle.take(pooled.key)) is not None:
                    self._discard(idle.driver, finished)
                raise finished
            started = time.monotonic()
            self._reset(driver, pooled)
            self.stats.reset_seconds += time.monotonic() - started
            self.stats.resets += 1
        except NotReusable as why:
            self._discard(driver, why)
            return
        pooled.left_with = kept_while_idle(driver.spec)
        for evicted in self._idle.put(pooled):
            self._remove(evicted.driver)

    def _discard(self, driver: Driver, why: NotReusable) -> None:
        self.stats.not_reused[str(why).split(":")[0]] += 1
        log.info("driver %s removed, not pooled: %s", driver.spec.name, why)
        self._remove(driver)

    def close(self) -> None:
        """Remove every idle driver this process is the last to hold (at the end of the
        session)."""
        for pooled in self._idle.close():
            self._remove(pooled.driver)

    # -- the reset ---------------------------------------------------------------------

    def _reset(self, driver: Driver, pooled: PooledDriver) -> None:
        # A sidecar the test paused goes on first: the volumes' deletion and detach
        # may need it. Paused, it restarted nothing, so it runs as deployed again.
        try:
            resumed = driver.resume_paused()
        except AdminError as error:
            raise NotReusable(f"a paused sidecar not resumed: {error}") from None
        if resumed:
            log.info("driver %s: resumed %s", driver.spec.name, ", ".join(resumed))
        problem = driver.failed_component()
        if problem is not None:
            raise NotReusable(f"a component stopped: {problem}")
        self._wait_volumes_gone(driver)
        for instance in driver.instances():
            self._reset_instance(driver, instance)
        # The node limit stays as the test asked for it (pool_in_place.py): set again on
        # the instances the reset gave the deployed one, and registered again only where
        # the kubelets were told another (a test that changed an instance's limit and
        # registered it itself).
        limit = driver.spec.max_volumes_per_node
        deployed = pooled.deployed
        if limit != deployed.max_volumes_per_node:
            set_node_limit(driver, limit)
        expected = _with_limit(pooled, limit)
        if self._csinode_entries(driver) != expected.csinode_entries:
            register_again(driver)
        # Back to the deployed CSIDriver, whether the pool changed it for the test or the
        # test did: patched, or made again if the test replaced, deleted or made it.
        put_back_csidriver(self._kube, deployed, pooled.baseline.csidriver, pooled.csidriver_labels)
        driver.adopt_spec(deployed.model_copy(update={"max_volumes_per_node": limit}))
        self._wait_cluster_view(driver, expected)

    def _change_in_place(self, pooled: PooledDriver, fields: Mapping[str, Any]) -> None:
        """Give an idle driver the ``IN_PLACE`` fields of ``fields`` (pool_in_place.py),
        wait until the cluster shows them, or raise NotReusable."""
        driver = pooled.driver
        wanted = DriverDeployment.model_validate(
            {**fields, "name": driver.spec.name, "suffix": driver.spec.suffix}
        )
        if wanted == driver.spec:
            return
        # The limit the driver was left with, or the one the test wants.
        expected = _with_limit(pooled, wanted.max_volumes_per_node)
        if wanted.max_volumes_per_node != driver.spec.max_volumes_per_node:
            set_node_limit(driver, wanted.max_volumes_per_node)
            register_again(driver)
        if wanted.attach_limit != driver.spec.attach_limit:
            set_attach_limit(driver, wanted.attach_limit)
        if csidriver_differs(wanted, driver.spec):
            live = patch_csidriver(self._kube, wanted)
            expected = dataclasses.replace(expected, csidriver=live)
        driver.adopt_spec(wanted)
        self._wait_cluster_view(driver, expected)
        self.stats.changed_in_place += 1

    def _csinode_entries(self, driver: Driver) -> Mapping[str, Any] | None:
        """The driver's CSINode entries, or None when the API server did not answer
        (then the instances register again, and the view wait decides)."""
        try:
            return csinode_entries(self._kube, driver)
        except (ApiError, httpx2.HTTPError) as error:
            log.info("CSINodes of %s not read: %s", driver.spec.name, error)
            return None

    def _reset_instance(self, driver: Driver, instance: str) -> None:
        """Reset one csi-mock instance. A node's kubelet may unstage a volume after its
        pod and PV are gone, so a refusal for what the instance still holds (409) is
        retried for as long as volumes may take to go."""
        refusals: list[AdminError] = []

        def probe() -> tuple[bool, str]:
            try:
                with driver.admin(instance) as admin:
                    admin.reset()
            except AdminError as error:
                refusals.append(error)
                return error.status != 409, str(error)  # only "still holds" may pass
            refusals.clear()
            return True, ""

        with contextlib.suppress(WaitTimeout):  # the last refusal says why
            wait_for(f"{instance} to accept a reset", probe, timeout=self._settle, interval=0.5)
        if refusals:
            raise NotReusable(f"reset refused by {instance}: {refusals[-1]}")

    def _wait_volumes_gone(self, driver: Driver) -> None:
        name = driver.spec.name

        def probe() -> tuple[bool, list[str]]:
            left = [
                f"pv/{pv.metadata.name if pv.metadata else '?'}"
                for pv in self._kube.list(PersistentVolume)
                if pv.spec and pv.spec.csi and pv.spec.csi.driver == name
            ]
            left += [
                f"volumeattachment/{va.metadata.name if va.metadata else '?'}"
                for va in self._kube.list(VolumeAttachment)
                if va.spec.attacher == name
            ]
            return not left, left

        try:
            wait_for(f"the volumes of {name} to go", probe, timeout=self._settle, interval=0.5)
        except WaitTimeout as left:
            raise NotReusable(f"volumes left: {left}") from None

    def _wait_cluster_view(self, driver: Driver, baseline: ClusterView) -> None:
        """Until the cluster shows the driver as ``baseline`` (as after its deployment,
        with the node limit it has now): at most
        ``view_seconds`` or three capacity polls, whichever is longer (its capacity is
        the part that takes time). A difference that
        nothing puts back (``LASTING``: a StorageClass the test changed, a CSIDriver
        changed again after ``put_back_csidriver``) ends the wait at once."""
        poll = parse_duration(driver.spec.capacity_poll_interval)

        def probe() -> tuple[bool, list[str]]:
            view = observe(self._kube, driver)
            lasting = view.differences(baseline, LASTING)
            if lasting:
                return True, lasting
            differences = view.differences(baseline)
            return not differences, differences

        try:
            lasting = wait_for(
                f"{driver.spec.name} to look as deployed"
                f" (node limit {driver.spec.max_volumes_per_node})",
                probe,
                timeout=max(self._view_seconds, 3 * poll),
                interval=0.5,
            )
        except WaitTimeout as error:
            raise NotReusable(f"changed in the cluster: {error}") from None
        if lasting:
            raise NotReusable(f"changed in the cluster for good: {lasting}")


def _with_limit(pooled: PooledDriver, limit: int) -> ClusterView:
    """What the cluster shows of the pooled driver with the node limit ``limit``: as
    deployed for the deployed limit (whatever the instances reported then, e.g. a limit
    of the spec's ``overrides``), else every CSINode with ``limit``."""
    if limit == pooled.deployed.max_volumes_per_node:
        return pooled.baseline
    return with_node_limit(pooled.baseline, limit)


def log_pool_stats(stats: PoolStats) -> None:
    """One line of what the pool did, in the session's log."""
    log.info(
        "driver pool: %d deployed in %.1f s, %d reused (%d changed in place), %d resets in "
        "%.1f s, not pooled: %s",
        stats.deployed,
        stats.deploy_seconds,
        stats.reused,
        stats.changed_in_place,
        stats.resets,
        stats.reset_seconds,
        dict(stats.not_reused) or "none",
    )
