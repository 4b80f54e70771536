"""A kube-scheduler of a test's own as a pod: what is created for it."""

from __future__ import annotations

from typing import Any

import yaml

from csi_harness._internal.kube.scheduler_pod import SCHEDULER_ROLES, manifests


def made(**gates: bool) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for manifest in manifests(
        "csi-scoring-ab12cd",
        [{"schedulerName": "csi-scoring-ab12cd-0"}],
        image="registry.k8s.io/kube-scheduler:v1.37.1",
        node="kind-control-plane",
        feature_gates=gates,
    ):
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    return by_kind


def test_the_scheduler_serves_only_its_profiles_without_leader_election() -> None:
    (config_map,) = made()["ConfigMap"]
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["profiles"] == [{"schedulerName": "csi-scoring-ab12cd-0"}]
    assert config["leaderElection"] == {"leaderElect": False}
    assert "clientConnection" not in config  # in-cluster credentials


def test_the_pod_runs_the_cluster_schedulers_image_on_its_node_and_waits_for_readyz() -> None:
    (pod,) = made(StorageCapacityScoring=True)["Pod"]
    spec = pod["spec"]
    assert spec["nodeName"] == "kind-control-plane"
    assert spec["tolerations"] == [{"operator": "Exists"}]
    (container,) = spec["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.37.1"
    assert "--feature-gates=StorageCapacityScoring=true" in container["command"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_its_service_account_has_the_roles_of_the_clusters_scheduler() -> None:
    bindings = made()["ClusterRoleBinding"]
    assert sorted(b["roleRef"]["name"] for b in bindings) == sorted(SCHEDULER_ROLES)
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kube-scheduler", "namespace": "csi-scoring-ab12cd"}
        ]
    assert "--feature-gates" not in " ".join(made()["Pod"][0]["spec"]["containers"][0]["command"])
