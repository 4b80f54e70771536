"""Which pytest-xdist worker runs which test (csi_harness/_internal/pytest_plugin/scheduling.py):
the order of the first batches, and ``alone`` tests on workers of their own, seen
in real pytest-xdist sessions of a few trivial tests and over the installed xdist's
``LoadScheduling`` itself (the internals ``AloneScheduling`` relies on, for the
releases pyproject.toml pins)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from csi_harness._internal.pytest_plugin import scheduling
from csi_harness._internal.pytest_plugin.driver_families import driver_family, driver_group
from csi_harness._internal.pytest_plugin.scheduling import (
    CollectedPlan,
    group_by,
    spread_slow_first,
)

REPO = Path(__file__).resolve().parents[2]

TESTS = """
import os, time, pytest

def record(name, event):
    with open(os.environ["SCHEDULE_LOG"], "a") as log:
        log.write(f"{name} {event} {time.monotonic()} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.alone
def test_long():
    record("long", "start")
    time.sleep(1.0)
    record("long", "end")

@pytest.mark.parametrize("i", range(12))
def test_quick(i):
    record(f"quick{i}", "start")
    time.sleep(0.05)
    record(f"quick{i}", "end")
"""


def worker_tests(tmp_path: Path, workers: int) -> dict[str, dict[str, tuple[float, float]]]:
    """By worker: each test it ran, with when it started and ended."""
    (tmp_path / "test_schedule.py").write_text(TESTS)
    log = tmp_path / "log"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers)],
        cwd=tmp_path,
        env={**os.environ, "SCHEDULE_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "13 passed" in run.stdout
    events: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for line in log.read_text().splitlines():
        test, event, when, worker = line.split()
        events[worker, test][event] = float(when)
    workers_tests: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    for (worker, test), times in events.items():
        workers_tests[worker][test] = (times["start"], times["end"])
    return workers_tests


def test_an_alone_test_gets_a_worker_that_starts_nothing_else_before_it_ends(
    tmp_path: Path,
) -> None:
    by_worker = worker_tests(tmp_path, workers=5)
    (long_worker,) = [worker for worker, tests in by_worker.items() if "long" in tests]
    tests = by_worker[long_worker]
    long_ended = tests["long"][1]
    assert all(start >= long_ended for test, (start, _) in tests.items() if test != "long")
    # It then takes tests again: at least the one it held behind the alone test.
    assert len(tests) > 1
    assert sum(len(tests) for tests in by_worker.values()) == 13


def test_an_alone_test_shares_its_worker_when_too_few_would_be_left(tmp_path: Path) -> None:
    by_worker = worker_tests(tmp_path, workers=3)
    (long_worker,) = [worker for worker, tests in by_worker.items() if "long" in tests]
    assert len(by_worker[long_worker]) > 1


# -- the order tests go to pytest-xdist's workers ----------------------------------


def _rank(name: str) -> int:
    return {"s": 0, "o": 1, "w": 2}[name[0]]


def test_each_slow_test_heads_a_workers_first_batch() -> None:
    items = ["s1", "s2", *(f"o{i}" for i in range(52)), *(f"w{i}" for i in range(6))]
    ordered = spread_slow_first(items, _rank, workers=4)
    batch = 60 // 4 // 4  # xdist's first batch per worker: a quarter of its share
    assert [ordered[i * batch] for i in range(4)] == ["s1", "s2", "o4", "o7"]
    assert ordered[-6:] == [f"w{i}" for i in range(6)]
    assert sorted(ordered) == sorted(items)


def test_slow_tests_beyond_one_per_worker_come_right_after_the_first_batches() -> None:
    items = [f"s{i}" for i in range(5)] + [f"o{i}" for i in range(20)]
    ordered = spread_slow_first(items, _rank, workers=2)
    batch = max(25 // 2 // 4, 2)
    assert ordered[0] == "s0" and ordered[batch] == "s1"
    assert ordered[2 * batch : 2 * batch + 3] == ["s2", "s3", "s4"]
    assert [i for i in ordered if i.startswith("o")] == [f"o{i}" for i in range(20)]


def test_tests_that_ask_for_the_same_driver_go_side_by_side_in_order() -> None:
    # name: <driver><n>; groups in the order of their first test, each in its order.
    items = ["a1", "b1", "a2", "c1", "b2", "a3"]
    assert group_by(items, lambda name: name[0]) == ["a1", "a2", "a3", "b1", "b2", "c1"]


def test_grouped_tests_keep_the_slow_ones_first() -> None:
    items = ["o:x1", "s:y1", "o:y2", "o:x2", "s:x3"]
    grouped = group_by(items, lambda name: name[2])
    ordered = spread_slow_first(grouped, lambda name: 0 if name[0] == "s" else 1, workers=1)
    # One worker, a first batch of 2: a slow test heads it, the other slow one follows
    # it; the others keep their grouped order.
    assert ordered == ["s:x3", "o:x1", "s:y1", "o:x2", "o:y2"]


def test_with_a_max_chunk_the_first_batches_are_that_small() -> None:
    # --maxschedchunk 1: xdist's first batch is 2 tests (its minimum) per worker.
    items = [f"s{i}" for i in range(3)] + [f"o{i}" for i in range(40)]
    ordered = spread_slow_first(items, _rank, workers=3, max_chunk=1)
    assert ordered[:7] == ["s0", "o0", "s1", "o1", "s2", "o2", "o3"]
    assert sorted(ordered) == sorted(items)


# -- the pytest-xdist internals AloneScheduling relies on ------------------------------


def test_pyproject_pins_the_xdist_releases_whose_internals_planned_scheduling_uses() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "dev"
    ]
    (pin,) = [Requirement(r) for r in dev if Requirement(r).name == "pytest-xdist"]
    assert pin.specifier == scheduling.XDIST_VERSIONS
    assert scheduling.xdist_version() in scheduling.XDIST_VERSIONS


class FakeWorker:
    """What xdist's scheduling asks of a worker (``WorkerController``)."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        assert not self.shutting_down, f"{self.gateway.id}: tests sent after shutdown"
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


class FakeLog:
    """xdist's ``Producer``: called with messages, ``.loadsched`` a child."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, *message: object) -> None:
        self.lines.append(" ".join(map(str, message)))

    @property
    def loadsched(self) -> FakeLog:
        return self


def scheduled(
    workers: int, alone: list[str], tests: int = 24, plan: CollectedPlan | None = None
) -> list[FakeWorker]:
    """Every test run through ``planned_scheduling`` over xdist's own ``LoadScheduling``
    (with ``alone`` and the families and ranks of ``plan``), each worker finishing the
    tests it holds in turn, as xdist's controller would."""
    collected = CollectedPlan(alone=alone, tests=plan.tests if plan else {})
    config = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
        getoption=lambda name: None,
    )
    scheduler = scheduling.planned_scheduling(config, FakeLog(), lambda: collected)  # type: ignore[arg-type]
    nodes = [FakeWorker(f"gw{i}") for i in range(workers)]
    collection = [f"test_x.py::test_{i}" for i in range(tests)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    assert scheduler.collection_is_completed
    scheduler.schedule()
    for _ in range(10 * tests):
        if scheduler.tests_finished:
            break
        for node in nodes:
            pending = scheduler.node2pending.get(node, [])
            if pending:
                scheduler.mark_test_complete(node, pending[0])
    assert scheduler.tests_finished
    return nodes


def test_over_xdists_load_scheduling_an_alone_tests_worker_takes_others_after_it() -> None:
    nodes = scheduled(workers=6, alone=["test_x.py::test_5"])
    # Handed the alone test with the order's last behind it, and tests again after them.
    assert nodes[0].sent[:2] == [5, 23] and len(nodes[0].sent) > 2
    assert sorted(i for node in nodes for i in node.sent) == list(range(24))
    assert all(node.shutting_down for node in nodes)


def test_over_xdists_load_scheduling_too_few_workers_left_run_the_alone_test_beside_others() -> (
    None
):
    nodes = scheduled(workers=3, alone=["test_x.py::test_5"])
    assert sorted(i for node in nodes for i in node.sent) == list(range(24))
    assert all(len(node.sent) > 1 for node in nodes)


def test_an_xdist_release_outside_the_tested_range_gets_xdists_own_scheduling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduling, "xdist_version", lambda: Version("99.0"))
    warned: list[Warning] = []
    config = SimpleNamespace(
        addinivalue_line=lambda *_: None,
        pluginmanager=SimpleNamespace(has_plugin=lambda name: name == "xdist"),
        getoption=lambda name, default=None: "load" if name == "dist" else default,
        stash=pytest.Stash(),
        issue_config_time_warning=lambda warning, stacklevel: warned.append(warning),
    )
    scheduling.pytest_configure(config)  # type: ignore[arg-type]
    assert scheduling.pytest_xdist_make_scheduler(config, FakeLog()) is None  # type: ignore[arg-type]
    (warning,) = warned
    assert "pytest-xdist 99.0 is not one csi-harness was tested with" in str(warning)


