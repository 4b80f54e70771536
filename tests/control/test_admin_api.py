"""The admin API over its real unix socket (and TCP), through the typed client."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from csi_mock.admin import (
    TOKEN_HEADER,
    AdminClient,
    AdminConnectionError,
    AdminError,
    AsyncAdminClient,
    Limits,
    RegistrationView,
)
from csi_mock.admin.auth import TokenError
from csi_mock.admin.server import AdminServer, ListenError
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto.pluginregistration_pb2 import InfoRequest, RegistrationStatus
from csi_mock.proto.pluginregistration_pb2_grpc import RegistrationStub
from tests.control.conftest import AdminDriver, StartAdmin
from tests.driver.conftest import driver_config
from tests.driver.csi_helpers import (
    GiB,
    MiB,
    capacity,
    create_volume,
    mount_capability,
    publish,
    stage,
)

TOKEN = "s3cret-token-0123456789"


@asynccontextmanager
async def raw_http(driver: AdminDriver) -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP on the admin socket, for what the typed client never sends."""
    transport = httpx.AsyncHTTPTransport(uds=str(driver.server.socket_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://csi-mock") as client:
        yield client


async def refused(call: Any) -> AdminError:
    with pytest.raises(AdminError) as raised:
        await call
    return raised.value


# -- health ------------------------------------------------------------------------------


async def test_healthz_reports_ready_once_the_state_is_loaded(with_admin: AdminDriver) -> None:
    health = await with_admin.admin.health()

    assert (health.ready, health.failure) == (True, None)


async def test_healthz_is_503_with_the_failure_while_not_ready(with_admin: AdminDriver) -> None:
    with_admin.driver.readiness.ready = False
    with_admin.driver.readiness.failure = "loading state failed: disk on fire"
    try:
        async with raw_http(with_admin) as http:
            response = await http.get("/healthz")
        health = await with_admin.admin.health()
    finally:
        with_admin.driver.readiness.ready = True
        with_admin.driver.readiness.failure = None

    assert response.status_code == 503
    assert (health.ready, health.failure) == (False, "loading state failed: disk on fire")


async def start_registering(start_admin: StartAdmin, tmp: Path) -> tuple[AdminDriver, Path]:
    """A driver that registers with the kubelet, and its registration socket."""
    registry = tmp / "plugins_registry"
    node = {
        "id": "node-1",
        "mount": "directory",
        "registration": {"plugins_registry": str(registry)},
    }
    return await start_admin(node=node), registry / "csi-mock.example-reg.sock"


async def test_healthz_shows_the_kubelet_registration_as_the_kubelet_reports_it(
    start_admin: StartAdmin, short_tmp_path: Path
) -> None:
    driver, socket_path = await start_registering(start_admin, short_tmp_path)

    before = await driver.admin.health()
    async with grpc.aio.insecure_channel(f"unix://{socket_path}") as channel:
        await RegistrationStub(channel).NotifyRegistrationStatus(
            RegistrationStatus(plugin_registered=False, error="CSINode update failed")
        )
    async with raw_http(driver) as http:
        refused_json = (await http.get("/healthz")).json()
    after_refusal = await driver.admin.health()

    assert before.registration == RegistrationView(str(socket_path), None, None)
    assert refused_json["registration"] == {
        "socket": str(socket_path),
        "registered": False,
        "error": "CSINode update failed",
    }
    assert after_refusal.ready  # the CSI socket still serves
    assert after_refusal.registration == RegistrationView(
        str(socket_path), False, "CSINode update failed"
    )


async def test_healthz_shows_no_registration_when_the_driver_does_not_register(
    with_admin: AdminDriver,
) -> None:
    async with raw_http(with_admin) as http:
        health = (await http.get("/healthz")).json()

    assert health == {"ready": True, "failure": None, "registration": None}


async def test_a_renewed_registration_is_a_new_socket_that_answers_with_the_new_limit(
    start_admin: StartAdmin, short_tmp_path: Path
) -> None:
    driver, socket_path = await start_registering(start_admin, short_tmp_path)
    async with grpc.aio.insecure_channel(f"unix://{socket_path}") as channel:
        await RegistrationStub(channel).NotifyRegistrationStatus(
            RegistrationStatus(plugin_registered=True)
        )
    first = socket_path.stat()
    await driver.admin.set_limits(max_volumes_per_node=3)

    renewed = await driver.admin.renew_registration()

    second = socket_path.stat()
    # The kubelet's plugin watcher tells a new socket by its creation.
    assert (second.st_ino, second.st_ctime_ns) != (first.st_ino, first.st_ctime_ns)
    assert renewed == RegistrationView(str(socket_path), None, None)  # no verdict yet
    async with grpc.aio.insecure_channel(f"unix://{socket_path}") as channel:
        info = await RegistrationStub(channel).GetInfo(InfoRequest())
    assert info.name == "csi-mock.example"
    reply = await driver.csi.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert reply.max_volumes_per_node == 3


async def test_renewing_a_registration_the_driver_does_not_make_is_a_409(
    with_admin: AdminDriver,
) -> None:
    error = await refused(with_admin.admin.renew_registration())

    assert error.status == 409
    assert "does not register with the kubelet" in error.message


# -- faults ------------------------------------------------------------------------------


async def test_a_posted_rule_is_created_listed_shown_and_removed_with_its_counters(
    with_admin: AdminDriver,
) -> None:
    admin = with_admin.admin
    rule = await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=1)
    assert (rule.method, rule.error and rule.error.code, rule.times) == (
        "CreateVolume",
        "RESOURCE_EXHAUSTED",
        1,
    )
    assert (rule.matched, rule.fired) == (0, 0)

    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(with_admin.csi, "pvc-1")
    await create_volume(with_admin.csi, "pvc-1")

    assert [r.id for r in await admin.faults()] == [rule.id]
    shown = await admin.fault(rule.id)
    assert (shown.matched, shown.fired) == (2, 1)
    removed = await admin.remove_fault(rule.id)
    assert (removed.matched, removed.fired) == (2, 1)
    assert await admin.faults() == []


async def test_posting_a_rule_answers_201_with_the_rule(with_admin: AdminDriver) -> None:
    async with raw_http(with_admin) as http:
        response = await http.post(
            "/v1/faults", json={"method": "GetCapacity", "delay": 0.1, "id": "slow"}
        )

    assert response.status_code == 201
    assert response.json() == {
        "id": "slow",
        "method": "GetCapacity",
        "delay": 0.1,
        "matched": 0,
        "fired": 0,
    }


async def test_every_rule_field_round_trips_through_the_api(with_admin: AdminDriver) -> None:
    rule = await with_admin.admin.add_fault(
        "Create*",
        id="full",
        error={"code": "unavailable", "message": "try later"},
        delay=0.5,
        volume="pvc-*",
        node="node-?",
        parameters={"kind": "mirrored"},
        topology={"zone": "a"},
        times=3,
        skip=1,
        probability=0.5,
        seed=9,
    )

    assert rule == await with_admin.admin.fault("full")
    assert rule.error is not None
    assert (rule.error.code, rule.error.message) == ("UNAVAILABLE", "try later")
    assert (rule.delay, rule.volume, rule.node) == (0.5, "pvc-*", "node-?")
    assert (rule.parameters, rule.topology) == ({"kind": "mirrored"}, {"zone": "a"})
    assert (rule.times, rule.skip, rule.probability, rule.seed) == (3, 1, 0.5, 9)


async def test_clearing_removes_every_rule_and_counts_them(with_admin: AdminDriver) -> None:
    await with_admin.admin.add_fault("CreateVolume", delay=0.1)
    await with_admin.admin.add_fault("DeleteVolume", delay=0.1)

    assert await with_admin.admin.clear_faults() == 2
    assert await with_admin.admin.faults() == []


async def test_an_invalid_rule_is_a_400_naming_every_bad_field_and_adds_nothing(
    with_admin: AdminDriver,
) -> None:
    error = await refused(
        with_admin.admin.add_fault("Nope", error={"code": "NOPE"}, times=0)  # type: ignore[typeddict-item]
    )

    assert error.status == 400
    assert error.field == "method"
    assert {p.field for p in error.problems} == {"method", "error.code", "times"}
    assert "'Nope' matches no CSI method" in error.message
    assert await with_admin.admin.faults() == []


async def test_an_override_of_a_field_the_response_lacks_is_a_400_naming_override(
    with_admin: AdminDriver,
) -> None:
    error = await refused(with_admin.admin.add_fault("NodeGetInfo", override={"capacity": 1}))

    assert (error.status, error.field) == (400, "override")
    assert "no field 'capacity'" in error.message


async def test_a_rule_with_a_taken_id_is_a_409_naming_id(with_admin: AdminDriver) -> None:
    await with_admin.admin.add_fault("CreateVolume", id="dup", delay=0.1)

    error = await refused(with_admin.admin.add_fault("DeleteVolume", id="dup", delay=0.1))

    assert (error.status, error.field) == (409, "id")
    assert [r.method for r in await with_admin.admin.faults()] == ["CreateVolume"]


async def test_an_unknown_rule_is_a_404_naming_id(with_admin: AdminDriver) -> None:
    for call in (with_admin.admin.fault("nope"), with_admin.admin.remove_fault("nope")):
        error = await refused(call)
        assert (error.status, error.field) == (404, "id")
        assert "'nope'" in error.message


# -- pools and capacity ------------------------------------------------------------------


async def test_pools_show_their_accounting_per_kind(with_admin: AdminDriver) -> None:
    await create_volume(with_admin.csi, "pvc-1", GiB, requisite=["node-1"])
    await with_admin.admin.consume("node-1", "2Gi")

    pools = await with_admin.admin.pools()

    assert [p.name for p in pools] == ["node-1", "node-2"]
    node1 = pools[0]
    assert node1 == await with_admin.admin.pool("node-1")
    assert node1.segment == {"topology.csi-mock.example/node": "node-1"}
    assert (node1.kinds, node1.allocation) == (["striped", "mirrored"], "pooled")
    assert (node1.total, node1.used, node1.external, node1.free) == (
        10 * GiB,
        GiB,
        2 * GiB,
        7 * GiB,
    )
    assert node1.largest_free_extent == 7 * GiB
    assert node1.max_volume_size == {"striped": 4 * GiB, "mirrored": 3 * GiB + GiB // 2}


async def test_resize_consume_and_release_answer_the_changed_pool(
    with_admin: AdminDriver,
) -> None:
    admin = with_admin.admin

    assert (await admin.resize_pool("node-2", "30Gi")).total == 30 * GiB
    assert (await admin.consume("node-2", 5 * GiB)).free == 25 * GiB
    assert (await admin.release("node-2", "1Gi")).external == 4 * GiB


async def test_an_unknown_pool_is_a_404_naming_name(with_admin: AdminDriver) -> None:
    for call in (
        with_admin.admin.pool("nosuch"),
        with_admin.admin.resize_pool("nosuch", "1Gi"),
        with_admin.admin.consume("nosuch", 1),
        with_admin.admin.release("nosuch", 1),
    ):
        error = await refused(call)
        assert (error.status, error.field) == (404, "name")
        assert "'nosuch'" in error.message


@pytest.mark.parametrize(
    ("size", "fragment"),
    [("10Xi", "is not a quantity"), (-1, "negative"), (True, "not a quantity")],
)
async def test_a_bad_size_is_a_400_naming_size_and_the_pool_is_unchanged(
    with_admin: AdminDriver, size: Any, fragment: str
) -> None:
    error = await refused(with_admin.admin.resize_pool("node-1", size))

    assert (error.status, error.field) == (400, "size")
    assert fragment in error.message
    assert (await with_admin.admin.pool("node-1")).total == 10 * GiB


async def test_a_misspelt_body_field_is_a_400_naming_it(with_admin: AdminDriver) -> None:
    async with raw_http(with_admin) as http:
        response = await http.post("/v1/pools/node-1/resize", json={"sise": "1Gi"})

    assert response.status_code == 400
    assert {p["field"] for p in response.json()["errors"]} == {"size", "sise"}


async def test_capacity_freezes_and_unfreezes(with_admin: AdminDriver) -> None:
    admin = with_admin.admin

    assert await admin.capacity_frozen() is False
    assert await admin.freeze_capacity() is True
    assert await admin.capacity_frozen() is True
    assert await admin.unfreeze_capacity() is False


async def test_capacity_knobs_without_a_controller_are_a_409(start_admin: StartAdmin) -> None:
    driver = await start_admin(mode="node")

    assert await driver.admin.pools() == []
    error = await refused(driver.admin.freeze_capacity())
    assert error.status == 409
    assert "controller service does not run" in error.message


# -- limits ------------------------------------------------------------------------------


async def test_limits_are_read_and_patched(with_admin: AdminDriver) -> None:
    admin = with_admin.admin
    assert await admin.limits() == Limits(max_volumes_per_node=0, attach_limit=0)

    patched = await admin.set_limits(max_volumes_per_node=4)
    assert (patched.max_volumes_per_node, patched.attach_limit) == (4, 0)
    patched = await admin.set_limits(attach_limit=0)
    assert (patched.max_volumes_per_node, patched.attach_limit) == (4, 0)
    patched = await admin.set_limits(max_volumes_per_node=6, attach_limit=2)
    assert (patched.max_volumes_per_node, patched.attach_limit) == (6, 2)
    assert await admin.limits() == patched


async def test_an_attach_limit_above_0_is_also_max_volumes_per_node(
    with_admin: AdminDriver,
) -> None:
    """As the start-up --attach-limit (hostpathplugin): the kubelet then schedules no
    more volumes to the node than the controller attaches."""
    await with_admin.admin.set_limits(max_volumes_per_node=4)

    patched = await with_admin.admin.set_limits(attach_limit=2)

    assert (patched.max_volumes_per_node, patched.attach_limit) == (2, 2)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_volumes_per_node": -1, "attach_limit": 3}, "max_volumes_per_node"),
        ({"attach_limit": "3"}, "attach_limit"),
        ({"attach_limit": 1.5}, "attach_limit"),
        ({"attach_limit": True}, "attach_limit"),
        ({"attach_limits": 3}, "attach_limits"),
    ],
)
async def test_a_bad_limit_is_a_400_naming_it_and_nothing_changes(
    with_admin: AdminDriver, body: dict[str, Any], field: str
) -> None:
    async with raw_http(with_admin) as http:
        response = await http.patch("/v1/limits", json=body)

    assert response.status_code == 400
    assert response.json()["field"] == field
    limits = await with_admin.admin.limits()
    assert (limits.max_volumes_per_node, limits.attach_limit) == (0, 0)


