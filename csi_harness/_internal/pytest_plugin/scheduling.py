"""Which worker runs which test, with pytest-xdist (``-n N``, ``--dist load``).

Three rules on top of xdist's load scheduling, about tests that take much longer than
the others and about the drivers the tests share:

* the test order (``pytest_collection_modifyitems``, in every worker alike): ``slow``
  tests first, one at the head of each worker's first batch (``spread_slow_first``),
  then the others, then the ``cluster_wide`` ones; within each, the tests that can
  take the same pooled driver side by side (``driver_family``), and among them those
  that ask for the same fields (``driver_group``);
* a test marked ``alone`` gets a worker that runs nothing else until it ends
  (``PlannedScheduling``, in the controller). An xdist worker starts a test only once
  it holds the next one too, so whatever test it is handed with a 2-minute test waits
  those 2 minutes. The worker of an ``alone`` test is handed that test and one from
  the end of the order (one that would start late anyway); after them it takes tests
  like any other worker, so the workers of tests that only wait out a Kubernetes
  timer share the rest once the timer ran out;
* where the workers share their idle drivers (kind, existing clusters), a worker is
  handed a test of a family no other worker holds before one of a family another
  worker holds (``driver_families.pick_next``), so that a family's tests follow one
  another and each takes the driver of the one before from the shared pool, rather
  than two of them starting at once and each deploying a driver; and the smaller
  families go first in the order.

The controller collects no tests, so it cannot read markers: each worker writes the
node ids of its ``alone`` tests, and each test's family and rank, to a directory the
controller made for the session (``PLAN_INPUT``), and the scheduler reads them once
every worker has collected.

pytest-xdist has no supported way to give a test a worker of its own, so
``PlannedScheduling`` subclasses its ``LoadScheduling`` and uses attributes xdist does
not promise to keep. It does so only with the releases in ``XDIST_VERSIONS``, the
range pyproject.toml's dev extra pins and tests/harness/test_scheduling.py checks the
internals of; with any other, ``alone`` tests are scheduled as ``slow`` ones by xdist's
own load scheduling, and the session says so once (a warning).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from csi_harness._internal.providers.factory import drivers_handed_over
from csi_harness._internal.pytest_plugin.driver_families import (
    LAST_RANK,
    SHARED_RANK,
    SLOW_RANK,
    driver_family,
    driver_group,
    pick_next,
    pooled_family,
)
from csi_harness._internal.pytest_plugin.providers import cluster_options

if TYPE_CHECKING:
    from xdist.scheduler import LoadScheduling

ALONE = "alone"
SLOW = "slow"
CLUSTER_WIDE = "cluster_wide"
PLAN_INPUT = "csi_harness_plan_dir"
FAMILIES_INPUT = "csi_harness_by_family"
MIN_SHARED_WORKERS = 3
"""Workers left for all the other tests: with fewer, ``alone`` is not honoured (its
tests count as ``slow``). On kind's two cores three workers share the tests best
(docs/benchmarks.md), and the mission set's three ``alone`` tests only wait out a
Kubernetes timer: ``-n 6`` gives them a worker each and leaves three for the rest
(5-6 minutes for the set against 7 at ``-n 3``, where two of them held two workers
of three), and each of their workers takes tests again once its test ends."""

XDIST_VERSIONS = SpecifierSet(">=3.6,<3.9")
"""The pytest-xdist releases whose ``LoadScheduling`` internals ``PlannedScheduling``
relies on (its attributes ``node2collection``, ``node2pending``, ``pending``,
``collection``, ``maxschedchunk`` and its methods ``_check_nodes_have_same_collection``
and ``_send_tests``). Raise the bound only with tests/harness/test_scheduling.py green
on the new release."""

WINDOW_PER_WORKER = 2
"""How far ahead in the order ``pick_next`` looks for a test of another family: two
tests per worker (a family of more runs on several workers at once)."""

_PLAN_DIR = pytest.StashKey[Path]()

T = TypeVar("T")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{ALONE}: with pytest-xdist, runs on a worker that starts no other test before "
        f"it ends (for a test that outlasts the others together), if {MIN_SHARED_WORKERS} "
        "workers are left for the rest",
    )
    if not hasattr(config, "workerinput") and _load_scheduling(config):
        version = xdist_version()
        if version not in XDIST_VERSIONS:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"pytest-xdist {version} is not one csi-harness was tested with "
                    f"({XDIST_VERSIONS}): tests marked {ALONE} share workers like slow ones"
                ),
                stacklevel=2,
            )
            return
        config.stash[_PLAN_DIR] = Path(tempfile.mkdtemp(prefix="csi-harness-plan-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_PLAN_DIR, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's hook, in the controller: where the worker writes its plan, and
    whether the workers hand tests by driver family (decided once, here, so that every
    worker orders its tests alike, as xdist requires)."""
    directory = node.config.stash.get(_PLAN_DIR, None)
    if directory is not None:
        node.workerinput[PLAN_INPUT] = str(directory)
    node.workerinput[FAMILIES_INPUT] = by_family(node.config)