def marked(name: str, **fields: object) -> SimpleNamespace:
    """A test item with a ``driver`` marker of ``fields`` (none when empty)."""
    marker = SimpleNamespace(kwargs=fields) if fields else None
    return SimpleNamespace(
        name=name, get_closest_marker=lambda mark: marker if mark == "driver" else None
    )


def test_tests_that_can_take_the_same_pooled_driver_go_side_by_side() -> None:
    # A node limit and storageCapacity are changed in place: one family with the
    # default; attach_required is not. Within the family, equal fields side by side.
    items = [
        marked("default-1"),
        marked("attach-1", attach_required=True),
        marked("limit-1", max_volumes_per_node=1),
        marked("default-2"),
        marked("attach-limit", attach_required=True, max_volumes_per_node=1),
        marked("no-capacity", storage_capacity=False),
        marked("limit-2", max_volumes_per_node=1),
    ]
    grouped = group_by(
        group_by(items, driver_group),
        driver_family,
    )
    assert [item.name for item in grouped] == [
        "default-1",
        "default-2",
        "limit-1",
        "limit-2",
        "no-capacity",
        "attach-1",
        "attach-limit",
    ]


def test_over_xdists_load_scheduling_a_familys_tests_go_to_one_worker() -> None:
    # Twelve families of two tests each: each family's second test follows its first on
    # the worker that holds it, and no other worker starts it at the same time.
    tests = {f"test_x.py::test_{i}": (f"family-{i // 2}", 1) for i in range(24)}
    nodes = scheduled(workers=6, alone=[], plan=CollectedPlan(alone=[], tests=tests))
    worker_of = {index: node.gateway.id for node in nodes for index in node.sent}
    assert sorted(worker_of) == list(range(24))
    assert all(worker_of[2 * pair] == worker_of[2 * pair + 1] for pair in range(12))


