"""The stateful test's model of a csi-mock driver: what should exist, and what each call
should answer, written from the documented rules rather than from the driver's code.

Pools follow docs/design.md: free = total - external - sum of allocations, an allocation
is size x kind cost, contiguous pools hand out extents first-fit, GetCapacity adds up
reachable pools and reports the largest volume one pool can take now. Calls are
predicted as (status code name, model afterwards); the test compares every answer and
every observable (ListVolumes, GetCapacity, admin pools, database rows, backing files,
mounts) with the model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

MiB = 1 << 20
GiB = 1 << 30
NODE_KEY = "topology.csi-mock.example/node"
NODE_ID = "node-1"
KIND_COST = {"striped": 1, "mirrored": 2}
"""Integer costs, so the model's arithmetic needs no floats."""
LOCATIONS: tuple[str | None, ...] = (None, "node-1", "node-2")


@dataclass(frozen=True)
class PoolSpec:
    name: str
    size: int
    node: str | None
    """The node label of the pool's segment; None: reachable from everywhere."""
    contiguous: bool = False
    max_volume_size: int | None = None
    min_volume_size: int = 0
    kinds: frozenset[str] | None = None

    def serves(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def reachable_from(self, node: str | None) -> bool:
        return node is None or self.node is None or self.node == node

    def to_config(self) -> dict[str, object]:
        config: dict[str, object] = {
            "name": self.name,
            "size": self.size,
            "allocation": "contiguous" if self.contiguous else "pooled",
            "min_volume_size": self.min_volume_size,
        }
        if self.node is not None:
            config["segment"] = {NODE_KEY: self.node}
        if self.max_volume_size is not None:
            config["max_volume_size"] = self.max_volume_size
        if self.kinds is not None:
            config["kinds"] = sorted(self.kinds)
        return config


POOLS = (
    PoolSpec("n1", GiB, "node-1", max_volume_size=768 * MiB),
    PoolSpec("n1c", GiB, "node-1", contiguous=True),
    PoolSpec("n2", 512 * MiB, "node-2", contiguous=True, min_volume_size=32 * MiB,
             kinds=frozenset({"striped"})),
    PoolSpec("shared", 512 * MiB, None, kinds=frozenset({"mirrored"})),
)  # fmt: skip
SPECS = {spec.name: spec for spec in POOLS}


@dataclass
class VolumeModel:
    id: str
    name: str
    pool: str
    kind: str
    size: int
    offset: int
    block: bool
    multi_writer: bool
    """SINGLE_NODE_MULTI_WRITER (several targets on the node) or SINGLE_NODE_WRITER."""
    context: dict[str, str] = field(default_factory=dict)
    """The volume_context CreateVolume returned (the CO passes it to the node)."""
    attached: bool = False
    staged: str | None = None
    """The staging path, when staged."""
    targets: dict[str, bool] = field(default_factory=dict)
    """Published target paths -> readonly."""

    @property
    def allocation(self) -> int:
        return self.size * KIND_COST[self.kind]


@dataclass
class PoolModel:
    spec: PoolSpec
    total: int
    external: int = 0

    def used(self, volumes: Mapping[str, VolumeModel]) -> int:
        return sum(v.allocation for v in volumes.values() if v.pool == self.spec.name)

    def free(self, volumes: Mapping[str, VolumeModel]) -> int:
        return max(0, self.total - self.used(volumes) - self.external)

    def extents(self, volumes: Mapping[str, VolumeModel]) -> list[tuple[int, int]]:
        return sorted((v.offset, v.allocation) for v in volumes.values() if v.pool == self.name)

    @property
    def name(self) -> str:
        return self.spec.name

    def gaps(self, volumes: Mapping[str, VolumeModel]) -> list[tuple[int, int]]:
        """Free (offset, length) ranges of a contiguous pool, in address order."""
        gaps, cursor = [], 0
        for offset, length in self.extents(volumes):
            if offset > cursor:
                gaps.append((cursor, offset - cursor))
            cursor = max(cursor, offset + length)
        if cursor < self.total:
            gaps.append((cursor, self.total - cursor))
        return gaps

    def reserve(self, allocation: int, volumes: Mapping[str, VolumeModel]) -> int | None:
        """Where a new allocation goes (first fit in a contiguous pool), or None."""
        if allocation > self.free(volumes):
            return None
        if not self.spec.contiguous:
            return 0
        for offset, length in self.gaps(volumes):
            if length >= allocation:
                return offset
        return None

    def largest_free(self, volumes: Mapping[str, VolumeModel]) -> int:
        free = self.free(volumes)
        if not self.spec.contiguous:
            return free
        return min(max((length for _, length in self.gaps(volumes)), default=0), free)

    def available(self, kind: str, volumes: Mapping[str, VolumeModel]) -> int:
        return self.free(volumes) // KIND_COST[kind]

    def maximum_volume_size(self, kind: str, volumes: Mapping[str, VolumeModel]) -> int:
        largest = self.largest_free(volumes) // KIND_COST[kind]
        if self.spec.max_volume_size is not None:
            largest = min(largest, self.spec.max_volume_size)
        return largest if largest >= max(self.spec.min_volume_size, 1) else 0

    def shrink_floor(self, volumes: Mapping[str, VolumeModel]) -> int:
        floor = self.used(volumes) + self.external
        if self.spec.contiguous:
            ends = [offset + length for offset, length in self.extents(volumes)]
            floor = max(floor, max(ends, default=0))
        return floor


@dataclass(frozen=True)
class Capacity:
    available: int
    maximum: int
    minimum: int


@dataclass
class DriverModel:
    pools: dict[str, PoolModel] = field(
        default_factory=lambda: {spec.name: PoolModel(spec, spec.size) for spec in POOLS}
    )
    volumes: dict[str, VolumeModel] = field(default_factory=dict)
    frozen: tuple[dict[str, PoolModel], dict[str, VolumeModel]] | None = None
    """The pools and volumes as they were when GetCapacity was frozen."""

    def copy(self) -> DriverModel:
        return copy.deepcopy(self)

    def by_name(self, name: str) -> VolumeModel | None:
        return next((v for v in self.volumes.values() if v.name == name), None)

    # -- capacity ----------------------------------------------------------------------

    def capacity(self, node: str | None, kind: str) -> Capacity:
        pools, volumes = self.frozen or (self.pools, self.volumes)
        reachable = [
            pool
            for pool in pools.values()
            if pool.spec.serves(kind) and pool.spec.reachable_from(node)
        ]
        if not reachable:
            return Capacity(0, 0, 0)
        return Capacity(
            available=sum(pool.available(kind, volumes) for pool in reachable),
            maximum=max(pool.maximum_volume_size(kind, volumes) for pool in reachable),
            minimum=min(pool.spec.min_volume_size for pool in reachable),
        )

    # -- controller --------------------------------------------------------------------

    def create(
        self, name: str, size: int, limit: int, kind: str, block: bool, requisite: str | None
    ) -> tuple[str, VolumeModel | None]:
        """(code, the volume placed or found); the caller adds a new volume under its ID."""
        existing = self.by_name(name)
        if existing is not None:
            compatible = (
                existing.size >= size
                and not (limit and existing.size > limit)
                and existing.block == block
                and existing.kind == kind
                and SPECS[existing.pool].reachable_from(requisite)
            )
            return ("OK", existing) if compatible else ("ALREADY_EXISTS", None)
        candidates = [
            pool
            for pool in self.pools.values()
            if pool.spec.serves(kind) and (requisite is None or pool.spec.reachable_from(requisite))
        ]
        if not candidates:
            return "RESOURCE_EXHAUSTED", None
        fitting = False
        for pool in candidates:
            placed = max(size, pool.spec.min_volume_size)
            if limit and placed > limit:
                continue
            if pool.spec.max_volume_size is not None and placed > pool.spec.max_volume_size:
                continue
            fitting = True
            offset = pool.reserve(placed * KIND_COST[kind], self.volumes)
            if offset is not None:
                return "OK", VolumeModel("?", name, pool.name, kind, placed, offset, block, False)
        return ("RESOURCE_EXHAUSTED" if fitting else "OUT_OF_RANGE"), None

    def delete(self, volume_id: str) -> str:
        volume = self.volumes.get(volume_id)
        if volume is None:
            return "OK"
        if volume.attached or volume.staged or volume.targets:
            return "FAILED_PRECONDITION"  # In use: the space must not go back yet.
        del self.volumes[volume_id]
        return "OK"

    def expand(self, volume_id: str, size: int) -> str:
        volume = self.volumes.get(volume_id)
        if volume is None:
            return "NOT_FOUND"
        if size <= volume.size:
            return "OK"
        pool = self.pools[volume.pool]
        if pool.spec.max_volume_size is not None and size > pool.spec.max_volume_size:
            return "OUT_OF_RANGE"
        others = {k: v for k, v in self.volumes.items() if k != volume_id}
        offset = pool.reserve(size * KIND_COST[volume.kind], others)
        if offset is None:
            return "RESOURCE_EXHAUSTED"
        volume.size, volume.offset = size, offset
        return "OK"

    def controller_publish(self, volume_id: str) -> str:
        if volume_id not in self.volumes:
            return "NOT_FOUND"
        self.volumes[volume_id].attached = True
        return "OK"

    def controller_unpublish(self, volume_id: str) -> str:
        if volume_id in self.volumes:
            self.volumes[volume_id].attached = False
        return "OK"

    # -- node ----------------------------------------------------------------------------

    def stage(self, volume_id: str, path: str) -> str:
        volume = self.volumes[volume_id]
        if not volume.attached:
            return "FAILED_PRECONDITION"  # publish_context lacks the attachment
        if volume.staged is not None:
            return "OK" if volume.staged == path else "ALREADY_EXISTS"
        volume.staged = path
        return "OK"

    def unstage(self, volume_id: str, path: str) -> str:
        volume = self.volumes[volume_id]
        if volume.staged != path:
            return "OK"  # not staged, or not at this path: nothing to do
        if volume.targets:
            return "FAILED_PRECONDITION"
        volume.staged = None
        return "OK"

    def publish(self, volume_id: str, target: str, staging: str, readonly: bool) -> str:
        volume = self.volumes[volume_id]
        if target in volume.targets:
            return "OK" if volume.targets[target] == readonly else "ALREADY_EXISTS"
        if volume.targets and not volume.multi_writer:
            return "FAILED_PRECONDITION"
        if volume.staged != staging:
            return "FAILED_PRECONDITION"
        volume.targets[target] = readonly
        return "OK"

    def unpublish(self, volume_id: str, target: str) -> str:
        self.volumes[volume_id].targets.pop(target, None)
        return "OK"

    # -- knobs (admin API) -------------------------------------------------------------

    def resize_pool(self, name: str, size: int) -> int:
        """HTTP status."""
        pool = self.pools[name]
        if size < pool.shrink_floor(self.volumes):
            return 409
        pool.total = size
        return 200

    def consume(self, name: str, amount: int) -> int:
        pool = self.pools[name]
        if amount > pool.free(self.volumes):
            return 409
        pool.external += amount
        return 200

    def release(self, name: str, amount: int) -> int:
        pool = self.pools[name]
        if amount > pool.external:
            return 409
        pool.external -= amount
        return 200

    def freeze(self) -> None:
        if self.frozen is None:
            self.frozen = (copy.deepcopy(self.pools), copy.deepcopy(self.volumes))

    def unfreeze(self) -> None:
        self.frozen = None

    # -- what the store should hold ------------------------------------------------------

    def store_view(self) -> StoreView:
        return StoreView(
            volumes={
                v.name: (v.pool, v.kind, v.size, v.allocation, v.offset, v.block)
                for v in self.volumes.values()
            },
            pools={
                p.name: (p.total, p.used(self.volumes), p.external) for p in self.pools.values()
            },
            attachments=frozenset(v.name for v in self.volumes.values() if v.attached),
            stagings={v.name: v.staged for v in self.volumes.values() if v.staged is not None},
            publications=frozenset(
                (v.name, target) for v in self.volumes.values() for target in v.targets
            ),
        )


@dataclass(frozen=True)
class StoreView:
    """The store's content keyed by volume name (a pending create has no ID yet)."""

    volumes: dict[str, tuple[str, str, int, int, int, bool]]
    """name -> (pool, kind, size, allocation, offset, block)"""
    pools: dict[str, tuple[int, int, int]]
    """name -> (total, used, external)"""
    attachments: frozenset[str]
    stagings: dict[str, str]
    publications: frozenset[tuple[str, str]]