def by_family(config: pytest.Config) -> bool:
    """Whether tests are handed by driver family: only where the workers share their
    idle drivers (kind, existing clusters) and the driver pool is on."""
    if config.getoption("--csi-no-driver-pool", False):
        return False
    if not config.getoption("--csi-driver-pool-idle", 1):
        return False
    return drivers_handed_over(cluster_options(config))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After ``-m``/``-k`` have deselected (trylast: the batches xdist makes are of
    the items that are left): the order of the module docstring, and, in a worker,
    the plan written for the controller (``alone`` tests, each test's family and
    rank). Each group keeps collection order; every worker sorts alike, as
    pytest-xdist requires."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    max_chunk = config.getoption("maxschedchunk", None)
    # Only where the workers share their idle drivers does it matter which worker takes
    # a family's next test; elsewhere each worker's pool is its own, and the order is
    # the one that hands a worker consecutive tests of a family.
    shared = bool(workerinput.get(FAMILIES_INPUT, False))
    grouped = group_by(group_by(items, driver_group), driver_family, smallest_first=shared)
    items[:] = spread_slow_first(grouped, order_rank, int(workerinput["workercount"]), max_chunk)
    if PLAN_INPUT in workerinput:
        plan = CollectedPlan(
            alone=[item.nodeid for item in items if item.get_closest_marker(ALONE) is not None],
            tests={item.nodeid: (pooled_family(item), order_rank(item)) for item in items}
            if shared
            else {},
        )
        plan.write(Path(workerinput[PLAN_INPUT]), str(workerinput["workerid"]))


def order_rank(item: pytest.Item) -> int:
    """Where ``item`` goes in the order: ``slow`` and ``alone`` tests first,
    ``cluster_wide`` ones last."""
    if item.get_closest_marker(CLUSTER_WIDE) is not None:
        return LAST_RANK
    marked = item.get_closest_marker(SLOW) or item.get_closest_marker(ALONE)
    return SLOW_RANK if marked is not None else SHARED_RANK


