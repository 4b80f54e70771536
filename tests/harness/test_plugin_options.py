"""Wrong options of the pytest plugin are usage errors (exit 4) naming the cause,
found before any cluster is made or any test runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def run_pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *args,
            "tests/e2e/test_volume_limits.py",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_missing_kind_config_is_a_usage_error(tmp_path: Path) -> None:
    run = run_pytest("--cluster=kind", f"--kind-config={tmp_path / 'nope.yaml'}")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "nope.yaml: no such file" in run.stderr


def test_kind_options_without_kind_are_a_usage_error() -> None:
    run = run_pytest("--cluster=local", "--node-image=my/node:dev")
    assert run.returncode == 4
    assert "options of --cluster kind" in run.stderr


def test_an_existing_cluster_that_does_not_answer_is_a_usage_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    run = run_pytest("--cluster=existing", f"--kubeconfig={kubeconfig}")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "does not answer" in run.stderr
