"""The GitHub Actions recipe users copy (examples/github-actions) passes actionlint,
built from its Go module like every other pinned tool; a missing binary fails."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import yaml

from csi_harness._internal.core.tools import tool_binary

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / "examples" / "github-actions").glob("*.yml"))


def actionlint() -> str:
    binary = tool_binary("actionlint")
    if binary is None:
        pytest.fail("actionlint is not built: run `tools/build.sh build actionlint`")
    return str(binary)


def test_there_is_a_workflow_to_check() -> None:
    assert WORKFLOWS, "examples/github-actions has no workflow"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_the_workflow_passes_actionlint(workflow: Path) -> None:
    result = subprocess.run(
        [actionlint(), "-no-color", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_can_fail(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    workflow = yaml.safe_load(WORKFLOWS[0].read_text())
    (job,) = workflow["jobs"].values()
    job["runs-on"] = "ubuntu-24.04"
    job["steps"].append({"name": "typo", "run": "echo ${{ github.no_such_context_field }}"})
    job["steps"].append({"uses": "actions/checkout@v4", "with": {"no-such-input": 1}})
    broken.write_text(yaml.safe_dump(workflow, sort_keys=False))
    result = subprocess.run(
        [actionlint(), "-no-color", str(broken)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no-such-input" in result.stdout


def test_every_action_the_workflow_uses_has_a_local_stand_in() -> None:
    spec = importlib.util.spec_from_file_location(
        "steps", REPO / "scripts" / "github-actions-steps.py"
    )
    assert spec is not None and spec.loader is not None
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    action = step["uses"].split("@")[0]
                    assert action in steps.STAND_INS, f"{workflow.name}: {action}"
