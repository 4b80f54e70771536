"""One line per Kubernetes object, the same from plain data and from lightkube models."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.kube.describe import describe_claim, describe_pod


def status(name: str, state: dict[str, Any], restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"csi-mock.local/{name}:dev",
        "imageID": "",
        "ready": False,
        "restartCount": restarts,
        "state": state,
        **extra,
    }


def pod_data(**pod_status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "csi-mock-node-abc"},
        "spec": {"nodeName": "worker", "containers": [{"name": "csi-mock"}]},
        "status": {"phase": "Pending", **pod_status},
    }


def test_a_pod_is_its_node_phase_and_each_containers_state_init_containers_first() -> None:
    pod = pod_data(
        containerStatuses=[status("csi-mock", {"waiting": {"reason": "ContainerCreating"}})],
        initContainerStatuses=[
            status("remove-earlier-state", {"terminated": {"exitCode": 0, "reason": "Completed"}})
        ],
    )
    assert describe_pod(Pod.from_dict(pod)) == (
        "csi-mock-node-abc on worker: Pending; "
        "remove-earlier-state: terminated Completed exit 0; "
        "csi-mock: waiting ContainerCreating"
    )


def test_a_pod_reads_the_same_from_plain_data_and_from_the_model() -> None:
    last = {"terminated": {"exitCode": 2, "reason": "Error", "message": "bad\nconfig"}}
    crashing = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
    pod = pod_data(containerStatuses=[status("csi-mock", crashing, 2, lastState=last)])
    text = describe_pod(pod)
    assert text == describe_pod(Pod.from_dict(pod))
    assert text == (
        "csi-mock-node-abc on worker: Pending; csi-mock: waiting CrashLoopBackOff "
        "(back-off 10s), restarts=2 (last: terminated Error exit 2: bad | config)"
    )


def test_a_pod_shows_the_conditions_not_true_but_not_the_unready_containers_again() -> None:
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available",
    }
    pod = {
        "metadata": {"name": "app"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                unschedulable,
            ],
        },
    }
    assert describe_pod(pod) == (
        "app on (unscheduled): Pending; PodScheduled=False(Unschedulable: 0/3 nodes are available)"
    )
    assert describe_pod({"metadata": {"name": "new"}}) == (
        "new on (unscheduled): ?; no containers yet"
    )


def test_a_claim_is_its_phase_sizes_volume_node_and_resize_state() -> None:
    claim = {
        "metadata": {
            "name": "data",
            "annotations": {"volume.kubernetes.io/selected-node": "node-2"},
        },
        "spec": {
            "storageClassName": "csi-mock",
            "resources": {"requests": {"storage": "2Gi"}},
            "volumeName": "pvc-1",
        },
        "status": {
            "phase": "Bound",
            "capacity": {"storage": "1Gi"},
            "allocatedResourceStatuses": {"storage": "NodeResizePending"},
            "conditions": [
                {"type": "FileSystemResizePending", "status": "True", "message": "Waiting for user"}
            ],
        },
    }
    text = describe_claim(claim)
    assert text == describe_claim(PersistentVolumeClaim.from_dict(claim))
    assert text == (
        "data Bound class=csi-mock request=2Gi capacity=1Gi volume=pvc-1 selected-node=node-2 "
        "resize=storage:NodeResizePending FileSystemResizePending(Waiting for user)"
    )


def test_a_new_claim_shows_what_it_does_not_have_yet_as_dashes() -> None:
    claim = {"metadata": {"name": "data"}, "status": {"phase": "Pending"}}
    assert describe_claim(claim) == "data Pending class=- request=- capacity=- volume=-"
