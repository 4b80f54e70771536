"""Host-side probes of the local cluster (``csi_harness._internal.providers.local.host``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from lightkube import Client
from lightkube.models.core_v1 import NodeCondition, NodeStatus
from lightkube.resources.core_v1 import Node

from csi_harness._internal.kube.nodes import heartbeat_since

RESTART = datetime(2026, 11, 27, 4, 0, 0, tzinfo=UTC)


class OneNode:
    """A client whose ``get`` answers one Node, with these conditions."""

    def __init__(self, *conditions: NodeCondition) -> None:
        self.node = Node(status=NodeStatus(conditions=list(conditions)))

    def get(self, resource: Any, name: str) -> Node:
        assert resource is Node
        return self.node


def ready(seconds_after_restart: int) -> NodeCondition:
    """A Ready condition posted that many seconds after RESTART (negative: before)."""
    beat = datetime.fromtimestamp(RESTART.timestamp() + seconds_after_restart, UTC)
    return NodeCondition(type="Ready", status="True", lastHeartbeatTime=beat)


def test_a_ready_heartbeat_from_before_the_restart_is_not_enough() -> None:
    done, seen = heartbeat_since(cast(Client, OneNode(ready(-3))), "node-1", RESTART)
    assert not done
    assert "03:59:57" in seen


def test_a_ready_heartbeat_at_or_after_the_restart_counts() -> None:
    assert heartbeat_since(cast(Client, OneNode(ready(0))), "node-1", RESTART)[0]
    assert heartbeat_since(cast(Client, OneNode(ready(2))), "node-1", RESTART)[0]


def test_a_node_without_a_ready_condition_has_no_heartbeat() -> None:
    pressure = NodeCondition(type="MemoryPressure", status="False", lastHeartbeatTime=RESTART)
    assert heartbeat_since(cast(Client, OneNode(pressure)), "node-1", RESTART) == (
        False,
        "Ready heartbeat None",
    )
