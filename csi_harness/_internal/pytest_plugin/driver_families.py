"""Which tests can take one pooled driver (a family), and which tests an xdist worker is
handed next so that a family's tests follow one another instead of running at once.

The workers share their idle drivers (``idle_drivers``), so a test takes the driver of
the family's test before it only if that test has ended: two tests of one family that
start together deploy two drivers. ``pick_next`` hands a worker the next test in the
order whose family no other worker holds (one it holds itself runs there after the one
before), and only when there is none, a test of the family that most needs one more
driver. It looks only ``window`` tests ahead, so a family larger than that still spreads
over several workers, and the order's ranks (``slow`` first, ``cluster_wide`` last) hold.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from csi_harness._internal.pytest_plugin.pooled_drivers import pool_key

SLOW_RANK, SHARED_RANK, LAST_RANK = 0, 1, 2
"""Where a test goes in the order: ``slow`` ones first, ``cluster_wide`` ones last."""


def driver_group(item: Any) -> str:
    """What decides which pooled driver a test can take: the fields of its ``driver``
    marker (a ``fresh_driver`` test takes none)."""
    if item.get_closest_marker("fresh_driver") is not None:
        return "fresh"
    marker = item.get_closest_marker("driver")
    return json.dumps(dict(marker.kwargs) if marker else {}, sort_keys=True, default=str)


def driver_family(item: Any) -> str:
    """Which pooled drivers a test can take, changed in place where it asks for other
    ``IN_PLACE`` fields (a node limit, storageCapacity): the ``pool_key`` of its
    ``driver`` marker's fields. Grouped by family after ``driver_group``, a family's
    tests are side by side and, within it, those asking for equal fields."""
    group = driver_group(item)
    if group == "fresh":
        return group
    marker = item.get_closest_marker("driver")
    try:
        return pool_key(dict(marker.kwargs) if marker else {})
    except ValidationError:
        return group  # the test fails on its driver; ordered by its fields alone


def pooled_family(item: Any) -> str | None:
    """A short name of the family of pooled drivers the test takes, or None when it
    takes none (it asks for no ``driver``, or for a fresh one)."""
    if "driver" not in getattr(item, "fixturenames", ()):
        return None
    family = driver_family(item)
    if family == "fresh":
        return None
    return hashlib.sha256(family.encode()).hexdigest()[:16]


def count_pooled_tests(items: Iterable[Any], default: Mapping[str, Any]) -> Counter[str]:
    """How many of ``items`` take a pooled driver of each ``pool_key``: the ``driver``
    fixture's fields (``default``, the cluster's default driver, with the marker's
    over it), for the tests that take a pooled one."""
    counts: Counter[str] = Counter()
    for item in items:
        if pooled_family(item) is None:
            continue
        marker = item.get_closest_marker("driver")
        try:
            counts[pool_key({**default, **(marker.kwargs if marker else {})})] += 1
        except ValidationError:
            continue  # the test fails on its driver before it takes one
    return counts


def pick_next(
    pending: Sequence[int],
    count: int,
    held: Sequence[int],
    elsewhere: Mapping[str, int],
    families: Sequence[str | None],
    ranks: Sequence[int],
    window: int,
) -> list[int]:
    """Up to ``count`` of ``pending`` (test indexes, in order) for a worker that holds
    ``held``, while the other workers hold tests of the families ``elsewhere`` (how
    many workers hold each). Each pick is, among the first ``window`` tests left: the
    first of no family, of a family the worker holds or was just handed, or of one no
    other worker holds; else the first of the family with the most tests left for each
    worker that holds it (one more driver of a large family will serve many tests, one
    of a small family few). The order decides among the families a worker may take: one
    it holds is not preferred, or the workers of the largest family would keep to it
    and leave the small ones, each a driver to deploy, for the end. A ``slow`` test is
    handed even if its family is held elsewhere (it would end the run if it started
    late), but not behind one of its family (it would wait for it on that worker);
    ``cluster_wide`` tests are passed over until only they are left. A worker holds the
    tests it runs and those queued behind them, which take their family's driver next."""
    left = list(pending)
    picked: list[int] = []
    while left and len(picked) < count:
        last_only = all(ranks[index] == LAST_RANK for index in left)
        mine = {families[index] for index in (*held, *picked)} - {None}
        # A slow test of a family the worker holds would wait for it there: it goes
        # to another worker once that family is free.
        ahead = [
            i
            for i in left
            if (last_only or ranks[i] != LAST_RANK)
            and not (ranks[i] == SLOW_RANK and families[i] in mine)
        ][:window]
        # A slow test starts at once even if its family is held elsewhere (one more
        # deployment): started late, it would end the run.
        choice = next(
            (
                i
                for i in ahead
                if ranks[i] == SLOW_RANK or families[i] in mine or families[i] not in elsewhere
            ),
            None,
        )
        if choice is None and ahead:
            tests_left = Counter(families[index] for index in left)
            choice = max(
                ahead,
                key=lambda i: tests_left[families[i]] / (1 + elsewhere.get(families[i] or "", 0)),
            )
        if choice is None:
            choice = left[0]
        left.remove(choice)
        picked.append(choice)
    return picked
