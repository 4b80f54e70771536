"""The failure diagnostics' collectors (csi_harness/_internal/diagnostics/): journal,
events, objects and logs, tried with fake Kubernetes, log and admin sources. The
plugin that attaches them to a failed test: tests/harness/test_reporting.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from lightkube.codecs import from_dict
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod

from csi_harness._internal import diagnostics
from csi_harness._internal.diagnostics import ClusterTarget, DriverLogs, Limits, LogDirectory
from csi_mock.observe.calls import CallRecord

# -- diagnostics: formatting ---------------------------------------------------------


T0 = 1_700_000_000.123  # 2023-11-14 22:13:20.123 UTC


def record(
    method: str = "CreateVolume", code: str = "OK", at: float = T0, **fields: Any
) -> CallRecord:
    return CallRecord(time=at, method=method, service="Controller", code=code, **fields)


def test_journal_record_is_one_line_with_the_outcome_before_the_request() -> None:
    call = record(
        code="RESOURCE_EXHAUSTED",
        request={"name": "pvc-1", "required_bytes": 1 << 30, "parameters": {"kind": "fast"}},
        message="no pool with room\nfor 1Gi",
        duration_ms=1.25,
        fault="f-1",
    )
    assert diagnostics.format_record(call) == (
        '22:13:20.123 CreateVolume RESOURCE_EXHAUSTED 1.2ms "no pool with room | for 1Gi" '
        '[fault f-1] name=pvc-1 required_bytes=1073741824 parameters={"kind":"fast"}'
    )


def test_journal_record_names_its_driver_instance() -> None:
    call = record("NodePublishVolume", request={"volume_id": "v1"})
    assert diagnostics.format_record(call, "node-2") == (
        "22:13:20.123 [node-2] NodePublishVolume OK 0.0ms volume_id=v1"
    )


def event(
    name: str, when: dict[str, Any], reason: str = "Provisioning", **extra: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "t-1"},
        "involvedObject": {"kind": "PersistentVolumeClaim", "name": "data"},
        "reason": reason,
        "type": "Normal",
        "message": f"message of {name}",
        **when,
        **extra,
    }


def test_events_sort_by_when_they_last_happened_whatever_field_says_it() -> None:
    events = [
        event("late", {"lastTimestamp": "2024-01-01T00:00:03Z"}),
        event("micro", {"eventTime": "2024-01-01T00:00:02.500000Z"}),
        event(
            "created",
            {"metadata": {"name": "created", "creationTimestamp": "2024-01-01T00:00:01Z"}},
        ),
        event("undated", {}),
    ]
    names = [e["metadata"]["name"] for e in diagnostics.sorted_events(events)]
    assert names == ["undated", "created", "micro", "late"]


def test_event_line_has_time_type_reason_object_count_source_and_message() -> None:
    warning = event(
        "e",
        {"lastTimestamp": "2024-01-01T10:20:30Z"},
        reason="ProvisioningFailed",
        type="Warning",
        count=3,
        source={"component": "csi-provisioner"},
        message="failed to provision:\nno capacity",
    )
    assert diagnostics.format_event(warning) == (
        "10:20:30 Warning ProvisioningFailed PersistentVolumeClaim/data x3 [csi-provisioner]: "
        "failed to provision: | no capacity"
    )


def test_log_tail_starts_at_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "kubelet.log"
    log.write_text("".join(f"line {i:03d}\n" for i in range(100)))  # 9 bytes a line
    text = diagnostics.read_tail(log, 50)
    assert text.splitlines() == [f"line {i:03d}" for i in range(95, 100)]
    assert diagnostics.read_tail(log, 10_000).startswith("line 000\n")


def test_log_sections_leave_out_the_drivers_routine_call_records(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    routine = '{"code":"OK","method":"GetCapacity","request":{},"seq":1}'
    failed = '{"code":"UNAVAILABLE","method":"GetCapacity","request":{},"seq":2}'
    created = '{"code":"OK","method":"CreateVolume","request":{"name":"pvc-1"},"seq":3}'
    lines = ["serving on csi.sock", routine, created, routine, failed, routine]
    (logs / "csi-mock-controller.log").write_text("\n".join(lines) + "\n")
    found = diagnostics.collect(target(tmp_path), Limits(log_lines=2), kube=lambda _: FakeKube({}))
    assert sections(found)["log csi-mock-controller"].splitlines() == [
        "[last 2 lines, successful routine calls left out; "
        "a longer tail in logs/csi-mock-controller.log]",
        created,
        failed,
    ]
    assert found.files["logs/csi-mock-controller.log"].splitlines() == lines


def test_section_lines_are_clipped_to_the_width() -> None:
    assert diagnostics.clip("abcdef", 4) == "abc…"
    assert diagnostics.clip("abcd", 4) == "abcd"


def test_logs_are_ordered_driver_and_sidecars_first() -> None:
    names = [
        "etcd",
        "kube-apiserver",
        "kubelet-node-1",
        "csi-attacher",
        "csi-mock-node-node-1",
        "zzz",
        "csi-mock-controller",
        "kube-scheduler",
    ]
    assert sorted(names, key=diagnostics.log_rank) == [
        "csi-mock-controller",
        "csi-mock-node-node-1",
        "csi-attacher",
        "kube-scheduler",
        "kubelet-node-1",
        "kube-apiserver",
        "etcd",
        "zzz",
    ]


# -- diagnostics: fail-safe collection -----------------------------------------------


def test_safely_returns_a_note_instead_of_raising() -> None:
    problems: list[str] = []

    def broken() -> str:
        raise ConnectionRefusedError("connection refused\nmore detail")

    text = diagnostics.safely("events in t-1", broken, problems)
    assert text == "(events in t-1: not collected, ConnectionRefusedError: connection refused)"
    assert problems == ["events in t-1 (ConnectionRefusedError: connection refused)"]


def test_safely_returns_what_the_collector_made() -> None:
    assert diagnostics.safely("x", lambda: "made") == "made"


def test_safely_says_a_skipped_part_was_skipped_without_counting_a_problem() -> None:
    problems: list[str] = []

    def skipped() -> str:
        raise diagnostics.Skipped("the apiserver failed before")

    assert diagnostics.safely("csinodes", skipped, problems) == (
        "(csinodes: skipped, the apiserver failed before)"
    )
    assert problems == []


class FakeKube:
    """Lists objects, plain dicts, by kind and namespace."""

    def __init__(self, objects: dict[tuple[str, str | None], list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.calls: list[tuple[str, str | None]] = []

    def list(self, res: Any, *, namespace: str | None = None) -> Iterable[Any]:
        kind = res._api_info.resource.kind
        self.calls.append((kind, namespace))
        return self.objects.get((kind, namespace), [])


def target(tmp_path: Path, **given: Any) -> ClusterTarget:
    fields: dict[str, Any] = {
        "kubeconfig": tmp_path / "kubeconfig",
        "logs": LogDirectory(tmp_path / "logs"),
        "admin": {},
        "namespace": "t-1",
        "driver_name": "csi-mock.example",
    }
    return ClusterTarget(**{**fields, **given})


class FakeJournal:
    """An admin client that answers the journal query with ``records``, or fails."""

    def __init__(self, records: Sequence[CallRecord] | Exception) -> None:
        self.records = records
        self.limits: list[int] = []

    def journal(self, *, limit: int) -> Sequence[CallRecord]:
        self.limits.append(limit)
        if isinstance(self.records, Exception):
            raise self.records
        return self.records


def sections(found: diagnostics.Diagnostics) -> dict[str, str]:
    return {s.title: s.text for s in found.sections}


def test_an_unreachable_apiserver_is_tried_once_and_noted_in_every_part(tmp_path: Path) -> None:
    connects: list[Path] = []

    def refuse(kubeconfig: Path) -> Any:
        connects.append(kubeconfig)
        raise ConnectionRefusedError("connection refused")

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "kube-scheduler.log").write_text("scheduled\n")
    found = diagnostics.collect(target(tmp_path), kube=refuse)
    assert connects == [tmp_path / "kubeconfig"]
    shown = sections(found)
    assert shown["events t-1"] == (
        "(events in t-1: not collected, ConnectionRefusedError: connection refused)"
    )
    assert shown["events csi-mock"] == "(events in csi-mock: skipped, the apiserver failed before)"
    assert "(csinodes: skipped, the apiserver failed before)" in shown["objects"]
    assert shown["log kube-scheduler"].endswith("\nscheduled")
    assert found.problems == ["events in t-1 (ConnectionRefusedError: connection refused)"]
    assert shown["overview"].splitlines()[2:] == [
        "not collected: events in t-1 (ConnectionRefusedError: connection refused)",
        "the apiserver failed (ConnectionRefusedError: connection refused): "
        "no further API reads were tried",
    ]


def test_an_api_error_costs_only_its_own_kind(tmp_path: Path) -> None:
    class Forbidden(FakeKube):
        def list(self, res: Any, *, namespace: str | None = None) -> Iterable[Any]:
            if res._api_info.resource.kind == "CSINode":
                raise ApiError(status=SimpleNamespace(message="forbidden", code=403))  # type: ignore[arg-type]
            return super().list(res, namespace=namespace)

    kube = Forbidden({})
    found = diagnostics.collect(target(tmp_path), kube=lambda _: kube)
    assert found.problems == ["csinodes (ApiError: forbidden)"]
    assert "csidrivers: 0" in sections(found)["objects"]


def test_a_cluster_without_the_snapshot_crds_skips_those_kinds_without_a_problem(
    tmp_path: Path,
) -> None:
    class NoSnapshots(FakeKube):
        def list(self, res: Any, *, namespace: str | None = None) -> Iterable[Any]:
            if res._api_info.resource.group == "snapshot.storage.k8s.io":
                raise ApiError(status=SimpleNamespace(message="not found", code=404))  # type: ignore[arg-type]
            return super().list(res, namespace=namespace)

    found = diagnostics.collect(target(tmp_path), kube=lambda _: NoSnapshots({}))
    objects = sections(found)["objects"].splitlines()
    assert found.problems == []
    assert (
        "(volumesnapshotcontents: skipped, this cluster does not serve the kind (no CRD))"
        in objects
    )


def test_a_snapshot_content_shows_where_its_creation_and_deletion_are(tmp_path: Path) -> None:
    prefix = "snapshot.storage.kubernetes.io"
    content = {
        "metadata": {
            "name": "snapcontent-1",
            "deletionTimestamp": "2026-11-29T08:46:56Z",
            "finalizers": [f"{prefix}/volumesnapshotcontent-bound-protection"],
            "annotations": {f"{prefix}/volumesnapshot-being-deleted": "yes"},
        },
        "spec": {"driver": "csi-mock.example", "deletionPolicy": "Delete"},
        "status": {"readyToUse": True, "snapshotHandle": "snap-1"},
    }
    snapshot = {
        "metadata": {"name": "snap", "namespace": "t-1"},
        "spec": {"source": {"persistentVolumeClaimName": "data"}},
        "status": {"readyToUse": True, "boundVolumeSnapshotContentName": "snapcontent-1"},
    }
    kube = FakeKube(
        {("VolumeSnapshotContent", None): [content], ("VolumeSnapshot", "t-1"): [snapshot]}
    )
    objects = sections(diagnostics.collect(target(tmp_path), kube=lambda _: kube))["objects"]
    assert "  snap source=data ready=True content=snapcontent-1" in objects.splitlines()
    assert (
        "  snapcontent-1 driver=csi-mock.example policy=Delete ready=True handle=snap-1"
        " annotations=being-deleted deleting-since=2026-11-29T08:46:56Z"
        " finalizers=volumesnapshotcontent-bound-protection" in objects.splitlines()
    )


def test_objects_are_one_line_each_in_the_section_and_yaml_in_the_files(tmp_path: Path) -> None:
    pod = {
        "metadata": {"name": "app", "namespace": "t-1", "managedFields": [{"manager": "x"}]},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                }
            ],
        },
    }
    claim = {
        "metadata": {
            "name": "data",
            "namespace": "t-1",
            "annotations": {"volume.kubernetes.io/selected-node": "node-2"},
        },
        "spec": {"storageClassName": "csi-mock", "resources": {"requests": {"storage": "5Gi"}}},
        "status": {"phase": "Pending"},
    }
    kube = FakeKube({("Pod", "t-1"): [pod], ("PersistentVolumeClaim", "t-1"): [claim]})
    found = diagnostics.collect(target(tmp_path), kube=lambda _: kube)
    objects = sections(found)["objects"].splitlines()
    assert "pods in t-1: 1" in objects
    assert (
        "  app on (unscheduled): Pending; "
        "PodScheduled=False(Unschedulable: 0/3 nodes are available)" in objects
    )
    assert (
        "  data Pending class=csi-mock request=5Gi capacity=- volume=- selected-node=node-2"
        in objects
    )
    assert "persistentvolumes: 0" in objects
    assert found.files["pods.yaml"].startswith("apiVersion: v1\nkind: Pod\nmetadata:\n  name: app")
    assert "managedFields" not in found.files["pods.yaml"]
    assert found.files["persistentvolumes.yaml"] == "# none\n"
    assert ("CSIStorageCapacity", "csi-mock") in kube.calls


def test_a_csinode_without_drivers_is_shown_not_refused(tmp_path: Path) -> None:
    """The kubelet writes ``spec.drivers: null``, which lightkube's typed model refuses."""
    csinode = {"metadata": {"name": "node-1"}, "spec": {"drivers": None}}
    kube = FakeKube({("CSINode", None): [csinode]})
    found = diagnostics.collect(target(tmp_path), kube=lambda _: kube)
    assert "  node-1 drivers: none" in sections(found)["objects"].splitlines()