# -- volumes -----------------------------------------------------------------------------


async def test_volumes_page_in_creation_order(with_admin: AdminDriver) -> None:
    for index in range(5):
        await create_volume(with_admin.csi, f"pvc-{index}", 64 * MiB)

    first = await with_admin.admin.volumes(limit=2)
    second = await with_admin.admin.volumes(limit=2, after=first.next_after)
    last = await with_admin.admin.volumes(limit=2, after=second.next_after)

    pages = [first, second, last]
    assert [[v.name for v in page.volumes] for page in pages] == [
        ["pvc-0", "pvc-1"],
        ["pvc-2", "pvc-3"],
        ["pvc-4"],
    ]
    assert last.next_after is None
    everything = await with_admin.admin.volumes()
    assert [v.name for v in everything.volumes] == [f"pvc-{i}" for i in range(5)]
    assert everything.next_after is None


async def test_a_volume_shows_its_attachments_staging_and_publications(
    start_admin: StartAdmin, tmp_path: Path
) -> None:
    driver = await start_admin(attach_required=True)
    csi = driver.csi
    created = await create_volume(csi, "pvc-1", GiB, requisite=["node-1"])
    await create_volume(csi, "pvc-2", GiB)
    attached = await csi.controller.ControllerPublishVolume(
        pb.ControllerPublishVolumeRequest(
            volume_id=created.volume_id, node_id="node-1", volume_capability=mount_capability()
        )
    )
    context = dict(attached.publish_context)
    await stage(csi, created.volume_id, tmp_path / "staging", publish_context=context)
    await publish(
        csi, created.volume_id, tmp_path / "target", tmp_path / "staging", publish_context=context
    )

    volume, other = (await driver.admin.volumes()).volumes

    assert (volume.id, volume.name, volume.pool, volume.size) == (
        created.volume_id,
        "pvc-1",
        "node-1",
        GiB,
    )
    assert (volume.kind, volume.access_type) == ("striped", "mount")
    assert volume.published_nodes == ["node-1"]
    assert volume.attachments[0].readonly is False
    assert volume.staging_path == str(tmp_path / "staging")
    assert volume.target_paths == [str(tmp_path / "target")]
    assert (other.published_nodes, other.staging_path, other.target_paths) == ([], None, [])


