"""Fixtures of this project on top of the csi-harness plugin's (cluster, kube,
driver, namespace, admin)."""

from __future__ import annotations

import pytest

from csi_harness import Driver, Unsupported, pick_nodes, scheduling_nodes


@pytest.fixture
def pod_node(driver: Driver) -> str:
    """A node where pods really run (on the local provider, the one with a kubelet)."""
    try:
        (node,) = pick_nodes(driver.nodes, 1, runs_pods=True)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    return node.name


@pytest.fixture
def scheduling_node(driver: Driver) -> str:
    """A node for pods that only need to be scheduled."""
    try:
        (node,) = pick_nodes(scheduling_nodes(driver.nodes), 1)
    except Unsupported as unsupported:
        pytest.skip(str(unsupported))
    return node.name