def test_objects_are_read_as_plain_data_without_changing_how_lightkube_decodes() -> None:
    pods = diagnostics.OBJECT_KINDS[0].resource
    assert pods._api_info.resource.kind == "Pod"
    assert pods({"spec": {"containers": None}})["spec"] == {"containers": None}
    # Not registered: everyone else's from_dict still gives the typed models.
    assert type(from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {}})) is Pod


def test_events_of_both_namespaces_in_sections_limited_and_all_in_files(tmp_path: Path) -> None:
    events = [event(f"e{i}", {"lastTimestamp": f"2024-01-01T00:00:{i:02d}Z"}) for i in range(40)]
    kube = FakeKube({("Event", "t-1"): list(reversed(events))})
    found = diagnostics.collect(
        target(tmp_path),
        Limits(events=3),
        kube=lambda _: kube,
        files_at="reports/diagnostics/x",
    )
    lines = sections(found)["events t-1"].splitlines()
    assert lines[0] == (
        "[last 3 of 40 events in namespace t-1, oldest first, times UTC; "
        "all in reports/diagnostics/x/events-t-1.txt]"
    )
    assert [line.split(": ")[-1] for line in lines[1:]] == [
        "message of e37",
        "message of e38",
        "message of e39",
    ]
    assert len(found.files["events-t-1.txt"].splitlines()) == 40
    assert sections(found)["events csi-mock"].startswith("[0 events in namespace csi-mock")