async def test_a_bad_page_request_is_a_400_naming_the_parameter(with_admin: AdminDriver) -> None:
    error = await refused(with_admin.admin.volumes(limit=0))

    assert (error.status, error.field) == (400, "limit")


# -- journal -----------------------------------------------------------------------------


async def test_the_journal_answers_filtered_records_with_the_log_line_fields(
    with_admin: AdminDriver,
) -> None:
    csi = with_admin.csi
    rule = await with_admin.admin.add_fault("CreateVolume", code="ABORTED", times=1)
    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(csi, "pvc-1")
    await create_volume(csi, "pvc-1")
    await capacity(csi)

    failed = await with_admin.admin.journal(method="CreateVolume", code="ABORTED")
    assert [(r.method, r.code, r.fault) for r in failed] == [("CreateVolume", "ABORTED", rule.id)]
    assert failed[0].request["name"] == "pvc-1"
    every = await with_admin.admin.journal()
    assert [r.method for r in every] == ["CreateVolume", "CreateVolume", "GetCapacity"]
    assert [r.seq for r in await with_admin.admin.journal(after=every[0].seq)] == [
        r.seq for r in every[1:]
    ]
    assert [r.method for r in await with_admin.admin.journal(limit=1)] == ["GetCapacity"]
    assert len(await with_admin.admin.journal(volume="pvc-*", since=every[0].time)) == 2

    async with raw_http(with_admin) as http:
        raw = (await http.get("/v1/journal", params={"limit": 1})).json()["records"][0]
    assert set(raw) == {
        "time",
        "method",
        "service",
        "request",
        "code",
        "message",
        "duration_ms",
        "fault",
        "seq",
        "whole_request",
        "whole_reply",
    }
    assert raw["whole_request"] is None  # keys mode, the default


