"""Which pytest-xdist worker runs which test (csi_harness/_internal/pytest_plugin/scheduling.py):
the order of the first batches, and ``alone`` tests on workers of their own, seen
in real pytest-xdist sessions of a few trivial tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from csi_harness._internal.pytest_plugin.scheduling import spread_slow_first

TESTS = """
import os, time, pytest

def record(name):
    with open(os.environ["SCHEDULE_LOG"], "a") as log:
        log.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.alone
def test_long():
    time.sleep(1.0)
    record("long")

@pytest.mark.parametrize("i", range(12))
def test_quick(i):
    time.sleep(0.05)
    record(f"quick{i}")
"""


def worker_tests(tmp_path: Path, workers: int) -> dict[str, set[str]]:
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
    workers_tests: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        test, worker = line.split()
        workers_tests[worker].add(test)
    return workers_tests


def test_an_alone_test_gets_a_worker_that_runs_nothing_else(tmp_path: Path) -> None:
    by_worker = worker_tests(tmp_path, workers=5)
    (long_worker,) = [worker for worker, tests in by_worker.items() if "long" in tests]
    assert by_worker[long_worker] == {"long"}
    assert sum(len(tests) for tests in by_worker.values()) == 13


def test_an_alone_test_shares_its_worker_when_too_few_would_be_left(tmp_path: Path) -> None:
    by_worker = worker_tests(tmp_path, workers=4)
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