def test_journal_merges_instances_by_time_hides_routine_calls_and_notes_dead_ones(
    tmp_path: Path,
) -> None:
    controller = FakeJournal(
        [
            record("GetCapacity", at=T0),
            record("CreateVolume", at=T0 + 1, request={"name": "pvc-1"}),
            record("GetCapacity", code="UNAVAILABLE", at=T0 + 3),
        ]
    )
    admin = {
        "controller": controller,
        "node-1": FakeJournal([record("NodeStageVolume", at=T0 + 2)]),
        "node-2": FakeJournal(ConnectionRefusedError("no node-2.sock")),
    }
    found = diagnostics.collect(
        target(tmp_path, admin=admin), Limits(journal_fetch=77), kube=lambda _: FakeKube({})
    )
    assert sections(found)["driver journal"].splitlines() == [
        "[3 driver calls of all instances, oldest first, times UTC; "
        "per instance in journal-<instance>.txt]",
        "(journal of node-2: not collected, ConnectionRefusedError: no node-2.sock)",
        "22:13:21.123 [controller] CreateVolume OK 0.0ms name=pvc-1",
        "22:13:22.123 [node-1] NodeStageVolume OK 0.0ms",
        "22:13:23.123 [controller] GetCapacity UNAVAILABLE 0.0ms",
        "(1 successful routine calls not shown: ControllerGetCapabilities, GetCapacity, "
        "GetPluginCapabilities, GetPluginInfo, NodeGetCapabilities, NodeGetVolumeStats, Probe)",
    ]
    assert len(found.files["journal-controller.txt"].splitlines()) == 3
    assert controller.limits == [77]


