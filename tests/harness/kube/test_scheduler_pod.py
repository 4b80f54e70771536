"""A kube-scheduler of a test's own as a pod: what is created for it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.kube.scheduler_pod import SCHEDULER_ROLES, manifests, readiness
from csi_harness._internal.kube.start_failures import StartHistory


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


UNABLE_TO_FREEZE = (
    "failed to create containerd task: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: error during container "
    "init: error setting cgroup config for procHooks process: unable to freeze"
)
"""What kind's kubelet reported for a scheduler pod of a scoring test in session 26's
cold CI run (cgroup v1 freezer under load)."""


def scheduler(state: dict[str, Any], last: dict[str, Any] | None = None, *, ready: bool) -> Pod:
    container = {
        "name": "kube-scheduler",
        "image": "registry.k8s.io/kube-scheduler:v1.37.1",
        "imageID": "",
        "ready": ready,
        "restartCount": 0 if last is None else 1,
        "state": state,
        **({"lastState": {"terminated": last}} if last else {}),
    }
    return Pod.from_dict(
        {
            "metadata": {"name": "kube-scheduler", "namespace": "csi-scoring-ab12cd"},
            "spec": {"containers": [{"name": "kube-scheduler"}]},
            "status": {
                "phase": "Running" if ready else "Pending",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": [container],
            },
        }
    )


FROZE = {
    "containerID": "containerd://" + "1" * 64,
    "exitCode": 128,
    "finishedAt": "2026-11-28T20:16:12Z",
    "message": UNABLE_TO_FREEZE,
    "reason": "StartError",
    "startedAt": "1970-01-01T00:00:00Z",
}
BAD_CONFIG = {
    "containerID": "containerd://" + "2" * 64,
    "exitCode": 1,
    "finishedAt": "2026-11-28T20:16:12Z",
    "message": 'no configuration has been provided for "csi-scoring-ab12cd-0"',
    "reason": "Error",
    "startedAt": "2026-11-28T20:16:11Z",
}
BACK_OFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}}
RUNNING = {"running": {"startedAt": "2026-11-28T20:16:25Z"}}


def test_a_start_the_runtime_failed_is_waited_through_and_said() -> None:
    history = StartHistory()
    ready, seen = readiness(scheduler(BACK_OFF, FROZE, ready=False), history)
    assert not ready
    assert "unable to freeze" in seen and "not counted as crashes" in seen
    ready, _ = readiness(scheduler(RUNNING, FROZE, ready=False), history)
    assert not ready  # started after the failure, /readyz not yet answered
    ready, _ = readiness(scheduler(RUNNING, FROZE, ready=True), history)
    assert ready


def test_a_scheduler_that_ran_and_exited_fails_the_wait_at_once() -> None:
    with pytest.raises(AssertionError, match="exited with code 1 \\(Error\\): no configuration"):
        readiness(scheduler(BACK_OFF, BAD_CONFIG, ready=False), StartHistory())


def test_a_scheduler_that_starts_at_once_is_ready_with_nothing_to_say() -> None:
    ready, seen = readiness(scheduler(RUNNING, ready=True), StartHistory())
    assert ready
    assert "container runtime" not in seen
