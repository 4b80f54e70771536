"""The nodes a driver runs on, as a provider reports them, and picking among them by
what a test needs (zone, real kubelet), never by name; whether a node's kubelet has
posted its status since a restart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from lightkube import Client
from lightkube.resources.core_v1 import Node

from csi_harness._internal.core.unsupported import Unsupported


@dataclass(frozen=True)
class ClusterNode:
    """A node the driver runs on."""

    name: str
    zone: str | None
    runs_pods: bool
    """A real kubelet runs containers here; False for the local provider's simulated
    nodes (they register and report, but never start a pod or mount a volume)."""


def pick_nodes(
    nodes: Sequence[ClusterNode],
    count: int,
    *,
    runs_pods: bool | None = None,
    zone: str | None = None,
) -> list[ClusterNode]:
    """The first ``count`` nodes (by name) with ``runs_pods`` as asked (None: any) and
    in ``zone`` (None: any), or Unsupported saying how many the test needs and how
    many the cluster has."""
    matching = sorted(
        (
            n
            for n in nodes
            if (runs_pods is None or n.runs_pods is runs_pods) and (zone is None or n.zone == zone)
        ),
        key=lambda n: n.name,
    )
    if len(matching) < count:
        what = {None: "nodes", True: "nodes that run pods", False: "simulated nodes"}[runs_pods]
        where = f" in zone {zone}" if zone is not None else ""
        raise Unsupported(f"needs {count} {what}{where}; the cluster has {len(matching)}")
    return matching[:count]


def scheduling_nodes(nodes: Sequence[ClusterNode]) -> list[ClusterNode]:
    """The nodes for pods that only need to be scheduled, sorted by name: the
    simulated ones when there are any, else all. Simulated nodes are alike, and a
    node with a real kubelet beside them differs in allocatable and in the images it
    holds, which kube-scheduler's scoring would weigh."""
    simulated = [n for n in nodes if not n.runs_pods]
    return sorted(simulated or nodes, key=lambda n: n.name)


def heartbeat_since(kube: Client, name: str, since: datetime) -> tuple[bool, str]:
    """Whether the node's Ready condition was posted at ``since`` or later (its
    lastHeartbeatTime, whole seconds)."""
    status = kube.get(Node, name).status
    conditions = (status.conditions if status else None) or []
    ready = next((cond for cond in conditions if cond.type == "Ready"), None)
    beat = ready.lastHeartbeatTime if ready else None
    return beat is not None and beat >= since, f"Ready heartbeat {beat}"