def test_no_driver_means_no_journal(tmp_path: Path) -> None:
    found = diagnostics.collect(target(tmp_path), kube=lambda _: FakeKube({}))
    assert sections(found)["driver journal"] == "(no driver deployed: no journal)"


def test_write_replaces_what_an_earlier_run_left(tmp_path: Path) -> None:
    stale = tmp_path / "d" / "events-old.txt"
    stale.parent.mkdir()
    stale.write_text("old")
    found = diagnostics.Diagnostics(files={"logs/etcd.log": "etcd\n"})
    diagnostics.write(found, tmp_path / "d", {"failure.txt": "boom\n"})
    assert sorted(
        p.relative_to(tmp_path / "d").as_posix() for p in (tmp_path / "d").rglob("*.*")
    ) == [
        "failure.txt",
        "logs/etcd.log",
    ]


# -- diagnostics: where a cluster's sources are --------------------------------------


class FakeDriver:
    """A driver whose components have the given logs; a log that is an exception
    raises it when read."""

    def __init__(self, logs: dict[str, str | Exception]) -> None:
        self.spec = SimpleNamespace(name="csi-mock.example", namespace="csi-mock")
        self.logs = logs

    def components(self) -> list[str]:
        return list(self.logs)

    def component_log(self, component: str) -> str:
        log = self.logs[component]
        if isinstance(log, Exception):
            raise log
        return log


