"""ClaimTimeline: bindings, selected nodes and reschedules from successive states;
PodTimeline: when each pod was placed on a node."""

from __future__ import annotations

from lightkube.models.core_v1 import PersistentVolumeClaimStatus, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.kube.waits import SELECTED_NODE
from csi_harness._internal.scale.timeline import ClaimTimeline, PodTimeline

_versions = iter(range(1, 10_000))


def claim(name: str, node: str | None = None, phase: str = "Pending") -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        metadata=ObjectMeta(
            name=name,
            resourceVersion=str(next(_versions)),
            annotations={SELECTED_NODE: node} if node else None,
        ),
        status=PersistentVolumeClaimStatus(phase=phase),
    )


def test_a_binding_is_recorded_once_at_its_time_since_start() -> None:
    timeline = ClaimTimeline(start=100.0)
    timeline.observe({"a": claim("a", "node-2", "Bound")}, 103.5)
    timeline.observe({"a": claim("a", "node-2", "Bound")}, 110.0)
    assert timeline.bound_at == {"a": 3.5}
    assert timeline.node_of == {"a": "node-2"}


def test_a_selected_node_taken_off_an_unbound_claim_is_a_reschedule() -> None:
    timeline = ClaimTimeline(start=0.0)
    for state, now in [
        (claim("a"), 1.0),
        (claim("a", "node-2"), 2.0),
        (claim("a"), 3.0),  # RESOURCE_EXHAUSTED on node-2: provisioner drops it
        (claim("a", "node-3"), 4.0),
        (claim("a"), 5.0),
        (claim("a", "node-4"), 6.0),
        (claim("a", "node-4", "Bound"), 7.0),
    ]:
        timeline.observe({"a": state}, now)
    assert timeline.reschedules == {"a": 2}
    assert timeline.total_reschedules == 2
    assert timeline.node_of["a"] == "node-4"
    assert timeline.bound_at == {"a": 7.0}


def test_only_the_removal_of_a_node_counts_not_later_updates_without_one() -> None:
    timeline = ClaimTimeline(start=0.0)
    selected = claim("a", "node-2")
    timeline.observe({"a": selected}, 1.0)
    timeline.observe({"a": claim("a")}, 2.0)
    timeline.observe({"a": claim("a")}, 3.0)
    assert timeline.total_reschedules == 1


def test_the_bound_series_counts_up_in_time_order() -> None:
    timeline = ClaimTimeline(start=0.0)
    timeline.observe({"b": claim("b", "n", "Bound")}, 2.0)
    timeline.observe({"a": claim("a", "n", "Bound"), "b": claim("b", "n", "Bound")}, 5.0)
    timeline.observe({"c": claim("c", "n", "Bound")}, 4.0)
    assert timeline.bound_series() == [(2.0, 1), (4.0, 2), (5.0, 3)]


def test_claims_that_never_had_a_node_are_seen_but_not_rescheduled() -> None:
    timeline = ClaimTimeline(start=0.0)
    timeline.observe({"a": claim("a"), "b": claim("b")}, 1.0)
    assert timeline.seen == {"a", "b"}
    assert timeline.reschedules == {}


def pod(name: str, node: str | None = None, phase: str = "Pending") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name),
        spec=PodSpec(containers=[], nodeName=node),
        status=PodStatus(phase=phase),
    )


def test_a_pod_is_placed_when_it_first_has_a_node_and_only_then() -> None:
    timeline = PodTimeline(start=10.0)
    timeline.observe({"a": pod("a"), "b": pod("b")}, 11.0)
    timeline.observe({"a": pod("a", "node-2"), "b": pod("b")}, 12.5)
    timeline.observe({"a": pod("a", "node-2"), "b": pod("b", "node-3")}, 14.0)
    timeline.observe({"a": pod("a", "node-2"), "b": pod("b", "node-3")}, 20.0)
    assert timeline.placed_at == {"a": 2.5, "b": 4.0}
    assert timeline.seen == {"a", "b"}


def test_a_pod_is_running_from_when_it_is_first_seen_running() -> None:
    timeline = PodTimeline(start=10.0)
    timeline.observe({"a": pod("a", "node-2")}, 11.0)
    timeline.observe({"a": pod("a", "node-2", "Running")}, 13.0)
    timeline.observe({"a": pod("a", "node-2", "Running")}, 15.0)
    # Seen Running at once (the placement in between was missed): placed then too.
    timeline.observe({"b": pod("b", "node-3", "Running")}, 16.0)
    assert timeline.running_at == {"a": 3.0, "b": 6.0}
    assert timeline.placed_at == {"a": 1.0, "b": 6.0}
