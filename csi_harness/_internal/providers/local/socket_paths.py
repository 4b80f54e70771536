"""The unix sockets of a local cluster's run directory fit the 107 bytes a socket path
may have; checked before anything starts."""

from __future__ import annotations

from pathlib import Path

from csi_harness._internal.providers.local.components import Layout
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.control_plane import ClusterUpFailed

MAX_SOCKET_PATH = 107


def check_socket_paths(config: LocalClusterConfig, layout: Layout) -> None:
    """Unix socket paths are limited to 107 bytes; fail before starting anything
    when the run directory is too deep for the sockets inside it."""
    # The longest names a driver gets: the cluster's own, or a test's
    # (csi_harness._internal.pytest_plugin: "<7 characters>.csi-mock", suffix "-<7>").
    drivers = [(config.driver.name, ""), ("x" * 7 + ".csi-mock", "-" + "x" * 7)]
    longest = max(
        (
            path
            for node in config.nodes()
            for driver, suffix in drivers
            for path in (
                layout.plugins_registry(node.name) / f"{driver}-reg.sock",
                layout.kubelet_root(node.name) / "plugins" / f"csi-mock{suffix}" / "csi.sock",
                layout.driver_root(suffix) / node.name / "admin.sock",
                Path(f"{layout.containerd_socket(node.name)}.ttrpc"),
            )
        ),
        key=lambda p: len(str(p)),
    )
    if len(str(longest).encode()) > MAX_SOCKET_PATH:
        raise ClusterUpFailed(
            f"run_dir {layout.root} is too long: the socket path {longest} has "
            f"{len(str(longest))} bytes, more than the {MAX_SOCKET_PATH} unix sockets "
            "allow; choose a shorter cluster name or run_dir"
        )