class FakeAdmin(FakeJournal):
    def __init__(self) -> None:
        super().__init__([])
        self.closed = False

    def close(self) -> None:
        self.closed = True


def fake_cluster(tmp_path: Path, log_dir: Path | None, driver: FakeDriver | None) -> Any:
    clients = {"controller": FakeAdmin(), "node-1": FakeAdmin()}
    return SimpleNamespace(
        kubeconfig=tmp_path / "kubeconfig",
        log_dir=log_dir,
        driver=driver,
        default_driver=SimpleNamespace(name="default.example", namespace="csi-mock"),
        admin_instances=lambda: clients,
        clients=clients,
    )


def test_a_cluster_with_a_log_directory_gives_every_log_in_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "etcd.log").write_text("etcd up\n")
    driver = FakeDriver({"csi-provisioner": "from the driver\n"})
    cluster = fake_cluster(tmp_path, logs, driver)
    with diagnostics.cluster_target(cluster, "t-1") as found_target:
        found = diagnostics.collect(found_target, kube=lambda _: FakeKube({}))
    assert [s.title for s in found.sections if s.title.startswith("log ")] == ["log etcd"]
    assert f"component logs: {logs}" in sections(found)["overview"].splitlines()


def test_a_cluster_without_a_log_directory_gives_its_drivers_component_logs(
    tmp_path: Path,
) -> None:
    driver = FakeDriver(
        {
            "csi-attacher": "attacher started\n",
            "csi-mock-node-node-1": OSError("no such pod"),
            "csi-mock-controller": "controller started\nserving\n",
        }
    )
    cluster = fake_cluster(tmp_path, None, driver)
    with diagnostics.cluster_target(cluster, "t-1") as found_target:
        found = diagnostics.collect(found_target, kube=lambda _: FakeKube({}))
    shown = sections(found)
    assert [s.title for s in found.sections if s.title.startswith("log ")] == [
        "log csi-mock-controller",
        "log csi-mock-node-node-1",
        "log csi-attacher",
    ]
    assert shown["log csi-mock-controller"].splitlines()[1:] == ["controller started", "serving"]
    assert found.files["logs/csi-attacher.log"] == "attacher started\n"
    assert shown["log csi-mock-node-node-1"] == (
        "(log csi-mock-node-node-1.log: not collected, OSError: no such pod)"
    )
    overview = shown["overview"].splitlines()
    assert "component logs: the components of driver csi-mock.example" in overview
    assert overview[0].startswith("driver csi-mock.example, test namespace t-1")