def test_a_plan_written_by_a_worker_reads_back_whole(tmp_path: Path) -> None:
    plan = CollectedPlan(alone=["t.py::long"], tests={"t.py::a": ("f1", 1), "t.py::b": (None, 0)})
    # A worker killed while writing leaves its partial file, or a broken one.
    (tmp_path / ".gw0.partial").write_text('{"alone": [')
    (tmp_path / "gw0.json").write_text('{"alone": [')
    plan.write(tmp_path, "gw1")
    assert CollectedPlan.read(tmp_path) == plan
    assert CollectedPlan.read(tmp_path / "nothing-written") == CollectedPlan(alone=[], tests={})


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"--csi-cluster": "kind"}, True),
        ({"--csi-cluster": "kind", "--csi-no-driver-pool": True}, False),
        ({"--csi-cluster": "kind", "--csi-driver-pool-idle": 0}, False),
        ({"--csi-cluster": "local"}, False),
    ],
)
def test_tests_are_handed_by_family_only_where_drivers_are_shared_and_pooled(
    options: dict[str, object], expected: bool
) -> None:
    config = SimpleNamespace(
        getoption=lambda name, default=None: options.get(name, default), stash=pytest.Stash()
    )
    assert scheduling.by_family(config) is expected  # type: ignore[arg-type]


def test_smaller_driver_families_go_first_and_the_largest_last() -> None:
    items = [
        marked("default-1"),
        marked("attach-1", attach_required=True),
        marked("default-2"),
        marked("zone", zone_pool_size="10Gi", node_pool_size=None),
        marked("limit-1", max_volumes_per_node=1),
        marked("attach-2", attach_required=True),
    ]
    grouped = group_by(group_by(items, driver_group), driver_family, smallest_first=True)
    assert [item.name for item in grouped] == [
        "zone",
        "attach-1",
        "attach-2",
        "default-1",
        "default-2",
        "limit-1",
    ]
