"""How many tests of each family have yet to take a driver, as the session's workers
count them together (``family_progress``), and what the pool does with a driver whose
family has none left."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.pytest_plugin import family_progress
from csi_harness._internal.pytest_plugin.family_progress import FamilyProgress
from csi_harness._internal.pytest_plugin.pooled_drivers import DriverPool, pool_key
from tests.harness.test_driver_pool import fake_pool


def test_workers_count_the_tests_of_a_family_that_took_a_driver_together(
    tmp_path: Path,
) -> None:
    one = FamilyProgress({"a": 2, "b": 1}, tmp_path)
    other = FamilyProgress({"a": 2, "b": 1}, tmp_path)

    one.start("a")
    assert (one.left("a"), other.left("a"), other.left("b")) == (1, 1, 1)
    other.start("a")
    assert (one.left("a"), other.left("b")) == (0, 1)


def test_a_family_no_collected_test_has_is_never_done(tmp_path: Path) -> None:
    progress = FamilyProgress({}, tmp_path)
    progress.start("a")

    assert progress.left("a") == 1


FIELDS = DriverDeployment().model_dump()


def counted_pool(monkeypatch: pytest.MonkeyPatch, directory: Path, tests: int) -> DriverPool:
    """A pool of fake drivers whose family of default drivers has ``tests`` tests."""
    made, _ = fake_pool(monkeypatch)
    made._progress = FamilyProgress({pool_key(FIELDS): tests}, directory)
    return made


def test_a_driver_whose_family_has_no_test_left_is_removed_not_kept_idle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = counted_pool(monkeypatch, tmp_path, 2)

    first, _ = made.acquire(FIELDS)
    made.release(first, test_failed=False)
    second, reused = made.acquire(FIELDS)
    made.release(second, test_failed=False)

    assert reused and second is first and first.removed
    assert made.stats.not_reused == {"no test of its family left to take it": 1}


@pytest.mark.parametrize("failed", [False, True])
def test_without_a_count_every_driver_may_be_kept(
    monkeypatch: pytest.MonkeyPatch, failed: bool
) -> None:
    made, _ = fake_pool(monkeypatch)
    driver, _ = made.acquire(DriverDeployment().model_dump())
    made.release(driver, test_failed=failed)

    assert driver.removed is failed


def test_counts_a_killed_worker_left_unreadable_are_read_as_none(tmp_path: Path) -> None:
    """Then every family has tests left, and drivers are kept idle as without counts."""
    progress = FamilyProgress({"a": 1}, tmp_path)
    (tmp_path / family_progress.STARTED).write_text('{"a": ')

    assert progress.left("a") == 1
    progress.start("a")
    assert progress.left("a") == 0


def test_the_idle_drivers_of_a_family_with_no_test_left_go_with_the_last(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = counted_pool(monkeypatch, tmp_path, 3)
    one, _ = made.acquire(FIELDS)
    two, _ = made.acquire(FIELDS)
    made.release(one, test_failed=False)  # both idle: a test is left
    made.release(two, test_failed=False)
    last, reused = made.acquire(FIELDS)
    assert reused and last is two and not one.removed

    made.release(last, test_failed=False)

    assert one.removed and two.removed
    assert made.stats.not_reused == {"no test of its family left to take it": 2}
