"""The GitHub Actions recipes users copy (examples/github-actions) pass actionlint, built
from its Go module like every other pinned tool (a missing binary fails); the default
one has no Go in it and pulls its images; scripts/github-actions-steps.py has a stand-in
for every action they use."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from csi_harness._internal.core.tools import tool_binary
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "examples" / "github-actions"
DEFAULT = RECIPES / "storage-conformance.yml"
OFFLINE = RECIPES / "storage-conformance-offline.yml"
WORKFLOWS = sorted(RECIPES.glob("*.yml"))

# What makes a step need Go: installing it, building the pinned tools, or building the
# offline node image (from the Go-built Kubernetes).
GO_COMMANDS = re.compile(r"tools build|build\.sh build|\bgo (build|install|run)\b|kind image")


def steps_script() -> ModuleType:
    return load_script("github-actions-steps.py")


def steps_of(workflow: Path) -> list[dict[str, Any]]:
    jobs = yaml.safe_load(workflow.read_text())["jobs"].values()
    return [step for job in jobs for step in job["steps"]]


def go_steps(workflow: Path) -> list[str]:
    """The steps of ``workflow`` that install or run Go, by name or action."""
    found = []
    for step in steps_of(workflow):
        uses = str(step.get("uses", "")).split("@")[0]
        if uses == "actions/setup-go" or GO_COMMANDS.search(str(step.get("run", ""))):
            found.append(str(step.get("name") or uses))
    return found


def actionlint() -> str:
    binary = tool_binary("actionlint")
    if binary is None:
        pytest.fail("actionlint is not built: run `tools/build.sh build actionlint`")
    return str(binary)


def test_both_recipes_are_checked() -> None:
    assert DEFAULT in WORKFLOWS and OFFLINE in WORKFLOWS, WORKFLOWS


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
    stand_ins = steps_script().STAND_INS
    for workflow in WORKFLOWS:
        for step in steps_of(workflow):
            if "uses" in step:
                action = step["uses"].split("@")[0]
                assert action in stand_ins, f"{workflow.name}: {action}"


def test_the_default_recipe_has_no_go_step() -> None:
    assert go_steps(DEFAULT) == []


def test_the_go_step_check_finds_the_offline_recipes_go_steps() -> None:
    assert go_steps(OFFLINE) == [
        "actions/setup-go",
        "Build Kubernetes, the CSI sidecars and kind (first run about 25 minutes)",
        "Build the kind node image (offline, cached by Docker)",
    ]


def test_the_default_recipe_pulls_its_images_and_the_offline_one_builds_them() -> None:
    script = steps_script()
    assert script.pulls_images(steps_of(DEFAULT))
    assert not script.pulls_images(steps_of(OFFLINE))


def kind_action_inputs(workflow: Path) -> dict[str, Any]:
    (step,) = [s for s in steps_of(workflow) if s.get("uses", "").startswith("helm/kind-action@")]
    return dict(step.get("with") or {})


def test_the_kind_action_installs_the_pinned_kind_and_kubectl_only() -> None:
    assert steps_script().kind_action_problems(kind_action_inputs(DEFAULT)) == []


def test_the_kind_action_check_refuses_what_its_stand_in_cannot_do() -> None:
    inputs = kind_action_inputs(DEFAULT)
    inputs.update(version="v0.31.0", install_only=False, no_such_input=1)
    del inputs["kubectl_version"]
    script = steps_script()
    kind, kubernetes = script.pinned_version("kind"), script.pinned_version("kubernetes")
    assert script.kind_action_problems(inputs) == [
        "no_such_input: no such input",
        "install_only: not true (the harness creates the cluster)",
        f"version: v0.31.0, not the pinned {kind}",
        f"kubectl_version: not given (the action's default is not {kubernetes})",
    ]
