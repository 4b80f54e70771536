"""Where kube-scheduler placed a namespace's pods, read from its Scheduled events
(csi_harness/_internal/kube/waits/events.py): what the ``namespace`` fixture records
as the ``pods_on_simulated_nodes`` JUnit property."""

from __future__ import annotations

from typing import Any

from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

from csi_harness._internal.kube.waits.events import scheduled_placements


class EventList:
    def __init__(self, *events: Event) -> None:
        self.events = events

    def list(self, resource: Any, *, namespace: str) -> list[Event]:
        assert resource is Event and namespace == "t-1"
        return list(self.events)


def event(reason: str, message: str, pod: str = "p") -> Event:
    return Event(
        metadata=ObjectMeta(name=f"{pod}.{reason}"),
        involvedObject=ObjectReference(kind="Pod", name=pod),
        reason=reason,
        message=message,
    )


def test_each_pod_and_node_the_scheduler_placed_it_on_is_read_from_its_events() -> None:
    kube = EventList(
        event("Scheduled", "Successfully assigned t-1/a to node-1", pod="a"),
        # The same pod made again and placed elsewhere: both placements count.
        event("Scheduled", "Successfully assigned t-1/a to sim-2", pod="a"),
        event("Scheduled", "Successfully assigned t-1/b to sim-2", pod="b"),
        event("FailedScheduling", "0/3 nodes are available: 3 node(s) exceed max volume count"),
        event("Started", "Started container c", pod="a"),
    )
    assert scheduled_placements(kube, "t-1") == {  # type: ignore[arg-type]
        ("t-1/a", "node-1"),
        ("t-1/a", "sim-2"),
        ("t-1/b", "sim-2"),
    }
