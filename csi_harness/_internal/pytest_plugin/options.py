"""The plugin's command-line options, all prefixed ``--csi-`` (pytest-kind, for one,
has ``--cluster-name`` and ``--keep-cluster``, and two plugins defining an option stop
pytest)."""

from __future__ import annotations

import argparse

import pytest

from csi_harness._internal.core.waiting import TIME_SCALE_VARIABLE, parse_time_scale
from csi_harness._internal.pytest_plugin.pooled_drivers import MAX_IDLE


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("csi-harness", "csi-mock conformance harness")
    group.addoption(
        "--csi-cluster",
        choices=["local", "kind", "existing"],
        default="local",
        help="local or kind: bring a cluster up for the session; existing: use a running one",
    )
    group.addoption(
        "--csi-kubeconfig",
        default=None,
        help="with --csi-cluster existing: the kubeconfig of a running cluster",
    )
    group.addoption("--csi-kind-config", default=None, help="kind configuration file")
    group.addoption("--csi-node-image", default=None, help="kind node image of your own")
    group.addoption("--csi-keep-cluster", action="store_true", help="do not tear the cluster down")
    group.addoption(
        "--csi-cluster-name",
        default=None,
        help="name of the local or kind cluster (default: csi-harness-e2e, or csi-harness-e2e-N "
        "while other sessions on this host hold the names before it); with --csi-cluster "
        "existing, the local cluster to use (default csi-harness-e2e)",
    )
    group.addoption(
        "--csi-feature-gates", default="", help="NAME=true|false,... for every component"
    )
    group.addoption(
        "--csi-images",
        default=None,
        metavar="built|upstream|REGISTRY",
        help="where the sidecar and test pod images come from: built here from the pinned "
        "tools (the local provider's only choice), upstream (registry.k8s.io and Docker Hub "
        "names at the pinned versions; the default on kind and existing clusters), or every "
        "upstream image under a registry prefix (a mirror)",
    )
    group.addoption(
        "--csi-driver-image",
        default=None,
        metavar="NAME",
        help="csi-mock's image as published by you (default on kind: built from the "
        "installed package and loaded; an existing cluster pulling images needs it)",
    )
    group.addoption(
        "--csi-registry-mirror",
        default=None,
        metavar="HOST:PORT",
        help="kind: a registry the nodes pull registry.k8s.io and Docker Hub names through "
        "(csi-harness registry serve starts one holding images built here)",
    )
    group.addoption(
        "--csi-no-driver-pool",
        action="store_true",
        help="deploy a new driver for every test instead of reusing reset ones",
    )
    group.addoption(
        "--csi-driver-pool-idle",
        type=_idle_count,
        default=MAX_IDLE,
        metavar="N",
        help=f"reset drivers each pytest process keeps for later tests (default {MAX_IDLE}; "
        "on kind and existing clusters the xdist workers share them, N for each); "
        "more reuses more on a cluster with room for the idle drivers' pods",
    )
    group.addoption(
        "--csi-time-scale",
        type=_time_scale,
        default=None,
        metavar="F",
        help=f"let every wait of the harness take F times as long as written (a number of "
        f"1 or more; sets {TIME_SCALE_VARIABLE}), on machines slower than the deadlines "
        "assume",
    )


def _time_scale(text: str) -> float:
    try:
        return parse_time_scale(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _idle_count(text: str) -> int:
    """A count of idle drivers: a whole number, 0 or more (0 resets and removes each)."""
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {text!r}")
    return count