async def test_a_bad_journal_query_is_a_400_naming_the_parameter(with_admin: AdminDriver) -> None:
    error = await refused(with_admin.admin.journal(code="NOT_A_CODE"))
    assert (error.status, error.field) == (400, "code")

    async with raw_http(with_admin) as http:
        response = await http.get("/v1/journal", params={"limit": "many"})
    assert (response.status_code, response.json()["field"]) == (400, "limit")


# -- metrics -----------------------------------------------------------------------------


async def test_metrics_count_the_rpcs_made_by_method_and_code(with_admin: AdminDriver) -> None:
    csi = with_admin.csi
    rule = await with_admin.admin.add_fault("CreateVolume", code="ABORTED", times=1)
    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(csi, "pvc-0")
    for index in range(2):
        await create_volume(csi, f"pvc-{index}", GiB, requisite=["node-1"])
    for _ in range(3):
        await capacity(csi)

    async with raw_http(with_admin) as http:
        response = await http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("csi_mock_rpc_total", method="CreateVolume", code="OK") == 2
    assert value("csi_mock_rpc_total", method="CreateVolume", code="ABORTED") == 1
    assert value("csi_mock_rpc_total", method="GetCapacity", code="OK") == 3
    assert value("csi_mock_rpc_duration_seconds_count", method="GetCapacity", code="OK") == 3
    assert value("csi_mock_faults_fired_total", rule=rule.id, method="CreateVolume") == 1
    assert value("csi_mock_pool_used_bytes", pool="node-1") == 2 * GiB
    assert value("csi_mock_pool_free_bytes", pool="node-1") == 8 * GiB
    assert value("csi_mock_pool_total_bytes", pool="node-2") == 20 * GiB
    assert await with_admin.admin.metrics_text() == response.text


