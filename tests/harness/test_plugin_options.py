"""Wrong options of the pytest plugin are usage errors (exit 4) naming the cause,
found before any cluster is made or any test runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from csi_harness._internal.kube.nodes import ClusterNode
from csi_harness._internal.pytest_plugin.fixtures import access_mode

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
    run = run_pytest("--csi-cluster=kind", f"--csi-kind-config={tmp_path / 'nope.yaml'}")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "nope.yaml: no such file" in run.stderr


def test_kind_options_without_kind_are_a_usage_error() -> None:
    run = run_pytest("--csi-cluster=local", "--csi-node-image=my/node:dev")
    assert run.returncode == 4
    assert "--csi-node-image: is an option of the kind provider" in run.stderr


def test_an_existing_cluster_that_does_not_answer_is_a_usage_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    run = run_pytest(
        "--csi-cluster=existing", f"--csi-kubeconfig={kubeconfig}", "--csi-images=built"
    )
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "does not answer" in run.stderr


def test_a_misspelt_image_source_is_a_usage_error_naming_the_option() -> None:
    run = run_pytest("--csi-cluster=kind", "--csi-images=upstrem")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--csi-images: 'upstrem' is not an image source" in run.stderr


def test_pulled_images_on_the_local_provider_are_a_usage_error() -> None:
    run = run_pytest("--csi-cluster=local", "--csi-images=upstream")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "only 'built' applies to it" in run.stderr


def test_an_existing_cluster_pulling_images_needs_the_driver_image(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    run = run_pytest("--csi-cluster=existing", f"--csi-kubeconfig={kubeconfig}")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--csi-driver-image: " in run.stderr
    assert "csi-harness images push --registry" in run.stderr


def test_a_negative_pool_size_is_a_usage_error_naming_the_option() -> None:
    run = run_pytest("--csi-driver-pool-idle=-1")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--csi-driver-pool-idle: expected a whole number of 0 or more, got '-1'" in run.stderr


# The options other Kubernetes pytest plugins define (pytest-kind: --cluster-name and
# --keep-cluster; the generic names conftests of other projects use). A second
# plugin adding one of csi-harness's options would stop pytest at start-up.
OTHER_PLUGINS_OPTIONS = """
def pytest_addoption(parser):
    for name in ("--cluster", "--cluster-name", "--keep-cluster", "--kubeconfig",
                 "--kind-config", "--node-image", "--feature-gates"):
        parser.addoption(name, default=None)
"""


def test_the_options_do_not_clash_with_other_kubernetes_plugins(tmp_path: Path) -> None:
    (tmp_path / "other_plugin.py").write_text(OTHER_PLUGINS_OPTIONS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "other_plugin", "-p", "no:cacheprovider", "--help"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for option in ("--csi-cluster=", "--csi-cluster-name=", "--csi-keep-cluster"):
        assert option in run.stdout, option


# -- how a test shares the cluster with others ---------------------------------------

REAL = ClusterNode(name="node-1", zone=None, runs_pods=True)
SIMULATED = ClusterNode(name="sim-1", zone=None, runs_pods=False)


def test_a_cluster_wide_test_holds_the_cluster_alone_and_others_share_it() -> None:
    for real_nodes_only in (False, True):
        mode = access_mode(cluster_wide=True, real_nodes_only=real_nodes_only, nodes=[REAL])
        assert mode == "exclusive"
    assert access_mode(cluster_wide=False, real_nodes_only=False, nodes=[REAL, SIMULATED]) == (
        "shared"
    )


def test_a_real_nodes_only_test_runs_beside_cluster_wide_ones_only_beside_simulated_nodes() -> None:
    # The cluster-wide tests compare the simulated nodes when there are any...
    mode = access_mode(cluster_wide=False, real_nodes_only=True, nodes=[REAL, SIMULATED])
    assert mode == "beside"
    # ...and every node when there are none: then it waits for them as others do.
    assert access_mode(cluster_wide=False, real_nodes_only=True, nodes=[REAL]) == "shared"


def test_a_time_scale_below_one_is_a_usage_error_naming_the_option() -> None:
    run = run_pytest("--csi-time-scale=0.5")
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "--csi-time-scale: expected a number of 1 or more, got '0.5'" in run.stderr


def test_a_time_scale_variable_that_is_no_number_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CSI_HARNESS_TIME_SCALE", "slow")
    run = run_pytest()
    assert run.returncode == 4, run.stdout[-2000:] + run.stderr[-2000:]
    assert "CSI_HARNESS_TIME_SCALE: expected a number of 1 or more, got 'slow'" in run.stderr
