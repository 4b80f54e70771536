#!/usr/bin/env python3
"""Run the steps of examples/github-actions/storage-conformance.yml here, in order.

    scripts/github-actions-steps.py [--suites ARGS] [--workflow FILE]

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
* actions/upload-artifact  nothing: the reports stay in the copy until it is removed.

``CSI_MOCK_PACKAGE`` is set to the wheel of this tree (with the harness extra), and
``SUITES`` to ``--suites`` (default: the skip-attach tests only, to keep CI short).
A ``sudo`` stand-in runs the command as is where there is no sudo (we are root).
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
DEFAULT_SUITES = "tests/test_skip_attach.py"

SUDO_STAND_IN = """#!/usr/bin/env bash
# sudo for a root shell without sudo: drop sudo's own options, run the command.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
exec "$@"
"""


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


def nothing(run: Run, step: Mapping[str, Any]) -> None:
    pass


STAND_INS: dict[str, Callable[[Run, Mapping[str, Any]], None]] = {
    "actions/checkout": checkout,
    "actions/setup-python": setup_python,
    "actions/setup-go": setup_go,
    "actions/cache": nothing,
    "actions/upload-artifact": nothing,
}


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
    parser.add_argument("--workflow", type=Path, default=WORKFLOW)
    parser.add_argument("--suites", default=DEFAULT_SUITES, help="the SUITES the tests step runs")
    args = parser.parse_args()
    workflow = yaml.safe_load(args.workflow.read_text())
    jobs = workflow["jobs"]
    if len(jobs) != 1:
        raise SystemExit(f"{args.workflow}: expected one job, found {', '.join(jobs)}")
    (job,) = jobs.values()

    with tempfile.TemporaryDirectory(prefix="csi-mock-gha-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update({str(k): str(v) for k, v in (workflow.get("env") or {}).items()})
        env["CSI_MOCK_PACKAGE"] = f"{build_wheel(work)}[harness]"
        env["SUITES"] = args.suites
        if shutil.which("sudo") is None:
            shims = work / "shims"
            shims.mkdir()
            (shims / "sudo").write_text(SUDO_STAND_IN)
            (shims / "sudo").chmod(0o755)
            env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
        run = Run(work, env)
        for index, step in enumerate(job["steps"], 1):
            name = step_name(step, index)
            if "uses" in step:
                action = str(step["uses"]).split("@")[0]
                stand_in = STAND_INS.get(action)
                if stand_in is None:
                    raise SystemExit(f"step {name!r}: no local stand-in for {step['uses']}")
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