# -- transport and errors ----------------------------------------------------------------


async def test_unknown_endpoints_and_methods_answer_json_errors(with_admin: AdminDriver) -> None:
    async with raw_http(with_admin) as http:
        missing = await http.get("/v1/nothing")
        wrong = await http.put("/v1/faults")
        not_json = await http.post("/v1/faults", content=b"{not json")
        not_object = await http.post("/v1/faults", json=[1, 2])

    assert (missing.status_code, missing.json()["error"]) == (404, "no endpoint /v1/nothing")
    assert wrong.status_code == 405
    assert "allowed" in wrong.json()["error"]
    assert not_json.status_code == 400
    assert "not valid JSON" in not_json.json()["error"]
    assert (not_object.status_code, not_object.json()["error"]) == (
        400,
        "the body must be a JSON object",
    )


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param(b'{"size": "\xff"}', "not UTF-8", id="not-utf-8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested too deeply", id="deep-nesting"),
    ],
)
async def test_a_body_that_cannot_be_read_is_a_400_and_changes_nothing(
    with_admin: AdminDriver, body: bytes, fragment: str
) -> None:
    # Found by tests/fuzz: UnicodeDecodeError and RecursionError were 500s.
    async with raw_http(with_admin) as http:
        response = await http.post("/v1/pools/node-1/resize", content=body)

    assert response.status_code == 400
    assert fragment in response.json()["error"]
    assert (await with_admin.admin.pool("node-1")).total == 10 * GiB


