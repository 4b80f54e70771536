"""The ``feature_gate`` marker's verdict: a test that needs a gate runs only where the
cluster's component has it on explicitly, and is skipped with the reason elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import Component, LocalClusterConfig
from csi_harness._internal.pytest_plugin.fixtures import feature_gate_skip_reason


def local(tmp_path: Path, **config: object) -> LocalCluster:
    return LocalCluster(
        LocalClusterConfig.model_validate({"name": "gates", "run_dir": tmp_path, **config})
    )


def test_a_gate_on_for_every_component_lets_the_test_run(tmp_path: Path) -> None:
    cluster = local(tmp_path, feature_gates={"CSIVolumeHealth": True})
    assert feature_gate_skip_reason(cluster, "CSIVolumeHealth") is None


def test_a_gate_left_at_its_default_skips_naming_the_option(tmp_path: Path) -> None:
    reason = feature_gate_skip_reason(local(tmp_path), "CSIVolumeHealth")
    assert reason is not None
    assert "CSIVolumeHealth=true on the kubelet" in reason
    assert "--csi-feature-gates CSIVolumeHealth=true" in reason


def test_the_gate_counts_in_the_component_named_only(tmp_path: Path) -> None:
    cluster = local(
        tmp_path, component_feature_gates={Component.APISERVER: {"CSIVolumeHealth": True}}
    )
    assert feature_gate_skip_reason(cluster, "CSIVolumeHealth", "kube-apiserver") is None
    assert feature_gate_skip_reason(cluster, "CSIVolumeHealth", "kubelet") is not None


def test_a_foreign_clusters_kubelet_gates_are_asked_of_the_cluster() -> None:
    class Foreign:
        """A cluster that tells its kubelets' and scheduler's gates (``FeatureGates``)."""

        name = "elsewhere"

        def __init__(self, value: bool | None) -> None:
            self.value = value

        def kubelet_feature_gate(self, gate: str) -> bool | None:
            return self.value if gate == "CSIVolumeHealth" else None

        def scheduler_feature_gate(self, gate: str) -> bool | None:
            return None

    assert feature_gate_skip_reason(cast(Cluster, Foreign(True)), "CSIVolumeHealth") is None
    reason = feature_gate_skip_reason(cast(Cluster, Foreign(None)), "CSIVolumeHealth")
    assert reason is not None and "cluster 'elsewhere' does not run with it" in reason
    assert "--csi-kind-config" in reason


def test_a_foreign_clusters_apiserver_gates_cannot_be_told() -> None:
    class Foreign:
        name = "elsewhere"

        def kubelet_feature_gate(self, gate: str) -> bool | None:
            return True

        def scheduler_feature_gate(self, gate: str) -> bool | None:
            return True

    reason = feature_gate_skip_reason(cast(Cluster, Foreign()), "Gate", "kube-apiserver")
    assert reason is not None and "not of cluster 'elsewhere'" in reason
