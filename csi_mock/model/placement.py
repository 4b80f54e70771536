"""Choosing a pool for a new volume: topology first, then room."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from csi_mock.model.errors import CapacityExhausted, InvalidArgument, OutOfRange
from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool
from csi_mock.model.topology import Segment, format_segment, segment_within


@dataclass(frozen=True)
class PlacementRequest:
    """What CreateVolume asks for, in domain terms."""

    kind: VolumeKind
    required_bytes: int = 0
    limit_bytes: int = 0
    requisite: Sequence[Segment] = field(default_factory=tuple)
    preferred: Sequence[Segment] = field(default_factory=tuple)
    default_size: int = 1 << 30
    source_segment: Segment | None = None
    """Where the data the volume is created with lives (a snapshot's or a source
    volume's segment); None: created empty, any pool."""


@dataclass(frozen=True)
class Placement:
    """A reservation made on a pool: the caller persists it or gives it back."""

    pool: Pool
    size: int
    allocation: int
    offset: int


def validate_range(required: int, limit: int) -> None:
    if required < 0 or limit < 0:
        raise InvalidArgument("capacity_range: required_bytes and limit_bytes must not be negative")
    if limit and required > limit:
        raise OutOfRange(f"capacity_range: required_bytes {required} exceeds limit_bytes {limit}")


def range_for_source(required: int, limit: int, source_size: int, source: str) -> int:
    """The required_bytes of a volume created with the data of `source` (a snapshot or
    volume of `source_size` bytes): at least that size, so a request without a size or
    with a smaller one gets the source's size; a limit below it is OutOfRange."""
    validate_range(required, limit)
    if limit and limit < source_size:
        raise OutOfRange(
            f"capacity_range: limit_bytes {limit} cannot hold {source} of {source_size} bytes"
        )
    return max(required, source_size)


def can_take_data_from(pool: Pool, source_segment: Segment) -> bool:
    """True when data bound to `source_segment` is reachable from everywhere a volume in
    `pool` is (every label of the source's segment is one of the pool's): a copy made
    there needs no transfer between segments. A source without a segment can go anywhere."""
    return segment_within(source_segment, pool.segment)


def candidate_pools(request: PlacementRequest, pools: Sequence[Pool]) -> list[Pool]:
    """Pools allowed for the request, in the order they should be tried.

    Pools reachable from the preferred segments come first, in the order of those
    segments; then pools reachable from any requisite segment, in configuration order.
    Without requisite segments every pool serving the kind is allowed. A volume created
    from a source may only go where the source's data is (`can_take_data_from`).
    """
    serving = [pool for pool in pools if pool.serves(request.kind)]
    if request.source_segment is not None:
        source = request.source_segment
        serving = [pool for pool in serving if can_take_data_from(pool, source)]
    ordered: list[Pool] = []
    seen: set[str] = set()

    def take(pool: Pool) -> None:
        if pool.name not in seen:
            seen.add(pool.name)
            ordered.append(pool)

    allowed = serving
    if request.requisite:
        allowed = [
            pool
            for pool in serving
            if any(segment_within(pool.segment, segment) for segment in request.requisite)
        ]
    for segment in request.preferred:
        for pool in allowed:
            if segment_within(pool.segment, segment):
                take(pool)
    for pool in allowed:
        take(pool)
    return ordered


def default_size_for(request: PlacementRequest, pool: Pool) -> int:
    """The size `pool` gives a volume requested without required_bytes: the default,
    at most limit_bytes and at most the largest volume of the kind the pool can take
    now (its max_volume_size, free space or largest extent). A pool with no room keeps
    the default within its max_volume_size, so it counts as full, not out of range.
    The pool's minimum still applies (`Pool.size_for_request`)."""
    size = request.default_size
    if request.limit_bytes:
        size = min(size, request.limit_bytes)
    room = pool.maximum_volume_size(request.kind)
    if room:
        return min(size, room)
    if pool.spec.max_volume_size is not None:
        size = min(size, pool.spec.max_volume_size)
    return size


def place_volume(request: PlacementRequest, pools: Sequence[Pool]) -> Placement:
    """Reserve space for a new volume on the first allowed pool with room.

    Without required_bytes (no capacity_range, or only a limit) the size is the
    driver's choice, as CSI allows ("the Plugin MAY choose an implementation-defined
    capacity range"): `default_size`, capped by limit_bytes and, per pool, by the
    largest volume that pool can take now (`default_size_for`). So a request without
    a size succeeds wherever GetCapacity advertises a maximum_volume_size above 0.

    Raises OutOfRange when no allowed pool can hold a volume of the requested range
    at all (its per-volume bounds), and CapacityExhausted when some could but none has
    room now or no pool is reachable from the requested topology.
    """
    validate_range(request.required_bytes, request.limit_bytes)
    required = request.required_bytes
    if required == 0:
        required = request.default_size
        if request.limit_bytes:
            required = min(required, request.limit_bytes)
    candidates = candidate_pools(request, pools)
    if not candidates:
        where = ", ".join(format_segment(s) for s in request.requisite) or "any segment"
        source = ""
        if request.source_segment is not None:
            source = f" and holds data of segment {format_segment(request.source_segment)}"
        raise CapacityExhausted(
            f"no pool serving kind {request.kind.name!r} is reachable from {where}{source}"
        )
    fitting_range = False
    for pool in candidates:
        wanted = required if request.required_bytes else default_size_for(request, pool)
        size = pool.size_for_request(wanted, request.limit_bytes)
        if size is None:
            continue
        fitting_range = True
        allocation = request.kind.allocation_for(size)
        offset = pool.reserve(allocation)
        if offset is not None:
            return Placement(pool=pool, size=size, allocation=allocation, offset=offset)
    if not fitting_range:
        raise OutOfRange(
            f"no allowed pool supports a volume of {required} bytes"
            + (f" (limit {request.limit_bytes})" if request.limit_bytes else "")
            + ": "
            + "; ".join(_bounds(pool) for pool in candidates)
        )
    raise CapacityExhausted(
        f"no allowed pool has room for {required} bytes of kind {request.kind.name!r}: "
        + "; ".join(
            f"{pool.name} can take at most {pool.maximum_volume_size(request.kind)}"
            for pool in candidates
        )
    )


def _bounds(pool: Pool) -> str:
    upper = pool.spec.max_volume_size
    return f"{pool.name} takes {pool.spec.min_volume_size}.." + (
        str(upper) if upper is not None else "unbounded"
    )
