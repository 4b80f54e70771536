"""KEP-1472's finding at a size CI affords: the same burst of pods with generic
ephemeral volumes of mixed sizes, filling ~90% of ten simulated nodes' pools, on a
fresh local cluster with capacity tracking on and another with it off
(``csi-harness scale kep1472``; the 50-node runs are in docs/records/scale.md).

What is asserted is what held in every run at this size (docs/scale.md): with
tracking every claim is bound unless no node has room for the burst's largest size,
and a claim refused for stale capacity is not refused again; in both runs each refusal
sends the claim back to kube-scheduler. The blind run's numbers go into the JUnit
report: at ten nodes it ended with 2, 3 and 0 claims stuck in three runs (14, 21 and 3
refusals), too varied to assert; at 50 nodes the difference is the one the KEP
describes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from csi_harness._internal.scale.comparisons import KEP1472
from csi_harness._internal.scale.experiment import Setup, run_variant
from csi_harness._internal.scale.workload import SizeRange

# cluster_wide: it runs while no other e2e test does (its own two clusters and the
# shared one would otherwise compete for two cores, and stale capacity is a matter
# of timing).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.cluster_wide,
    pytest.mark.usefixtures("cluster_access"),
]

SETUP = Setup(
    nodes=10,
    pool="10Gi",
    pods=47,
    sizes=SizeRange.parse("1Gi-3Gi"),
    seed=1,
    deadline=150,
    stall_seconds=40,
    cluster_prefix="ci-scale",
)


@pytest.fixture(scope="module", autouse=True)
def local_only(request: pytest.FixtureRequest) -> None:
    provider = request.config.getoption("--csi-cluster")
    if provider != "local":
        pytest.skip(f"brings up local clusters of its own; --csi-cluster is {provider}")


def test_capacity_tracking_binds_every_claim_where_blind_scheduling_keeps_failing(
    record_property: Callable[[str, object], None],
) -> None:
    # One test for both runs: pytest-xdist gives every worker its own module-scoped
    # fixtures, so split tests would bring the same clusters up twice at once.
    runs = {v.name: run_variant(SETUP, v, print) for v in KEP1472.variants}
    tracking, blind = runs["tracking"], runs["no-tracking"]
    for result in (tracking, blind):  # what was measured, in the JUnit report
        for key in (
            "resource_exhausted",
            "reschedules",
            "most_reschedules",
            "claims_left",
            "ended_after",
        ):
            record_property(f"{result.variant}.{key}", getattr(result, key))

    # The burst fills about nine tenths of the pools.
    assert 0.85 <= tracking.requested_bytes / (tracking.pool_bytes * tracking.nodes) <= 0.95

    # With capacity tracking every claim is bound, unless no node has room left for the
    # largest volume size of the burst: at nine tenths full, placements made within one
    # capacity poll can leave every node with less free space than a 3Gi claim needs
    # (seen once in eight CI runs: one claim left, ResourceExhausted on every node).
    # That is packing, not scheduling without capacity; the pools hold what was bound.
    largest_free = max(
        tracking.pool_total[node] - tracking.pool_used.get(node, 0) for node in tracking.pool_total
    )
    if not tracking.completed:
        assert largest_free < SETUP.sizes.high, (
            f"{tracking.claims_left} unbound ({tracking.stop_reason})"
            f" although a node had {largest_free} bytes free"
        )
    assert tracking.create_volume_ok == SETUP.pods - tracking.claims_left
    if tracking.completed:
        assert sum(tracking.pool_used.values()) == tracking.requested_bytes

    # ... and a refusal (published capacity a poll behind) is not repeated: the next
    # node kube-scheduler picks has room. (Without tracking one claim was refused up to
    # 14 times; how often varies too much at this size to assert, docs/records/scale.md.)
    assert tracking.most_reschedules <= 2, (
        f"a claim was sent back {tracking.most_reschedules} times"
    )

    # Every refusal sent its claim back to kube-scheduler: external-provisioner drops
    # the selected node, which the claim watch sees, unless the run ended first (at
    # most one drop in flight per claim still unbound).
    for result in (tracking, blind):
        assert result.reschedules <= result.resource_exhausted, result.variant
        assert result.resource_exhausted <= result.reschedules + result.claims_left, result.variant