@dataclass(frozen=True)
class CollectedPlan:
    """What a worker tells the controller of the tests it collected: the node ids of
    the ``alone`` ones, and each test's driver family (``pooled_family``) and rank."""

    alone: list[str]
    tests: Mapping[str, tuple[str | None, int]]

    def write(self, directory: Path, worker: str) -> None:
        partial = directory / f".{worker}.partial"
        partial.write_text(json.dumps({"alone": self.alone, "tests": dict(self.tests)}))
        os.replace(partial, directory / f"{worker}.json")

    @classmethod
    def read(cls, directory: Path) -> CollectedPlan:
        """The plan the workers wrote (they all collect alike; the first says); empty
        when none did."""
        for path in sorted(directory.glob("gw*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            tests = {
                str(nodeid): (family, int(rank)) for nodeid, (family, rank) in data["tests"].items()
            }
            return cls(alone=[str(nodeid) for nodeid in data["alone"]], tests=tests)
        return cls(alone=[], tests={})


def group_by(
    items: Sequence[T], key: Callable[[T], str], *, smallest_first: bool = False
) -> list[T]:
    """``items`` with those of equal ``key`` side by side, groups in the order of their
    first item (``smallest_first``: of their size, then of their first item), each group
    in its order. pytest-xdist hands a worker consecutive tests, so tests that ask for
    the same driver tend to run on one worker, one after the other, where the driver
    pool hands the next one the driver of the one before. Small driver families first:
    each deploys a driver of its own, and a run ends soonest on tests that take a driver
    already there, which the largest family has."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    ordered = sorted(groups.values(), key=len) if smallest_first else list(groups.values())
    return [item for group in ordered for item in group]


def spread_slow_first(
    items: Sequence[T], rank: Callable[[T], int], workers: int, max_chunk: int | None = None
) -> list[T]:
    """``items`` by rank (0: slow, 1: others, 2: last), each rank in its order, with
    the slow ones placed so that pytest-xdist's load scheduling starts each on a
    worker of its own: it hands every worker a first batch of consecutive tests
    (a quarter of its share, at most ``--maxschedchunk`` when given, at least 2), so a
    slow test goes at the head of each batch, and the slow tests left over come right
    after those batches."""
    slow = [item for item in items if rank(item) == 0]
    others = [item for item in items if rank(item) == 1]
    last = [item for item in items if rank(item) == 2]
    quarter = len(items) // max(workers, 1) // 4
    batch = max(min(quarter, max_chunk) if max_chunk else quarter, 2)
    ordered: list[T] = []
    for _ in range(workers):
        head = [slow.pop(0)] if slow else []
        take = batch - len(head)
        ordered += head + others[:take]
        others = others[take:]
    return ordered + slow + others + last


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScheduling | None:
    """With ``--dist load`` (what ``-n`` means), xdist's load scheduling with ``alone``
    tests on workers of their own and, where the workers share their drivers, tests
    handed by driver family; other modes, and xdist releases outside
    ``XDIST_VERSIONS``, are xdist's own."""
    stashed = config.stash.get(_PLAN_DIR, None)
    if stashed is None:
        return None
    directory: Path = stashed
    return planned_scheduling(config, log, lambda: CollectedPlan.read(directory))


def xdist_version() -> Version:
    """The installed pytest-xdist's release."""
    return Version(metadata.version("pytest-xdist"))


def planned_scheduling(
    config: pytest.Config, log: Any, collected: Callable[[], CollectedPlan]
) -> LoadScheduling:
    """xdist's ``LoadScheduling`` with the workers' plan (``collected()``, read once
    every worker has collected): each ``alone`` test gets a worker that starts nothing
    else before it ends, and each worker is handed tests by ``pick_next``."""
    from xdist.scheduler import LoadScheduling

    class PlannedScheduling(LoadScheduling):  # type: ignore[misc]
        """Before the first batches, each ``alone`` test goes to a worker of its own
        with the last test of the order behind it; the rest is LoadScheduling's, and
        that worker joins it when the two are done. What LoadScheduling sends a worker
        is chosen by ``pick_next``."""

        collection: list[str] | None
        maxschedchunk: int | None
        families: list[str | None] | None = None
        ranks: Sequence[int] = ()

        def schedule(self) -> None:
            if self.collection is not None or not self._check_nodes_have_same_collection():
                super().schedule()
                return
            collection = next(iter(self.node2collection.values()))
            plan = collected()
            if plan.tests:
                known = [plan.tests.get(nodeid, (None, SHARED_RANK)) for nodeid in collection]
                self.families = [family for family, _ in known]
                self.ranks = [rank for _, rank in known]
            alone = [collection.index(nodeid) for nodeid in plan.alone if nodeid in collection]
            shared = self.nodes[len(alone) :]
            if not alone or len(shared) < MIN_SHARED_WORKERS:
                super().schedule()
                return
            log(f"alone tests on workers of their own: {len(alone)}")
            self.collection = collection
            self.pending[:] = [index for index in range(len(collection)) if index not in alone]
            if self.maxschedchunk is None:
                self.maxschedchunk = len(collection)
            for node, index in zip(self.nodes, alone, strict=False):
                # The test behind it lets the worker start it (and waits for it).
                behind = [self.pending.pop()] if len(self.pending) > 2 * len(shared) else []
                self.node2pending[node] += [index, *behind]
                node.send_runtest_some([index, *behind])
                if not behind:
                    node.shutdown()
            batch = max(min(len(self.pending) // len(shared) // 4, self.maxschedchunk), 2)
            for node in shared:
                self._send_tests(node, batch)
            if not self.pending:
                for node in shared:
                    node.shutdown()

        def _send_tests(self, node: Any, num: int) -> None:
            if self.families is None:
                super()._send_tests(node, num)
                return
            families = self.families
            elsewhere = Counter(
                family
                for other, held in self.node2pending.items()
                if other is not node
                for family in {families[index] for index in held}
                if family is not None
            )
            picked = pick_next(
                self.pending,
                num,
                held=self.node2pending[node],
                elsewhere=elsewhere,
                families=families,
                ranks=self.ranks,
                window=WINDOW_PER_WORKER * len(self.nodes),
            )
            for index in picked:
                self.pending.remove(index)
            if picked:
                self.node2pending[node].extend(picked)
                node.send_runtest_some(picked)

    return PlannedScheduling(config, log)


def _load_scheduling(config: pytest.Config) -> bool:
    if not config.pluginmanager.has_plugin("xdist"):
        return False
    return bool(config.getoption("dist", "no") == "load")