async def test_an_integer_too_long_to_read_is_a_400_naming_its_key(
    with_admin: AdminDriver,
) -> None:
    # Found by tests/fuzz: int() refuses more than 4300 digits, and json.loads' ValueError
    # was a 500.
    async with raw_http(with_admin) as http:
        response = await http.post(
            "/v1/pools/node-1/resize", content=b'{"size": ' + b"1" * 5000 + b"}"
        )
        limits = await http.patch("/v1/limits", content=b'{"attach_limit": -' + b"9" * 5000 + b"}")

    assert (response.status_code, response.json()["field"]) == (400, "size")
    assert (limits.status_code, limits.json()["field"]) == (400, "attach_limit")
    assert (await with_admin.admin.pool("node-1")).total == 10 * GiB


async def test_a_volumes_page_after_beyond_int64_is_a_400_naming_after(
    with_admin: AdminDriver,
) -> None:
    # Found by tests/fuzz: SQLite's OverflowError was a 500.
    async with raw_http(with_admin) as http:
        response = await http.get("/v1/volumes", params={"after": str(2**63)})

    assert (response.status_code, response.json()["field"]) == (400, "after")


async def test_an_empty_unknown_key_is_named(with_admin: AdminDriver) -> None:
    # Found by tests/fuzz: the key "" was reported as no field at all.
    async with raw_http(with_admin) as http:
        response = await http.patch("/v1/limits", json={"": 1})

    assert response.status_code == 400
    assert response.json()["field"] == ""
    assert response.json()["error"] == "'': unknown field"


async def test_the_sync_client_mirrors_the_async_one(with_admin: AdminDriver) -> None:
    def use_sync_client() -> tuple[str, int, bool, int]:
        with AdminClient(with_admin.server.socket_path) as admin:
            rule = admin.add_fault("GetCapacity", delay=0.01)
            pool = admin.resize_pool("node-1", "12Gi")
            frozen = admin.freeze_capacity()
            try:
                admin.pool("nosuch")
            except AdminError as error:
                status = error.status
            return rule.method, pool.total, frozen, status

    assert await asyncio.to_thread(use_sync_client) == ("GetCapacity", 12 * GiB, True, 404)


async def test_a_client_on_a_missing_socket_raises_a_connection_error(tmp_path: Path) -> None:
    async with AsyncAdminClient(tmp_path / "missing.sock") as admin:
        with pytest.raises(AdminConnectionError, match="cannot reach the admin API"):
            await admin.health()


async def test_start_replaces_a_stale_socket_and_stop_removes_it(start_admin: StartAdmin) -> None:
    driver = await start_admin()
    path = driver.server.socket_path
    await driver.server.stop()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()

    await driver.server.start()
    assert (await driver.admin.health()).ready
    assert path.stat().st_mode & 0o777 == 0o600
    await driver.server.stop()
    assert not path.exists()


async def test_stopping_waits_at_most_the_grace_for_a_stalled_request(
    start_admin: StartAdmin,
) -> None:
    driver = await start_admin()  # the fixture's grace is 1 second
    never = asyncio.Event()

    async def stalled_body() -> AsyncIterator[bytes]:
        yield b'{"method": "CreateVolume", '
        await never.wait()

    async with raw_http(driver) as http:
        posting = asyncio.create_task(http.post("/v1/faults", content=stalled_body()))
        await asyncio.sleep(0.1)  # the handler is now waiting for the rest of the body
        started = time.monotonic()
        await driver.server.stop()
        stopped_after = time.monotonic() - started
        posting.cancel()  # the client is still busy sending the body that never ends
        with pytest.raises(asyncio.CancelledError):
            await posting

    assert 0.5 < stopped_after < 3
    assert driver.driver.faults.rules() == []
    assert not driver.server.socket_path.exists()


async def test_a_port_in_use_stops_start_up_naming_admin_tcp(start_admin: StartAdmin) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(ListenError, match=f"admin.tcp: cannot listen on 127.0.0.1:{port}"):
            await start_admin(admin={"tcp": f"127.0.0.1:{port}", "token": TOKEN})


# -- TCP and the token -------------------------------------------------------------------


