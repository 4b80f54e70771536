"""The cluster provider the options ask for (``open_cluster``), checked before anything
is brought up, and the progress lines it writes on pytest's terminal."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from csi_harness._internal.core.run_state import STATE_FILE
from csi_harness._internal.core.tools import ToolsMissing
from csi_harness._internal.providers.base import Unsupported
from csi_harness._internal.providers.existing import ExistingProvider
from csi_harness._internal.providers.local.cluster import ClusterNotRunning
from csi_harness._internal.providers.local.config import LocalClusterConfig, parse_feature_gates
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.providers.provider import ClusterProvider

if TYPE_CHECKING:
    from csi_harness._internal.providers.kind.provider import KindProvider


def open_cluster(config: pytest.Config) -> ClusterProvider:
    """The provider ``--csi-cluster`` asks for, configured from the options: entered, it
    yields the cluster ready for the suites; left, it tears it down or leaves it
    running, as the options say. Options that do not fit the provider, or a cluster
    to use that is not there, are a ``pytest.UsageError``, raised here, before
    anything is brought up or attached."""
    provider = config.getoption("--csi-cluster", "local")
    if provider != "existing" and config.getoption("--csi-kubeconfig", None):
        raise pytest.UsageError("--csi-kubeconfig names the cluster of --csi-cluster existing")
    if provider != "kind" and (
        config.getoption("--csi-kind-config") or config.getoption("--csi-node-image")
    ):
        raise pytest.UsageError(
            "--csi-kind-config and --csi-node-image are options of --csi-cluster kind"
        )
    progress = progress_writer(config)
    keep = bool(config.getoption("--csi-keep-cluster"))
    if provider == "local":
        return LocalProvider(_local_cluster_config(config), progress=progress, keep=keep)
    if provider == "kind":
        return _kind_provider(config, progress, keep=keep)
    if provider == "existing":
        kubeconfig = config.getoption("--csi-kubeconfig")
        if kubeconfig and not (Path(kubeconfig).resolve().parent / STATE_FILE).exists():
            return _existing_provider(Path(kubeconfig), progress)
        return _attached_local_provider(config, progress)
    raise pytest.UsageError(f"--csi-cluster {provider}: no such provider")


def _kind_provider(
    config: pytest.Config, progress: Callable[[str], None], *, keep: bool
) -> KindProvider:
    """The kind cluster the options describe (not created yet), or a usage error."""
    # Imported here: only kind sessions need the Docker-related modules.
    from csi_harness._internal.providers.kind.cluster import DEFAULT_CONFIG
    from csi_harness._internal.providers.kind.node_image import NodeImageError, require_docker
    from csi_harness._internal.providers.kind.provider import KindProvider

    if config.getoption("--csi-feature-gates"):
        raise pytest.UsageError(
            "--csi-feature-gates: a kind cluster takes its gates from --csi-kind-config "
            "(the kind configuration capacity-scoring.yaml shows how)"
        )
    kind_config = Path(config.getoption("--csi-kind-config") or DEFAULT_CONFIG).resolve()
    if not kind_config.is_file():
        raise pytest.UsageError(f"--csi-kind-config {kind_config}: no such file")
    provider = KindProvider(
        config.getoption("--csi-cluster-name", "csi-harness-e2e"),
        kind_config,
        node_image=config.getoption("--csi-node-image"),
        progress=progress,
        keep=keep,
    )
    try:
        require_docker()
        provider.cluster()  # finds the tools
    except (NodeImageError, ToolsMissing) as exc:
        raise pytest.UsageError(f"--csi-cluster kind: {exc}") from exc
    return provider


def _existing_provider(kubeconfig: Path, progress: Callable[[str], None]) -> ExistingProvider:
    """Any cluster by its kubeconfig, checked to answer, or a usage error."""
    if not kubeconfig.is_file():
        raise pytest.UsageError(
            f"--csi-kubeconfig {kubeconfig}: no such file (and no local cluster here: no "
            f"{STATE_FILE} beside it)"
        )
    provider = ExistingProvider(kubeconfig, progress=progress)
    try:
        provider.check()
    except Unsupported as exc:
        raise pytest.UsageError(f"--csi-cluster existing: {exc}") from exc
    return provider


def _local_cluster_config(config: pytest.Config) -> LocalClusterConfig:
    try:
        gates = parse_feature_gates(config.getoption("--csi-feature-gates", ""))
    except ValueError as exc:
        raise pytest.UsageError(f"--csi-feature-gates: {exc}") from exc
    name = config.getoption("--csi-cluster-name", "csi-harness-e2e")
    return LocalClusterConfig(name=name, feature_gates=gates)


def _attached_local_provider(
    pytestconfig: pytest.Config, progress: Callable[[str], None]
) -> LocalProvider:
    """A running local cluster made by csi-harness, attached to and left as found."""
    if pytestconfig.getoption("--csi-feature-gates"):
        raise pytest.UsageError(
            "--csi-feature-gates: an existing cluster keeps the gates it was brought up with "
            "(csi-harness cluster up --feature-gates ...)"
        )
    config = LocalClusterConfig(name=pytestconfig.getoption("--csi-cluster-name"))
    kubeconfig = pytestconfig.getoption("--csi-kubeconfig")
    run_dir = Path(kubeconfig).resolve().parent if kubeconfig else config.effective_run_dir
    provider = LocalProvider(config, run_dir=run_dir, progress=progress, attach=True)
    try:
        provider.check()
    except (ClusterNotRunning, ToolsMissing) as exc:
        raise pytest.UsageError(
            f"--csi-cluster existing: {exc}\n(only clusters made by csi-harness can be used so "
            "far: the suites redeploy the driver as local processes)"
        ) from exc
    return provider


def progress_writer(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Progress lines on pytest's terminal (looked up when written: the terminal
    reporter does not exist yet while plugins are configured)."""

    def progress(message: str) -> None:
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        # Live on the terminal, not in the test's captured output.
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(f"[csi-harness] {message}")

    return progress
