#!/usr/bin/env python3
"""Write tests/durations.json from the JUnit reports of a run.

tests/conftest.py starts the tests it names longest first under pytest-xdist
(tests/durations.py says why). Only tests that took at least ``--min-seconds`` are
kept: the quick ones keep their collection order, so their modules stay together.

Usage::

    python scripts/test_durations.py --junit reports/junit.xml [--junit ...] \
        [--min-seconds 2] [--output tests/durations.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "tests" / "durations.json"


def node_id(classname: str, name: str, root: Path = ROOT) -> str | None:
    """The pytest node id of a JUnit test case: the longest dotted prefix of
    ``classname`` that is a ``.py`` file under ``root`` is the module, the rest are
    classes. None when no prefix is a file (a doc test's case, for one)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (root / module).is_file():
            return "::".join([module.as_posix(), *parts[cut:], name])
    return None


def read_durations(
    reports: Sequence[Path], min_seconds: float, root: Path = ROOT
) -> dict[str, float]:
    """Seconds per node id of every case of ``reports`` that took ``min_seconds`` or
    more (a case in several reports keeps its longest time)."""
    durations: dict[str, float] = {}
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            seconds = float(case.get("time") or 0)
            nodeid = node_id(case.get("classname") or "", case.get("name") or "", root)
            if nodeid is not None and seconds >= min_seconds:
                durations[nodeid] = max(seconds, durations.get(nodeid, 0.0))
    return durations


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--junit", type=Path, action="append", required=True, help="a JUnit report (repeatable)"
    )
    parser.add_argument(
        "--min-seconds", type=float, default=2.0, help="leave out quicker tests (default 2)"
    )
    parser.add_argument(
        "--output", type=Path, default=OUTPUT, help=f"default {OUTPUT.relative_to(ROOT)}"
    )
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.junit if not p.is_file()]
    if missing:
        parser.error(f"--junit: no such file: {', '.join(missing)}")
    durations = read_durations(args.junit, args.min_seconds)
    ordered = dict(sorted(durations.items(), key=lambda kv: (-kv[1], kv[0])))
    document = {
        "about": "seconds per test, longest first; written by scripts/test_durations.py",
        "tests": {nodeid: round(seconds, 1) for nodeid, seconds in ordered.items()},
    }
    args.output.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{args.output}: {len(ordered)} tests of {args.min_seconds:g} s or more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
