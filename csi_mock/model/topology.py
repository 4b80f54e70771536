"""Topology segments: the key/value labels that say where storage is reachable from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Segment = Mapping[str, str]


def segment_within(pool_segment: Segment, location: Segment) -> bool:
    """True when storage bound to `pool_segment` is reachable from `location`.

    A location is a full set of labels (e.g. a node's zone and hostname). Storage is
    reachable when every label the pool is bound to has the same value there; a pool
    with no segment is reachable from everywhere.
    """
    return all(location.get(key) == value for key, value in pool_segment.items())


def reachable_from_any(pool_segment: Segment, locations: Iterable[Segment]) -> bool:
    return any(segment_within(pool_segment, location) for location in locations)


def format_segment(segment: Segment) -> str:
    if not segment:
        return "{}"
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(segment.items())) + "}"
