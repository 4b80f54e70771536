"""Which tests share a family of pooled drivers, and the next tests a worker is handed
(``driver_families.pick_next``)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.pytest_plugin.driver_families import (
    LAST_RANK,
    SHARED_RANK,
    SLOW_RANK,
    count_pooled_tests,
    pick_next,
    pooled_family,
)
from csi_harness._internal.pytest_plugin.pooled_drivers import pool_key


def pick(
    families: str,
    count: int = 1,
    held: tuple[int, ...] = (),
    elsewhere: str = "",
    ranks: str = "",
    window: int = 8,
    pending: list[int] | None = None,
) -> list[int]:
    """``pick_next`` over one letter per test (its family; ``.`` none), ``elsewhere`` a
    letter per other worker holding that family, ranks one digit per test (default all
    shared), pending all tests not ``held``."""
    by_index = [None if letter == "." else letter for letter in families]
    rank_of = [int(digit) for digit in ranks] if ranks else [SHARED_RANK] * len(families)
    left = pending if pending is not None else [i for i in range(len(families)) if i not in held]
    return pick_next(left, count, held, Counter(elsewhere), by_index, rank_of, window)


def test_a_worker_is_handed_the_next_test_of_the_family_it_holds() -> None:
    assert pick("aabbcc", held=(2,), elsewhere="a", pending=[1, 3, 4, 5]) == [3]


def test_a_family_the_worker_holds_does_not_go_before_a_free_one() -> None:
    # Or the workers of the largest family would leave the small ones for the end.
    assert pick("abbb", held=(1,), pending=[0, 2, 3]) == [0]


def test_tests_of_a_family_another_worker_holds_are_passed_over() -> None:
    assert pick("aabbcc", elsewhere="a", pending=[1, 2, 3, 4, 5]) == [2]


def test_a_worker_handed_several_tests_gets_none_of_a_family_held_elsewhere() -> None:
    assert pick("abaab", count=3, elsewhere="b") == [0, 2, 3]


def test_a_slow_test_is_handed_even_if_its_family_is_held_elsewhere() -> None:
    ranks = f"{SLOW_RANK}{SHARED_RANK}{SHARED_RANK}"
    assert pick("aab", elsewhere="a", ranks=ranks) == [0]


def test_last_tests_do_not_fill_the_window() -> None:
    ranks = f"{LAST_RANK}{LAST_RANK}{LAST_RANK}{SHARED_RANK}"
    assert pick("aaab", ranks=ranks, window=2) == [3]


def test_a_test_of_no_pooled_family_is_never_passed_over() -> None:
    assert pick(".aab", elsewhere="a") == [0]


def test_when_every_test_in_sight_is_held_elsewhere_the_first_is_handed() -> None:
    # A family larger than the window spreads over several workers.
    assert pick("aaaaab", elsewhere="a", window=4) == [0]


def test_when_every_family_in_sight_is_held_the_one_with_most_tests_per_holder_is_handed() -> None:
    # One more driver of b serves five tests; one more of a, one.
    assert pick("abbbbb", elsewhere="ab", window=3) == [1]
    # Three tests each, but a is held by two workers and b by one.
    assert pick("aaabbb", elsewhere="aab", window=6) == [3]


def test_a_slow_test_of_the_held_family_is_not_handed_behind_it() -> None:
    ranks = f"{SLOW_RANK}{SLOW_RANK}{SHARED_RANK}"
    assert pick("aab", held=(0,), ranks=ranks, pending=[1, 2]) == [2]


def test_last_tests_wait_until_only_they_are_left() -> None:
    ranks = f"{LAST_RANK}{SHARED_RANK}"
    assert pick("ab", ranks=ranks) == [1]
    assert pick("ab", ranks=f"{LAST_RANK}{LAST_RANK}", elsewhere="a") == [1]


def item(fixtures: tuple[str, ...], **markers: dict[str, object]) -> SimpleNamespace:
    return SimpleNamespace(
        fixturenames=fixtures,
        get_closest_marker=lambda name: (
            SimpleNamespace(kwargs=markers[name]) if name in markers else None
        ),
    )


def test_tests_that_can_take_one_pooled_driver_have_one_family() -> None:
    default = pooled_family(item(("driver",)))
    assert default is not None
    # A node limit is changed in place: the same family; attach_required is not.
    assert pooled_family(item(("driver",), driver={"max_volumes_per_node": 1})) == default
    assert pooled_family(item(("driver",), driver={"attach_required": True})) != default


def test_a_test_without_a_pooled_driver_has_no_family() -> None:
    assert pooled_family(item(("kube",))) is None
    assert pooled_family(item(("driver",), fresh_driver={})) is None


def test_tests_are_counted_by_the_pool_key_the_driver_fixture_gives_them() -> None:
    default = DriverDeployment(node_pool_size="5Gi").model_dump()  # a cluster's own default
    items = [
        item(("driver",)),
        item(("driver",), driver={"max_volumes_per_node": 1}),
        item(("driver",), driver={"attach_required": True}),
        item(("driver",), fresh_driver={}),
        item(("kube",)),
        item(("driver",), driver={"max_volumes_per_node": "many"}),
    ]

    counts = count_pooled_tests(items, default)

    assert counts == {pool_key(default): 2, pool_key({**default, "attach_required": True}): 1}
