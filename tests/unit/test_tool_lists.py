"""The lists of tools to build (make test's, the GitHub Actions recipe's) cover every
binary a local or kind cluster needs (csi_harness._internal.core.tools.REQUIRED): a list that
misses one passes on a machine whose cache has it and fails from nothing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from csi_harness._internal.core.tools import REQUIRED

REPO = Path(__file__).resolve().parents[2]


def binaries_of(units: list[str]) -> set[str]:
    """The binaries ``tools/build.sh build UNITS`` makes (units or binary names)."""
    listed = subprocess.run(
        ["bash", str(REPO / "tools" / "build.sh"), "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    made: set[str] = set()
    for line in listed.splitlines():
        unit, _module, _version, binaries = line.split("\t")[:4]
        names = set(binaries.split())
        if unit in units or names & set(units):
            made |= names
    return made


def make_variable(name: str) -> list[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    (value,) = re.findall(rf"^{name} \?=(.*)$", text, flags=re.MULTILINE)
    return str(value).split()


def test_make_test_builds_every_binary_the_local_cluster_needs() -> None:
    assert set(REQUIRED) <= binaries_of(make_variable("TEST_TOOLS")), sorted(
        set(REQUIRED) - binaries_of(make_variable("TEST_TOOLS"))
    )


def test_the_offline_github_actions_recipe_builds_every_binary_kind_needs() -> None:
    workflow = REPO / "examples" / "github-actions" / "storage-conformance-offline.yml"
    steps = [
        s for job in yaml.safe_load(workflow.read_text())["jobs"].values() for s in job["steps"]
    ]
    commands = " ".join(s.get("run", "") for s in steps).replace("\\\n", " ")
    (units,) = re.findall(r"csi-harness tools build ([^\n]*)", commands)
    built = binaries_of(units.split())
    assert set(REQUIRED) | {"kind", "crictl"} <= built, sorted(set(REQUIRED) - built)
