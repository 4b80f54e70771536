"""A summary of an External Storage run from ginkgo's JUnit report: per test pattern
and suite, how many specs passed, failed and were skipped, and why they were skipped.

Spec names look like ``External Storage [Driver: csi-mock.example] [Testpattern:
Dynamic PV (block volmode)] volumes should store data``; the pattern and the suite
(the first word after the pattern) make a row.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_PATTERN = re.compile(r"\[Testpattern: (?P<pattern>[^\]]+)\]\s*(?P<suite>\S+)")
_EXTERNAL = "External Storage"
_NOISE = re.compile(r"\s+")
UNEXPLAINED = "**not explained**"


@dataclass(frozen=True)
class SpecResult:
    name: str
    state: str
    """passed, failed or skipped."""
    message: str = ""
    seconds: float = 0.0

    @property
    def row(self) -> tuple[str, str]:
        found = _PATTERN.search(self.name)
        if found is None:
            return ("(no test pattern)", _suite_without_pattern(self.name))
        return (found["pattern"], found["suite"])


@dataclass
class RunSummary:
    results: list[SpecResult] = field(default_factory=list)
    explanations: dict[str, str] = field(default_factory=dict)
    """Skip reason (as reported) -> why it is right here, stated by the caller."""

    @property
    def failed(self) -> list[SpecResult]:
        return [r for r in self.results if r.state == "failed"]

    def counts(self) -> Counter[str]:
        return Counter(r.state for r in self.results)

    def rows(self) -> dict[tuple[str, str], Counter[str]]:
        table: dict[tuple[str, str], Counter[str]] = {}
        for result in self.results:
            table.setdefault(result.row, Counter())[result.state] += 1
        return dict(sorted(table.items()))

    def unexplained(self) -> list[str]:
        """Skip reasons nobody has said are right for csi-mock."""
        return sorted(set(self.skip_reasons()) - set(self.explanations))

    def skip_reasons(self) -> Counter[str]:
        return Counter(_reason(r.message) for r in self.results if r.state == "skipped")

    def markdown(self, title: str) -> str:
        counts = self.counts()
        lines = [
            f"# {title}",
            "",
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
            f" ({len(self.results)} External Storage specs)",
            "",
            "| test pattern | suite | passed | failed | skipped |",
            "|---|---|---:|---:|---:|",
        ]
        for (pattern, suite), row in self.rows().items():
            lines.append(
                f"| {pattern} | {suite} | {row['passed']} | {row['failed']} | {row['skipped']} |"
            )
        if self.failed:
            lines += ["", "## Failed", ""]
            lines += [f"- {r.name}: {_reason(r.message)}" for r in self.failed]
        reasons = self.skip_reasons()
        if reasons:
            lines += ["", "## Why specs were skipped", ""]
            lines += ["| specs | reason | why |", "|---:|---|---|"]
            for reason, count in reasons.most_common():
                why = self.explanations.get(reason, UNEXPLAINED)
                lines.append(f"| {count} | {reason.replace('|', '/')} | {why} |")
        return "\n".join(lines) + "\n"


NOT_SELECTED = "not selected"
"""ginkgo's message for a spec it did not run: filtered out, or never reached."""


def read_junit(path: Path, skips: Sequence[str] = ()) -> RunSummary:
    """The External Storage specs of a ginkgo JUnit report (other specs, and the suite's
    setup nodes, are left out). ``skips``: the regular expressions the run's ``--skip``
    joined, so specs they excluded are told apart from those the suites skipped."""
    excluded = [re.compile(pattern) for pattern in skips]
    root = ET.parse(path).getroot()
    results = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        if _EXTERNAL not in name:
            continue
        seconds = float(case.get("time") or 0)
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            message = failure.get("message") or (failure.text or "")
            results.append(SpecResult(name, "failed", message, seconds))
        elif skipped is not None:
            message = skipped.get("message") or ""
            if message.strip() == "skipped":  # Not run at all.
                matched = [p.pattern for p in excluded if p.search(name)]
                if matched:
                    message = f"excluded by --skip {matched[0]}"
                else:
                    message = f"{NOT_SELECTED} (filtered out, or the run ended first)"
            results.append(SpecResult(name, "skipped", message, seconds))
        else:
            results.append(SpecResult(name, "passed", "", seconds))
    return RunSummary(results)


def _reason(message: str) -> str:
    """A skip or failure message as one short line that groups alike specs."""
    text = message.strip()
    text = re.sub(r"^skipped\s*-?\s*", "", text, flags=re.IGNORECASE)
    first = text.splitlines()[0] if text else "(no message)"
    return _NOISE.sub(" ", first)[:200]


def _suite_without_pattern(name: str) -> str:
    tail = name.split("]")[-1].strip()
    return tail.split(" ")[0] if tail else name