async def test_tcp_requires_the_bearer_token(start_admin: StartAdmin) -> None:
    driver = await start_admin(admin={"tcp": "127.0.0.1:0", "token": TOKEN})
    assert driver.server.tcp_address is not None
    host, port = driver.server.tcp_address
    url = f"http://{host}:{port}"

    async with httpx.AsyncClient(base_url=url) as http:
        missing = await http.get("/v1/limits")
        wrong = await http.get("/v1/limits", headers={"Authorization": "Bearer not-the-token"})
        right = await http.get("/v1/limits", headers={"Authorization": f"Bearer {TOKEN}"})
        proxied = await http.get("/v1/limits", headers={"X-CSI-Mock-Token": TOKEN})

    assert (missing.status_code, missing.json()["field"]) == (401, "Authorization")
    assert "bearer token is required" in missing.json()["error"]
    assert (wrong.status_code, wrong.json()["error"]) == (401, "the bearer token is not valid")
    assert (right.status_code, proxied.status_code) == (200, 200)
    async with AsyncAdminClient(url=url, token=TOKEN) as admin:
        assert (await admin.health()).ready
    async with AsyncAdminClient(url=url, token=TOKEN, token_header=TOKEN_HEADER) as admin:
        assert (await admin.limits()).attach_limit == 0
    async with AsyncAdminClient(url=url, token="wrong-token-wrong-token") as admin:
        assert (await refused(admin.pools())).status == 401
    assert (await driver.admin.health()).ready  # the unix socket needs no token


async def test_the_token_can_come_from_a_file(start_admin: StartAdmin, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    driver = await start_admin(admin={"tcp": "127.0.0.1:0", "token_file": str(token_file)})
    assert driver.server.tcp_address is not None
    host, port = driver.server.tcp_address

    async with AsyncAdminClient(url=f"http://{host}:{port}", token=TOKEN) as admin:
        assert await admin.capacity_frozen() is False


async def test_an_unreadable_token_file_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    from csi_mock.driver import Driver

    config = driver_config(
        tmp_path, admin={"tcp": "127.0.0.1:0", "token_file": str(tmp_path / "absent")}
    )
    driver = Driver.open(config)
    try:
        with pytest.raises(TokenError, match=r"admin\.token_file: cannot read"):
            await AdminServer(driver).start()
        assert not config.admin_socket_path.exists()
    finally:
        driver.close()


# -- atomicity under concurrency ---------------------------------------------------------


async def test_counters_and_pools_stay_exact_under_concurrent_rpcs_and_rule_changes(
    with_admin: AdminDriver,
) -> None:
    csi, admin = with_admin.csi, with_admin.admin
    calls, fails = 200, 50
    steady = await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=fails)

    async def create(index: int) -> str:
        try:
            await create_volume(csi, f"pvc-{index}", 64 * MiB)
        except grpc.aio.AioRpcError as error:
            return error.code().name
        return "OK"

    async def churn() -> list[Any]:
        """Add and remove a delaying rule behind `steady`, again and again."""
        removed = []
        for round_ in range(25):
            rule = await admin.add_fault("CreateVolume", delay=0.001, id=f"churn-{round_}")
            await asyncio.sleep(0.002)
            removed.append(await admin.remove_fault(rule.id))
        return removed

    codes, removed = await asyncio.gather(
        asyncio.gather(*(create(i) for i in range(calls))), churn()
    )

    assert sorted(set(codes)) == ["OK", "RESOURCE_EXHAUSTED"]
    assert codes.count("RESOURCE_EXHAUSTED") == fails
    final = await admin.fault(steady.id)
    assert (final.matched, final.fired) == (calls, fails)
    journal = await admin.journal(method="CreateVolume")
    assert len(journal) == calls
    assert sum(r.fault == steady.id for r in journal) == fails
    for rule in removed:
        assert rule.fired == sum(r.fault == rule.id for r in journal), rule.id
        assert rule.matched >= rule.fired
    assert any(rule.fired for rule in removed), "no churn rule ever fired: no overlap tested"

    pools = await admin.pools()
    volumes = (await admin.volumes()).volumes
    assert len(volumes) == calls - fails
    assert sum(p.used for p in pools) == sum(v.allocation for v in volumes)
    assert sum(p.used for p in pools) == (calls - fails) * 64 * MiB
    assert all(p.free == p.total - p.used - p.external for p in pools)
    assert (await capacity(csi)).available_capacity == sum(p.free for p in pools)
