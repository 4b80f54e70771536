"""What a run of the suites did with the tests that cover upstream cases, for
scripts/upstream_coverage.py: read from the JUnit XML reports of the run's parts (one
per provider, e.g. CI's local and kind parts) and kept, for the tests with an
``upstream`` marker only, in docs/upstream-coverage-run.json, the record the committed
table is made from.

Per test and provider: passed, failed or skipped (with pytest's reason), and how many
times kube-scheduler placed one of its pods on a simulated node (the JUnit property
``pods_on_simulated_nodes`` the harness's ``namespace`` fixture records), where a pod
never runs.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

SIMULATED_PLACEMENTS = "pods_on_simulated_nodes"
"""The JUnit property (csi_harness/_internal/pytest_plugin/fixtures.py)."""
PROVIDERS_WITHOUT_SIMULATED_NODES = frozenset({"kind"})
"""Providers every node of which runs a real kubelet (the harness simulates nodes only
on the local provider): a pod of a test there ran on one even where a report from
before the property existed does not say so."""

Result = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """How one test ended on one provider."""

    result: Result
    detail: str | None = None
    """pytest's reason for a skip (or an xfail)."""
    pods_on_simulated_nodes: int | None = None
    """None: not recorded."""

    def on_real_kubelets(self, provider: str) -> bool | None:
        """Whether every pod of the test that kube-scheduler placed went to a node with
        a real kubelet; None when the run does not say."""
        if provider in PROVIDERS_WITHOUT_SIMULATED_NODES:
            return True
        if self.pods_on_simulated_nodes is None:
            return None
        return self.pods_on_simulated_nodes == 0


@dataclass
class RunRecord:
    """The outcomes of one run: ``outcomes[provider][test]``, test ids as in
    ``Mark.test`` (relative to tests/e2e); ``run`` says which run it was."""

    run: str
    outcomes: dict[str, dict[str, Outcome]]

    def restricted_to(self, tests: Iterable[str]) -> RunRecord:
        keep = set(tests)
        return RunRecord(
            self.run,
            {
                provider: {test: o for test, o in sorted(found.items()) if test in keep}
                for provider, found in self.outcomes.items()
            },
        )

    def dumps(self) -> str:
        data = {
            "run": self.run,
            "providers": {
                provider: {
                    test: {k: v for k, v in asdict(outcome).items() if v is not None}
                    for test, outcome in found.items()
                }
                for provider, found in self.outcomes.items()
            },
        }
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def loads(cls, text: str) -> RunRecord:
        data = json.loads(text)
        return cls(
            data["run"],
            {
                provider: {test: Outcome(**fields) for test, fields in found.items()}
                for provider, found in data["providers"].items()
            },
        )


def junit_key(test: str, tests_dir: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit XML gives the test ``tests_dir``/``test``
    (as ``_pytest.junitxml.mangle_test_address`` makes them)."""
    path, bracket, parameters = f"{tests_dir}/{test}".partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    names[-1] += bracket + parameters
    return ".".join(names[:-1]), names[-1]


def read_junit(path: Path) -> tuple[dict[tuple[str, str], Outcome], str | None]:
    """Each testcase of a JUnit XML report by (classname, name), and the report's
    timestamp."""
    root = ElementTree.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    found: dict[tuple[str, str], Outcome] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        outcome = _outcome(case)
        # A test reported twice (an error in teardown after a pass): the worse counts.
        if key not in found or outcome.result == "failed":
            found[key] = outcome
    return found, None if suite is None else suite.get("timestamp")


def _outcome(case: ElementTree.Element) -> Outcome:
    properties = {p.get("name"): p.get("value") for p in case.iterfind("properties/property")}
    placed = properties.get(SIMULATED_PLACEMENTS)
    pods = int(placed) if placed is not None and placed.isdigit() else None
    if case.find("failure") is not None or case.find("error") is not None:
        return Outcome("failed", pods_on_simulated_nodes=pods)
    skipped = case.find("skipped")
    if skipped is not None:
        reason = skipped.get("message") or skipped.get("type") or "skipped"
        if skipped.get("type") == "pytest.xfail":
            reason = f"xfail: {reason}"
        return Outcome("skipped", " ".join(reason.split()), pods)
    return Outcome("passed", pods_on_simulated_nodes=pods)


def record_of(
    reports: Mapping[str, Path], tests: Iterable[str], tests_dir: str, run: str | None
) -> RunRecord:
    """The outcomes of ``tests`` in each provider's report (a test a report does not
    list is left out: it did not run there). ``run`` defaults to the reports' times."""
    wanted = list(dict.fromkeys(tests))
    outcomes: dict[str, dict[str, Outcome]] = {}
    stamps = []
    for provider, path in reports.items():
        found, stamp = read_junit(path)
        stamps.append(f"{provider} {stamp or 'at an unknown time'}")
        outcomes[provider] = {
            test: found[junit_key(test, tests_dir)]
            for test in sorted(wanted)
            if junit_key(test, tests_dir) in found
        }
    return RunRecord(run or "the run of " + ", ".join(stamps), outcomes)