def test_driver_log_tail_starts_at_a_whole_line() -> None:
    driver = FakeDriver({"csi-provisioner": "".join(f"line {i:03d}\n" for i in range(100))})
    text = DriverLogs(cast(Any, driver)).tail("csi-provisioner", 50)
    assert text.splitlines() == [f"line {i:03d}" for i in range(95, 100)]


class FakePodLogs:
    """The API's pods and their logs: (namespace, labels) -> pod names; pod -> log."""

    def __init__(self, pods: dict[str, list[str]], logs: dict[str, str]) -> None:
        self.pods, self.logs = pods, logs

    def list(self, res: Any, *, namespace: str | None = None, labels: Any = None) -> list[Any]:
        key = f"{namespace}/{','.join(f'{k}={v}' for k, v in sorted(labels.items()))}"
        return [SimpleNamespace(metadata=SimpleNamespace(name=n)) for n in self.pods.get(key, [])]

    def log(self, name: str, *, namespace: str | None = None) -> list[str]:
        return self.logs[f"{namespace}/{name}"].splitlines(keepends=True)


def test_without_a_log_directory_the_clusters_snapshot_controller_log_comes_beside_the_drivers(
    tmp_path: Path,
) -> None:
    api = FakePodLogs(
        {"kube-system/app.kubernetes.io/name=snapshot-controller": ["snapshot-controller-7d9"]},
        {"kube-system/snapshot-controller-7d9": "set annotation being-deleted\n"},
    )
    logs = DriverLogs(cast(Any, FakeDriver({"csi-snapshotter": "cut\n"})), kube=lambda: api)

    assert logs.components() == ["csi-snapshotter", "snapshot-controller"]
    assert logs.tail("snapshot-controller", 1000) == "set annotation being-deleted\n"
    assert logs.tail("csi-snapshotter", 1000) == "cut\n"


def test_a_cluster_without_a_snapshot_controller_or_an_api_gives_the_drivers_logs_only() -> None:
    driver = cast(Any, FakeDriver({"csi-snapshotter": "cut\n"}))

    def no_api() -> Any:
        raise ConnectionRefusedError("connection refused")

    assert DriverLogs(driver, kube=lambda: FakePodLogs({}, {})).components() == ["csi-snapshotter"]
    assert DriverLogs(driver, kube=no_api).components() == ["csi-snapshotter"]


def test_a_cluster_without_logs_or_driver_says_so(tmp_path: Path) -> None:
    cluster = fake_cluster(tmp_path, None, None)
    with diagnostics.cluster_target(cluster) as found_target:
        found = diagnostics.collect(found_target, kube=lambda _: FakeKube({}))
    assert sections(found)["logs"] == "(no component logs)"
    assert sections(found)["overview"].startswith("driver default.example, test namespace (none)")


def test_the_admin_clients_of_a_cluster_target_are_closed_after_use(tmp_path: Path) -> None:
    cluster = fake_cluster(tmp_path, None, FakeDriver({}))
    with diagnostics.cluster_target(cluster) as found_target:
        assert set(found_target.admin) == {"controller", "node-1"}
        assert not any(client.closed for client in cluster.clients.values())
    assert all(client.closed for client in cluster.clients.values())
