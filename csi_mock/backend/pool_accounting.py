"""The pools' live accounting: GetCapacity's answers and the admin API's knobs on them."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from csi_mock.config import DriverConfig
from csi_mock.model.capacity_report import CapacityReport, capacity_at
from csi_mock.model.errors import CapacityExhausted, FailedPrecondition, NotFound
from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool, PoolSpec
from csi_mock.model.quantity import format_quantity
from csi_mock.model.topology import Segment
from csi_mock.store.interface import Store


class Capacity:
    """The configured pools with what volumes and drift take of them; every change of
    size or drift is persisted before it returns."""

    def __init__(self, config: DriverConfig, store: Store) -> None:
        self._store = store
        self.pools = [
            Pool(
                PoolSpec(
                    name=pool.name,
                    size=pool.size,
                    segment=dict(pool.segment),
                    max_volume_size=pool.max_volume_size,
                    min_volume_size=pool.min_volume_size,
                    kinds=frozenset(pool.kinds) if pool.kinds is not None else None,
                    allocation=pool.allocation,
                )
            )
            for pool in config.effective_pools()
        ]
        self.by_name: Mapping[str, Pool] = {pool.name: pool for pool in self.pools}
        self._frozen: list[Pool] | None = None

    def load(self) -> None:
        """Rebuild each pool's accounting from the stored volumes, sizes and drift."""
        usage = self._store.pool_usage()
        allocations = self._store.allocations()
        unknown = sorted(set(allocations) - set(self.by_name))
        if unknown:
            raise RuntimeError(
                f"the state holds volumes in pools no longer configured: {', '.join(unknown)}"
            )
        with self._store.transaction():
            for pool in self.pools:
                saved = usage.get(pool.name)
                if saved is not None and saved.total is not None:
                    pool.total = saved.total
                pool.load(allocations.get(pool.name, []), saved.external if saved else 0)
                if saved is None or saved.used != pool.used:
                    self._store.set_pool_used(pool.name, pool.used)

    def report(self, location: Segment | None, kind: VolumeKind) -> CapacityReport:
        """GetCapacity for `kind` at `location`: live, or from the frozen snapshot."""
        return capacity_at(location, kind, self._frozen or self.pools)

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    def freeze(self) -> None:
        """Answer GetCapacity from a snapshot of the pools as they are now (stale capacity)."""
        if self._frozen is None:
            self._frozen = [copy.deepcopy(pool) for pool in self.pools]

    def unfreeze(self) -> None:
        self._frozen = None

    def pool(self, name: str) -> Pool:
        pool = self.by_name.get(name)
        if pool is None:
            raise NotFound(f"no pool named {name!r}")
        return pool

    def resize_pool(self, name: str, size: int) -> Pool:
        pool = self.pool(name)
        before = pool.total
        try:
            pool.resize(size)
        except ValueError as error:
            raise FailedPrecondition(str(error)) from None
        try:
            with self._store.transaction():
                self._store.set_pool_total(name, size)
        except BaseException:
            pool.resize(before)  # Always possible: nothing else ran in between.
            raise
        return pool

    def consume_external(self, name: str, amount: int) -> Pool:
        """Take space outside CSI, as another user of the backend would."""
        pool = self.pool(name)
        if amount > pool.free():
            raise CapacityExhausted(
                f"pool {name} has {format_quantity(pool.free())} free, cannot consume"
                f" {format_quantity(amount)}"
            )
        return self._set_external(pool, pool.external + amount)

    def release_external(self, name: str, amount: int) -> Pool:
        pool = self.pool(name)
        if amount > pool.external:
            raise FailedPrecondition(
                f"pool {name} has only {format_quantity(pool.external)} consumed outside CSI,"
                f" cannot release {format_quantity(amount)}"
            )
        return self._set_external(pool, pool.external - amount)

    def reset(self) -> None:
        """Every pool back to its configured size with no drift, GetCapacity live again.
        Only for pools that hold nothing (``Driver.reset`` checks)."""
        with self._store.transaction():
            for pool in self.pools:
                self._store.set_pool_total(pool.name, None)
                self._store.set_pool_external(pool.name, 0)
                self._store.set_pool_used(pool.name, 0)
        for pool in self.pools:
            pool.total = pool.spec.size
            pool.load([], 0)
        self._frozen = None

    def _set_external(self, pool: Pool, external: int) -> Pool:
        with self._store.transaction():
            self._store.set_pool_external(pool.name, external)
        pool.external = external
        return pool
