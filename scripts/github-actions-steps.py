#!/usr/bin/env python3
"""Run the steps of a GitHub Actions recipe (examples/github-actions/) here, in order.

    scripts/github-actions-steps.py [--suites ARGS] [--workflow FILE]

The default workflow is storage-conformance.yml, the recipe with no Go in it; the
offline one (storage-conformance-offline.yml) runs with ``--workflow``.

What users copy into .github/workflows/ is exercised as it is written: every ``run:``
step runs with bash (``-eo pipefail``, as GitHub runs them) in a copy of
examples/user-project (the repository the workflow would check out), with the
workflow's and the step's ``env``. The ``uses:`` steps are GitHub's; each one the
workflow uses has a local stand-in below, and an action without one is an error, so
the recipe cannot grow a step this script silently skips:

* actions/checkout      the copy of examples/user-project;
* actions/setup-python  a fresh virtualenv (its bin dir first on PATH);
* actions/setup-go      the ``go`` on PATH (checked, not installed);
* actions/cache         nothing: the caches are this machine's own;
* actions/upload-artifact  nothing: the reports stay in the copy until it is removed;
* helm/kind-action      the pinned kind and kubectl (``tools/build.sh path``), linked
                        into a bin dir first on PATH, as the action installs them; its
                        inputs are checked (``install_only: true``, known inputs only,
                        ``version`` the pinned kind, ``kubectl_version`` the pinned
                        Kubernetes), since actionlint does not know this action.

The runner itself is stood in for too: a hosted runner has kubectl installed, so the
pinned kubectl is on PATH from the first step; a ``sudo`` stand-in runs the command as
is where there is no sudo (we are root).

``CSI_MOCK_PACKAGE`` is set to the wheel of this tree (with the harness extra), and
``SUITES`` to ``--suites`` (default: the skip-attach tests only, to keep CI short).

The one local difference in what the steps do: this machine reaches no public
registry, so a workflow whose images are pulled (one that does not pass
``--csi-images built``) runs with ``PYTEST_ADDOPTS`` set to
``--csi-registry-mirror csi-mock-registry:5000 --csi-node-image TAG``. The kind nodes
then pull the registry.k8s.io and Docker Hub names through the loopback registry that
``make kind-mirror`` starts and fills with stand-ins under those names (it must run
first; Docker pulls python:3.11-slim through it too), and the cluster's node image is
the offline one ``csi-harness kind image`` prints (built here, cached), since the stock
kindest/node cannot be pulled either. On a hosted runner neither option is given and
everything comes from the public registries.

Exit status: the first failing step's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "examples" / "github-actions" / "storage-conformance.yml"
PROJECT = REPO / "examples" / "user-project"
TOOLS_SCRIPT = REPO / "tools" / "build.sh"
DEFAULT_SUITES = "tests/test_skip_attach.py"
# Where the kind nodes reach the registry `make kind-mirror` starts (its container's
# name on the kind network).
REGISTRY_MIRROR = "csi-mock-registry:5000"
# The inputs of helm/kind-action (action.yml of v1.14.0).
KIND_ACTION_INPUTS = frozenset(
    {
        "version",
        "config",
        "kubeconfig",
        "node_image",
        "cluster_name",
        "wait",
        "verbosity",
        "kubectl_version",
        "registry",
        "registry_image",
        "registry_name",
        "registry_port",
        "registry_enable_delete",
        "install_only",
        "ignore_failed_clean",
        "cloud_provider",
    }
)

SUDO_STAND_IN = """#!/usr/bin/env bash
# sudo for a root shell without sudo: drop sudo's own options, run the command.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
exec "$@"
"""


def pinned_version(unit: str) -> str:
    """The version ``tools/build.sh list`` gives the tool unit ``unit`` (no Go needed)."""
    listed = subprocess.run(
        ["bash", str(TOOLS_SCRIPT), "list"], capture_output=True, text=True, check=True
    ).stdout
    for line in listed.splitlines():
        fields = line.split("\t")
        if fields[0] == unit:
            return fields[2]
    raise SystemExit(f"{TOOLS_SCRIPT} list does not name {unit}")


def pinned_binary(name: str) -> Path:
    """The pinned binary ``name``; exits saying how to build it when it is not built."""
    found = subprocess.run(
        ["bash", str(TOOLS_SCRIPT), "path", name], capture_output=True, text=True, check=False
    )
    path = Path(found.stdout.strip())
    if found.returncode != 0 or not path.is_file():
        raise SystemExit(f"{name} is not built: bash tools/build.sh build {name}")
    return path


def link_pinned(directory: Path, *names: str) -> Path:
    """``directory`` holding a link to each pinned binary of ``names``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).symlink_to(pinned_binary(name))
    return directory


