"""The cluster provider the options ask for (``open_cluster``), checked before anything
is brought up, and the progress lines it writes on pytest's terminal."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from csi_harness._internal.deploy.image_set import ImageSet
from csi_harness._internal.kube.objects import PodImage, use_pod_image
from csi_harness._internal.providers.factory import (
    ClusterOptionError,
    ClusterOptions,
    open_provider,
    session_images,
)
from csi_harness._internal.providers.provider import ClusterProvider

FLAGS = {"provider": "--csi-cluster", "name": "--csi-cluster-name"}
"""ClusterOptions fields whose pytest option is not ``--csi-<field>``."""
SESSION_NAME = pytest.StashKey[str]()
"""The name of the cluster this session brings up, when the user gave none
(``session.pytest_configure`` leases it)."""


def cluster_options(config: pytest.Config) -> ClusterOptions:
    """The session's ``ClusterOptions``, from its ``--csi-...`` options (and the
    cluster name it leased, when none is given)."""

    def path(option: str) -> Path | None:
        value = config.getoption(option, None)
        return Path(value) if value else None

    return ClusterOptions(
        provider=config.getoption("--csi-cluster", "local"),
        name=config.getoption("--csi-cluster-name", None) or config.stash.get(SESSION_NAME, None),
        kubeconfig=path("--csi-kubeconfig"),
        kind_config=path("--csi-kind-config"),
        node_image=config.getoption("--csi-node-image", None),
        feature_gates=config.getoption("--csi-feature-gates", "") or "",
        keep=bool(config.getoption("--csi-keep-cluster", False)),
        images=config.getoption("--csi-images", None),
        driver_image=config.getoption("--csi-driver-image", None),
        registry_mirror=config.getoption("--csi-registry-mirror", None),
    )


def usage_error(exc: ClusterOptionError) -> pytest.UsageError:
    """``exc`` as pytest reports a bad option: by the option's own flag."""
    flag = FLAGS.get(exc.option, "--csi-" + exc.option.replace("_", "-"))
    return pytest.UsageError(f"{flag}: {exc.message}")


def open_cluster(config: pytest.Config) -> ClusterProvider:
    """The provider the options ask for (``providers.factory.open_provider``): entered,
    it yields the cluster ready for the suites; left, it tears it down or leaves it
    running, as the options say. Options that do not fit, or a cluster to use that is
    not there, are a ``pytest.UsageError``, raised before anything is brought up."""
    try:
        return open_provider(cluster_options(config), progress=progress_writer(config))
    except ClusterOptionError as exc:
        raise usage_error(exc) from exc


def use_session_images(config: pytest.Config) -> ImageSet:
    """The session's image set; its pod image becomes every test pod's."""
    try:
        images = session_images(cluster_options(config))
    except ClusterOptionError as exc:
        raise usage_error(exc) from exc
    use_pod_image(PodImage(images.busybox, images.pull_policy))
    return images


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
