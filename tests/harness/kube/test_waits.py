"""The waits on the objects they watch: what each selects, what ends it, and what its
timeout says was seen last."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from lightkube.resources.core_v1 import Event, PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import CSIStorageCapacity, VolumeAttachment

from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.kube import waits
from csi_harness._internal.kube.pod_status import CRASH_LOOP_RESTARTS
from csi_harness._internal.kube.waits import (
    DRIVER_NAME_LABEL,
    SELECTED_NODE,
    AnnotationHistory,
    claim_conditions,
    wait_capacity,
    wait_claim,
    wait_claim_capacity,
    wait_event,
    wait_pod_scheduled,
    wait_volume_attachment,
    wait_volume_attachments_gone,
    wait_volume_capacity,
)
from csi_harness._internal.kube.waits.annotations import HistoryIncomplete
from csi_harness._internal.kube.watching import Selection
from tests.harness.kube.test_pod_status import crash, in_back_off, start_error, status
from tests.harness.kube.test_watching import FakeApi, api_error

GI = 1024**3


def capacity(name: str, node_key: str, node: str, storage_class: str, size: str) -> Any:
    return CSIStorageCapacity.from_dict(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "storageClassName": storage_class,
            "nodeTopology": {"matchLabels": {node_key: node}},
            "capacity": size,
        }
    )


def attachment(name: str, volume: str, version: str, attached: bool) -> Any:
    return VolumeAttachment.from_dict(
        {
            "metadata": {"name": name, "resourceVersion": version},
            "spec": {
                "attacher": "csi-mock.example",
                "nodeName": "worker",
                "source": {"persistentVolumeName": volume},
            },
            "status": {"attached": attached},
        }
    )


def event(name: str, reason: str, message: str, involved: str = "data") -> Any:
    return Event.from_dict(
        {
            "metadata": {"name": name, "resourceVersion": "1"},
            "involvedObject": {"kind": "PersistentVolumeClaim", "name": involved},
            "reason": reason,
            "message": message,
        }
    )


def claim(version: str, node: str | None = None) -> Any:
    annotations = {SELECTED_NODE: node} if node else {}
    return PersistentVolumeClaim.from_dict(
        {"metadata": {"name": "data", "resourceVersion": version, "annotations": annotations}}
    )


def resizing_claim(version: str, capacity: str, **status: Any) -> Any:
    """Claim "data" asking for 2Gi, with the given status.capacity."""
    return PersistentVolumeClaim.from_dict(
        {
            "metadata": {"name": "data", "namespace": "ns", "resourceVersion": version},
            "spec": {"resources": {"requests": {"storage": "2Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": capacity}, **status},
        }
    )


def volume(name: str, version: str, capacity: str) -> Any:
    return PersistentVolume.from_dict(
        {
            "metadata": {"name": name, "resourceVersion": version},
            "spec": {"capacity": {"storage": capacity}},
        }
    )


PENDING = {
    "allocatedResourceStatuses": {"storage": "NodeResizePending"},
    "conditions": [
        {"type": "FileSystemResizePending", "status": "True", "message": "Waiting for user"}
    ],
}


def test_wait_claim_capacity_ends_when_the_status_reaches_the_size() -> None:
    api = FakeApi(
        lists=[([resizing_claim("5", "1Gi")], "10")],
        watches=[
            [
                ("MODIFIED", resizing_claim("11", "1Gi", **PENDING)),
                ("MODIFIED", resizing_claim("12", "2Gi")),
            ]
        ],
    )

    found = wait_claim_capacity(api, "data", "ns", 2 * GI, timeout=5)

    assert found.metadata is not None and found.metadata.resourceVersion == "12"
    assert api.listed == [Selection(PersistentVolumeClaim, "ns", None, {"metadata.name": "data"})]


def test_wait_claim_times_out_describing_the_resize_state() -> None:
    api = FakeApi(lists=[([resizing_claim("5", "1Gi", **PENDING)], "10")])

    with pytest.raises(WaitTimeout) as failure:
        wait_claim(api, "data", "ns", lambda _: False, what="something", timeout=0.1)

    assert str(failure.value).endswith(
        "waiting for claim ns/data: something; last seen: data Bound class=- request=2Gi"
        " capacity=1Gi volume=- resize=storage:NodeResizePending"
        " FileSystemResizePending(Waiting for user)"
    )


def test_claim_conditions_are_by_type() -> None:
    pending = resizing_claim("5", "1Gi", **PENDING)
    assert claim_conditions(pending) == {"FileSystemResizePending": "Waiting for user"}
    assert claim_conditions(resizing_claim("5", "1Gi")) == {}


def test_wait_volume_capacity_follows_the_one_volume() -> None:
    api = FakeApi(
        lists=[([volume("pv-1", "5", "1Gi")], "10")],
        watches=[[("MODIFIED", volume("pv-1", "11", "3Gi"))]],
    )

    found = wait_volume_capacity(api, "pv-1", 3 * GI, timeout=5)

    assert found.metadata is not None and found.metadata.resourceVersion == "11"
    with pytest.raises(WaitTimeout, match=r"last seen: capacity=1073741824$"):
        wait_volume_capacity(
            FakeApi(lists=[([volume("pv-1", "5", "1Gi")], "10")]), "pv-1", 3 * GI, timeout=0.1
        )


def test_wait_capacity_follows_the_drivers_own_objects_by_its_node_key() -> None:
    spec = DriverDeployment(name="other.example", suffix="-b")
    api = FakeApi(
        lists=[([], "10")],
        watches=[
            [
                ("ADDED", capacity("a", "topology.csi-mock.example/node", "n1", "csi-mock", "9Gi")),
                ("ADDED", capacity("b", spec.node_topology_key, "n1", "csi-mock-b", "5Gi")),
            ]
        ],
    )

    wait_capacity(api, spec, {("n1", "csi-mock-b"): 5 * GI}, timeout=5)

    labels = {DRIVER_NAME_LABEL: "other.example"}
    assert api.listed == [Selection(CSIStorageCapacity, "csi-mock-b", labels)]


def test_wait_capacity_times_out_with_the_capacity_seen() -> None:
    spec = DriverDeployment()
    found = capacity("a", spec.node_topology_key, "n1", "csi-mock", "3Gi")
    api = FakeApi(lists=[([found], "10")])

    with pytest.raises(WaitTimeout, match=r"last seen: \{\('n1', 'csi-mock'\): \(3221225472, None"):
        wait_capacity(api, spec, {("n1", "csi-mock"): 5 * GI}, timeout=0.1)


def test_wait_volume_attachment_skips_the_attachments_of_other_volumes() -> None:
    api = FakeApi(
        lists=[([attachment("va-other", "pv-other", "5", attached=True)], "10")],
        watches=[
            [
                ("ADDED", attachment("va-1", "pv-1", "11", attached=False)),
                ("MODIFIED", attachment("va-1", "pv-1", "12", attached=True)),
            ]
        ],
    )

    found = wait_volume_attachment(api, "pv-1", attached=True, timeout=5)

    assert found.metadata is not None
    assert (found.metadata.name, found.metadata.resourceVersion) == ("va-1", "12")
    assert api.listed == [Selection(VolumeAttachment)]


def test_wait_volume_attachments_gone_ends_when_the_last_one_is_deleted() -> None:
    api = FakeApi(
        lists=[([attachment("va-1", "pv-1", "5", attached=True)], "10")],
        watches=[[("DELETED", attachment("va-1", "pv-1", "11", attached=True))]],
    )

    wait_volume_attachments_gone(api, "pv-1", timeout=5)


def test_wait_volume_attachments_gone_times_out_naming_the_attachment_left() -> None:
    api = FakeApi(lists=[([attachment("va-1", "pv-1", "5", attached=True)], "10")])

    with pytest.raises(WaitTimeout, match="last seen: va-1 node=worker attached=True"):
        wait_volume_attachments_gone(api, "pv-1", timeout=0.1)


def test_wait_event_returns_the_first_matching_event_of_the_namespace() -> None:
    api = FakeApi(
        lists=[([event("e1", "Provisioning", "External provisioner is provisioning")], "10")],
        watches=[[("ADDED", event("e2", "ProvisioningFailed", "ResourceExhausted: full"))]],
    )

    seen = wait_event(api, "ns", reason="ProvisioningFailed", contains="ResourceExhausted")

    assert (seen.name, seen.message) == ("data", "ResourceExhausted: full")
    assert api.listed == [Selection(Event, "ns")]


def test_wait_event_times_out_with_the_recent_events() -> None:
    api = FakeApi(lists=[([event("e1", "Provisioning", "provisioning")], "10")])

    with pytest.raises(WaitTimeout) as failure:
        wait_event(api, "ns", reason="ProvisioningFailed", involved="data", timeout=0.1)

    assert str(failure.value).endswith(
        "waiting for a ProvisioningFailed event for data;"
        " last seen: ['PersistentVolumeClaim/data Provisioning: provisioning (x1)']"
    )


def test_wait_pod_scheduled_says_when_the_pod_does_not_exist() -> None:
    api = FakeApi(lists=[([], "10")])

    with pytest.raises(WaitTimeout, match=r"last seen: no pod app$"):
        wait_pod_scheduled(api, "app", "ns", timeout=0.1)


def sidecar_pod(version: str, container: dict[str, Any], ready: bool = False) -> Any:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return Pod.from_dict(
        {
            "metadata": {"name": "late", "resourceVersion": version},
            "status": {"containerStatuses": [container], "conditions": [condition]},
        }
    )


def test_wait_pods_ready_waits_through_failed_starts_and_says_they_were_the_runtime() -> None:
    failed = [in_back_off("sidecar", attempt - 1, start_error(attempt)) for attempt in range(1, 5)]
    running = status("sidecar", {"running": {}}, 4, lastState=failed[-1]["lastState"])
    api = FakeApi(
        lists=[([sidecar_pod("1", failed[0])], "1")],
        watches=[
            [("MODIFIED", sidecar_pod(str(n + 2), c)) for n, c in enumerate(failed[1:])]
            + [("MODIFIED", sidecar_pod("9", running, ready=True))]
        ],
    )
    said: list[str] = []
    history = waits.wait_pods_ready(api, "ns", timeout=2, progress=said.append)
    assert len(said) == 4 and all("container runtime failed to start it" in s for s in said)
    (line,) = history.runtime_failures()
    assert line.startswith("late/sidecar: the container runtime failed to start it 4 times")


def test_wait_pods_ready_ends_at_a_crash_loop_of_a_container_that_ran() -> None:
    crashed = in_back_off("sidecar", CRASH_LOOP_RESTARTS, crash(4))
    api = FakeApi(lists=[([sidecar_pod("1", crashed)], "1")])
    with pytest.raises(AssertionError, match="late/sidecar crashed 3 times"):
        waits.wait_pods_ready(api, "ns", timeout=2)


def test_annotation_history_records_each_value_and_resumes_from_the_last_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waits.annotations, "HISTORY_SLICE", 0.05)
    api = FakeApi(
        lists=[([claim("5")], "10")],
        watches=[
            [("MODIFIED", claim("11", node="worker-1"))],
            [("MODIFIED", claim("12")), ("DELETED", claim("13"))],
        ],
    )

    history = AnnotationHistory(api, "data", "ns").start()
    try:
        values = history.wait_for_values(lambda v: len(v) >= 3, "three values", timeout=2)
        wait_for("a watch from 13", lambda: ("13" in api.watched, api.watched), timeout=2)
    finally:
        history.stop()

    assert values == [None, "worker-1", None]
    assert api.watched[:3] == ["10", "11", "13"]
    assert len(api.listed) == 1


def named_claim(version: str, volume: str | None, phase: str) -> Any:
    return PersistentVolumeClaim.from_dict(
        {
            "metadata": {"name": "data", "namespace": "ns", "resourceVersion": version},
            "spec": {"volumeName": volume} if volume else {},
            "status": {"phase": phase},
        }
    )


@dataclass
class FakeApiWithVolumes(FakeApi):
    def get(self, resource: type, name: str) -> Any:
        assert resource is PersistentVolume
        return volume(name, "1", "1Gi")


def test_wait_bound_volume_waits_for_the_phase_after_the_volume_name() -> None:
    # The binder sets volumeName, then the phase in a second update; in between the
    # API server still refuses what it allows only for bound claims.
    api = FakeApiWithVolumes(
        lists=[([named_claim("5", "pv-1", "Pending")], "10")],
        watches=[[("MODIFIED", named_claim("11", "pv-1", "Bound"))]],
    )

    found = waits.wait_bound_volume(api, "data", "ns", timeout=5)  # type: ignore[arg-type]

    assert found.metadata is not None and found.metadata.name == "pv-1"
    assert api.watched == ["10"]


def test_wait_bound_volume_is_not_over_while_the_phase_is_pending() -> None:
    api = FakeApiWithVolumes(lists=[([named_claim("5", "pv-1", "Pending")], "10")])

    with pytest.raises(WaitTimeout) as failure:
        waits.wait_bound_volume(api, "data", "ns", timeout=0.1)  # type: ignore[arg-type]

    assert "claim data is Pending with volume pv-1" in str(failure.value)


def test_an_annotation_history_that_never_saw_its_claim_proves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waits.annotations, "HISTORY_SLICE", 0.05)
    api = FakeApi(lists=[([], "10")])
    history = AnnotationHistory(api, "data", "ns").start()
    wait_for("a watch from 10", lambda: ("10" in api.watched, api.watched), timeout=2)
    with pytest.raises(HistoryIncomplete, match="never saw claim ns/data"):
        history.stop()


def test_an_annotation_history_whose_watch_failed_raises_the_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waits.annotations, "HISTORY_SLICE", 0.05)
    api = FakeApi(lists=[api_error(403, "forbidden"), ([claim("5")], "10")])
    history = AnnotationHistory(api, "data", "ns").start()
    wait_for("a second list", lambda: (len(api.listed) == 2, api.listed), timeout=2)
    with pytest.raises(HistoryIncomplete, match=r"failed and started again.*forbidden"):
        history.stop()


def test_an_annotation_history_whose_watch_had_to_list_again_is_incomplete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 503 ends the watch; the list after it shows the claim as it is now, and a value
    # set and removed in between would be missing.
    monkeypatch.setattr(waits.annotations, "HISTORY_SLICE", 0.05)
    api = FakeApi(
        lists=[([claim("5")], "10"), ([claim("12")], "12")],
        watches=[[api_error(503, "unavailable")]],
    )
    history = AnnotationHistory(api, "data", "ns").start()
    wait_for("a second list", lambda: (len(api.listed) == 2, api.listed), timeout=3)
    with pytest.raises(HistoryIncomplete, match=r"listed again after 1 error.*unavailable"):
        history.stop()


def test_an_annotation_history_keeps_a_change_that_arrives_as_it_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The change was made before stop() but reaches the watch just after it.
    monkeypatch.setattr(waits.annotations, "HISTORY_SLICE", 0.5)
    api = SlowWatchApi(lists=[([claim("5")], "10")], watches=[[("MODIFIED", claim("11", "w-1"))]])
    history = AnnotationHistory(api, "data", "ns").start()
    wait_for("a watch from 10", lambda: ("10" in api.watched, api.watched), timeout=2)
    assert history.stop() == [None, "w-1"]


@dataclass
class SlowWatchApi(FakeApi):
    def watch(self, selection: Selection[Any], *, resource_version: str, seconds: float) -> Any:
        self.watched.append(resource_version)
        time.sleep(0.2)
        yield from self.watches.pop(0) if self.watches else []
        time.sleep(seconds)