class Run:
    """The state the steps share: the work directory, PATH and environment."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.project = work / "project"
        self.env = env

    def prepend_path(self, directory: Path) -> None:
        self.env["PATH"] = f"{directory}{os.pathsep}{self.env['PATH']}"


def checkout(run: Run, _: Mapping[str, Any]) -> None:
    shutil.copytree(PROJECT, run.project)


def setup_python(run: Run, _: Mapping[str, Any]) -> None:
    venv = run.work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    run.prepend_path(venv / "bin")


def setup_go(run: Run, step: Mapping[str, Any]) -> None:
    if shutil.which("go", path=run.env["PATH"]) is None:
        raise SystemExit(f"{step.get('uses')}: no go on PATH")


def kind_action_problems(inputs: Mapping[str, Any]) -> list[str]:
    """What in the ``with:`` of a helm/kind-action step this stand-in cannot stand in
    for, or that does not match the pins: empty when it is fine."""
    problems = [f"{name}: no such input" for name in sorted(set(inputs) - KIND_ACTION_INPUTS)]
    if str(inputs.get("install_only")).lower() != "true":
        problems.append("install_only: not true (the harness creates the cluster)")
    pins = {"version": pinned_version("kind"), "kubectl_version": pinned_version("kubernetes")}
    for name, pinned in pins.items():
        given = inputs.get(name)
        if given is None:
            problems.append(f"{name}: not given (the action's default is not {pinned})")
        elif str(given) != pinned:
            problems.append(f"{name}: {given}, not the pinned {pinned}")
    return problems


def kind_action(run: Run, step: Mapping[str, Any]) -> None:
    problems = kind_action_problems(step.get("with") or {})
    if problems:
        raise SystemExit(f"{step.get('uses')}: " + "; ".join(problems))
    bin_dir = run.work / "kind-action" / "bin"
    run.prepend_path(link_pinned(bin_dir, "kind", "kubectl"))


def nothing(run: Run, step: Mapping[str, Any]) -> None:
    pass


STAND_INS: dict[str, Callable[[Run, Mapping[str, Any]], None]] = {
    "actions/checkout": checkout,
    "actions/setup-python": setup_python,
    "actions/setup-go": setup_go,
    "actions/cache": nothing,
    "actions/upload-artifact": nothing,
    "helm/kind-action": kind_action,
}


def pulls_images(steps: list[Mapping[str, Any]]) -> bool:
    """Whether the workflow's suites pull their images: none of its steps asks for
    ``--csi-images built``."""
    return not any("--csi-images built" in str(step.get("run", "")) for step in steps)


def mirror_options() -> str:
    """The pytest options that point a pulling session at the loopback mirror and the
    offline node image (the one local difference; see the docstring)."""
    harness = shutil.which("csi-harness")
    if harness is None:
        raise SystemExit("no csi-harness on PATH: make install")
    print("== the offline kind node image (csi-harness kind image; cached)", flush=True)
    built = subprocess.run([harness, "kind", "image"], stdout=subprocess.PIPE, text=True)
    if built.returncode != 0 or not built.stdout.strip():
        raise SystemExit(
            f"csi-harness kind image failed (status {built.returncode}): a workflow that "
            "pulls its images runs here on the offline node image (make kind-image)"
        )
    node_image = built.stdout.strip()
    return f"--csi-registry-mirror {REGISTRY_MIRROR} --csi-node-image {node_image}"


def build_wheel(work: Path) -> Path:
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        check=True,
    )
    (wheel,) = dist.glob("csi_mock-*.whl")
    return wheel


def step_name(step: Mapping[str, Any], index: int) -> str:
    return str(step.get("name") or step.get("uses") or f"step {index}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workflow", type=Path, default=WORKFLOW, help="default: %(default)s (the no-Go recipe)"
    )
    parser.add_argument("--suites", default=DEFAULT_SUITES, help="the SUITES the tests step runs")
    args = parser.parse_args()
    workflow = yaml.safe_load(args.workflow.read_text())
    jobs = workflow["jobs"]
    if len(jobs) != 1:
        raise SystemExit(f"{args.workflow}: expected one job, found {', '.join(jobs)}")
    (job,) = jobs.values()
    for index, step in enumerate(job["steps"], 1):
        if "uses" in step and str(step["uses"]).split("@")[0] not in STAND_INS:
            name = step_name(step, index)
            raise SystemExit(f"step {name!r}: no local stand-in for {step['uses']}")

    with tempfile.TemporaryDirectory(prefix="csi-mock-gha-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update({str(k): str(v) for k, v in (workflow.get("env") or {}).items()})
        env["CSI_MOCK_PACKAGE"] = f"{build_wheel(work)}[harness]"
        env["SUITES"] = args.suites
        run = Run(work, env)
        # What a hosted runner has installed: kubectl (and sudo).
        runner_bin = link_pinned(work / "runner" / "bin", "kubectl")
        if shutil.which("sudo") is None:
            (runner_bin / "sudo").write_text(SUDO_STAND_IN)
            (runner_bin / "sudo").chmod(0o755)
        run.prepend_path(runner_bin)
        if pulls_images(job["steps"]):
            addopts = [env.get("PYTEST_ADDOPTS", ""), mirror_options()]
            env["PYTEST_ADDOPTS"] = " ".join(a for a in addopts if a)
        for index, step in enumerate(job["steps"], 1):
            name = step_name(step, index)
            if "uses" in step:
                action = str(step["uses"]).split("@")[0]
                stand_in = STAND_INS[action]
                print(f"== [{index}] {name}: {action} (local stand-in)", flush=True)
                stand_in(run, step)
                continue
            print(f"== [{index}] {name}", flush=True)
            step_env = {**run.env, **{str(k): str(v) for k, v in (step.get("env") or {}).items()}}
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=run.project,
                env=step_env,
                check=False,
            )
            if result.returncode != 0:
                print(f"== step {name!r} failed with status {result.returncode}", flush=True)
                return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
