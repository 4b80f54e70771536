"""Longest tests first, so that pytest-xdist's workers finish together.

A CI run's local part is about 2,900 tests, a few of which wait on Kubernetes timers
for one to two and a half minutes. In collection order those sit in the middle of
tests/e2e, and whichever worker picks one up late is still running it long after the
others are idle. Started first, they overlap with everything else (the longest
processing time rule): the workers then end within a short test of each other.

The durations come from a JUnit report of an earlier run, kept in
``tests/durations.json`` (``scripts/test_durations.py`` writes it). A test it does not
name counts as quick and keeps its place; the order is only a schedule, so a stale
file costs time, never a result. The harness plugin orders on top of this
(csi_harness/_internal/pytest_plugin/scheduling.py): tests marked ``slow`` at the head
of each worker's first batch, ``cluster_wide`` ones last, each group in this order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS_FILE = Path(__file__).resolve().parent / "durations.json"


class HasNodeId(Protocol):
    @property
    def nodeid(self) -> str: ...


Item = TypeVar("Item", bound=HasNodeId)


def load_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per test node id; empty when the file is absent."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {str(nodeid): float(seconds) for nodeid, seconds in data["tests"].items()}


def longest_first(items: Sequence[Item], durations: Mapping[str, float]) -> list[Item]:
    """``items`` with the ones ``durations`` names first, longest first; the rest after
    them in their own order (so a module's quick tests stay together)."""
    timed = sorted(
        (item for item in items if item.nodeid in durations),
        key=lambda item: -durations[item.nodeid],
    )
    untimed = [item for item in items if item.nodeid not in durations]
    return timed + untimed
