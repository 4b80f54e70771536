"""Which provider's clusters have which capability (csi_harness/_internal/providers/base.py):
what the module's docstring lists, read from the classes themselves."""

from __future__ import annotations

import pytest
from typing_extensions import get_protocol_members

from csi_harness._internal.providers.base import (
    ComponentMetrics,
    ConfiguredFeatureGates,
    FeatureGates,
    KubeletRestarts,
    SchedulerRestarts,
)
from csi_harness._internal.providers.kind.cluster import KindCluster
from csi_harness._internal.providers.kubeconfig_cluster import KubeconfigCluster
from csi_harness._internal.providers.local.cluster import LocalCluster

CAPABILITIES = (
    SchedulerRestarts,
    KubeletRestarts,
    ComponentMetrics,
    FeatureGates,
    ConfiguredFeatureGates,
)
HAS = {
    LocalCluster: {
        SchedulerRestarts,
        KubeletRestarts,
        ComponentMetrics,
        FeatureGates,
        ConfiguredFeatureGates,
    },
    KindCluster: {SchedulerRestarts, KubeletRestarts, ComponentMetrics, FeatureGates},
    KubeconfigCluster: {FeatureGates},
}


@pytest.mark.parametrize("cluster_class", list(HAS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.__name__)
def test_each_provider_has_the_capabilities_it_says_wholly_and_no_others(
    cluster_class: type, capability: type
) -> None:
    members = get_protocol_members(capability)
    present = {member for member in members if hasattr(cluster_class, member)}
    if capability in HAS[cluster_class]:
        assert present == members
    else:
        assert present == set(), f"a part of {capability.__name__}: {sorted(present)}"
