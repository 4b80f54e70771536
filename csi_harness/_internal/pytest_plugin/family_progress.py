"""How many tests of each family of pooled drivers (``pool_key``) have yet to take a
driver, counted across the session's pytest-xdist workers, so that a driver whose family
has none left is removed after its test instead of kept idle.

An idle driver is not free: on kind each costs about 2 % of two cores (its pods'
probes, the runtime's per-container work, its provisioner's capacity polls;
docs/benchmarks.md), and the drivers of a family whose tests are over would sit in the
pool until pushed out by others or removed by the last worker at the end of the
session. Every worker collects the same tests, so each counts the same totals; the
tests that have taken a driver are counted in a file the workers share, under a lock.
A test skipped before it takes a driver never counts as started, which only keeps its
family's drivers idle as before; a test run twice (a plugin that reruns failures)
counts twice, so its family's drivers may go before its last test, which then deploys
one. Either way a test gets the driver it asks for; only what it costs differs.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from csi_harness._internal.core.file_lock import locked

STARTED = "started-by-family.json"
LOCK = ".started-by-family.lock"


class FamilyProgress:
    """The tests of each family (``totals``, by pool key) and how many of them have
    taken a driver, in ``directory`` (shared by the session's workers)."""

    def __init__(self, totals: Mapping[str, int], directory: Path) -> None:
        self._totals = Counter(totals)
        self._directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def start(self, key: str) -> None:
        """A test of ``key`` takes its driver."""
        with self._locked():
            started = self._read()
            started[key] += 1
            partial = self._directory / f".{STARTED}.partial"
            partial.write_text(json.dumps(started))
            os.replace(partial, self._directory / STARTED)

    def left(self, key: str) -> int:
        """How many tests of ``key`` have yet to take a driver (a key no collected test
        has, as for a test the collection did not count: always some)."""
        if key not in self._totals:
            return 1
        with self._locked():
            return max(0, self._totals[key] - self._read()[key])

    def _read(self) -> Counter[str]:
        """The counts so far; none when there are none or they cannot be read (then
        every family has tests left, and drivers are kept idle as without counts)."""
        try:
            return Counter(json.loads((self._directory / STARTED).read_text()))
        except (OSError, ValueError, TypeError):
            return Counter()

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self._directory / LOCK)
