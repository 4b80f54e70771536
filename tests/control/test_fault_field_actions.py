"""Fault rules on request and reply fields as a CSI client sees them, in process:
`where` conditions on the whole request, `override` paths into the reply, and `rescue`
turning the handler's failure into success."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock.admin import AdminError
from csi_mock.control.faults import FaultRule
from csi_mock.control.journal import JournalQuery
from csi_mock.fault_rules import FaultRuleSpec
from csi_mock.proto import csi_pb2 as pb
from tests.control.conftest import AdminDriver
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import (
    NODE_KEY,
    GiB,
    assert_status,
    capacity,
    create_volume,
    list_all,
    publish,
    stage,
    stats,
)

POD_NAME = "csi.storage.k8s.io/pod.name"


def add_rule(csi: RunningDriver, **spec: Any) -> FaultRule:
    return csi.driver.faults.add(FaultRuleSpec(**spec))


# -- where -------------------------------------------------------------------------------


async def test_a_size_condition_fails_only_the_create_volume_calls_above_it(
    csi: RunningDriver,
) -> None:
    rule = add_rule(
        csi,
        method="CreateVolume",
        where={"capacity_range.required_bytes": ">1Gi"},
        error={"code": "OUT_OF_RANGE", "message": "too big (injected)"},
    )

    small = await create_volume(csi, "pvc-small", GiB)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-big", 2 * GiB)

    assert small.capacity_bytes == GiB
    assert_status(raised, grpc.StatusCode.OUT_OF_RANGE, "too big (injected)")
    assert [e.volume.capacity_bytes for e in await list_all(csi)] == [GiB]
    assert (rule.matched, rule.fired) == (1, 1)


async def test_a_volume_context_condition_picks_the_pods_publish(
    csi: RunningDriver, tmp_path: Path
) -> None:
    add_rule(
        csi,
        method="NodePublishVolume",
        where={f'volume_context["{POD_NAME}"]': "web-*"},
        error={"code": "PERMISSION_DENIED"},
    )
    (tmp_path / "pods").mkdir()
    targets = {}
    for pod in ("db-0", "web-0"):
        volume = await create_volume(csi, f"pvc-{pod}")
        await stage(csi, volume.volume_id, tmp_path / f"staging-{pod}")
        targets[pod] = (volume.volume_id, tmp_path / "pods" / pod)

    volume_id, target = targets["db-0"]
    await publish(
        csi, volume_id, target, tmp_path / "staging-db-0", volume_context={POD_NAME: "db-0"}
    )
    volume_id, target = targets["web-0"]
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await publish(
            csi, volume_id, target, tmp_path / "staging-web-0", volume_context={POD_NAME: "web-0"}
        )

    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert targets["db-0"][1].exists()
    assert not target.exists()


async def test_a_condition_on_a_field_at_its_default_value_holds(csi: RunningDriver) -> None:
    # proto3 does not send a field at its default; the condition still sees it.
    add_rule(
        csi,
        method="CreateVolume",
        where={"capacity_range.limit_bytes": "==0"},
        error={"code": "ABORTED"},
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-1", GiB)

    assert raised.value.code() == grpc.StatusCode.ABORTED


# -- override paths ----------------------------------------------------------------------


async def test_an_override_path_rewrites_the_created_volumes_capacity_and_topology(
    csi: RunningDriver,
) -> None:
    add_rule(
        csi,
        method="CreateVolume",
        override={
            "volume.capacity_bytes": 5 * GiB,
            "volume.accessible_topology": [{"segments": {"zone": "b"}}],
            'volume.volume_context["injected"]': "yes",
        },
    )

    volume = await create_volume(csi, "pvc-1", GiB)

    assert volume.capacity_bytes == 5 * GiB
    assert [dict(t.segments) for t in volume.accessible_topology] == [{"zone": "b"}]
    assert volume.volume_context["injected"] == "yes"
    assert volume.volume_context["csi-mock/pool"]  # the rest of the reply is the handler's
    (entry,) = await list_all(csi)
    assert entry.volume.capacity_bytes == GiB  # the reply lied; the volume did not change


async def test_an_override_path_into_a_list_rewrites_each_element(csi: RunningDriver) -> None:
    add_rule(
        csi,
        method="CreateVolume",
        override={"volume.accessible_topology.segments": {NODE_KEY: "elsewhere"}},
    )

    volume = await create_volume(csi, "pvc-3")

    assert [dict(t.segments) for t in volume.accessible_topology] == [{NODE_KEY: "elsewhere"}]


async def test_an_override_turns_a_healthy_volume_condition_abnormal(
    csi: RunningDriver, staging: Path, target: Path
) -> None:
    volume = await create_volume(csi, "pvc-st")
    await stage(csi, volume.volume_id, staging)
    await publish(csi, volume.volume_id, target, staging)
    assert (await stats(csi, volume.volume_id, target)).volume_condition.abnormal is False
    add_rule(
        csi,
        method="NodeGetVolumeStats",
        override={"volume_condition.abnormal": True, "volume_condition.message": "disk on fire"},
    )

    report = await stats(csi, volume.volume_id, target)

    assert (report.volume_condition.abnormal, report.volume_condition.message) == (
        True,
        "disk on fire",
    )
    assert report.usage  # untouched


async def test_an_override_setting_a_default_value_still_sends_the_message(
    csi: RunningDriver,
) -> None:
    add_rule(
        csi, method="ListVolumes", override={"entries.status.volume_condition.abnormal": False}
    )
    await create_volume(csi, "pvc-1")

    (entry,) = await list_all(csi)

    assert entry.status.HasField("volume_condition")
    assert entry.status.volume_condition.abnormal is False


async def test_an_index_past_the_end_of_a_list_sets_nothing(csi: RunningDriver) -> None:
    add_rule(csi, method="CreateVolume", override={"volume.accessible_topology[5].segments": {}})

    volume = await create_volume(csi, "pvc-1")

    assert len(volume.accessible_topology) == 1


async def test_a_top_level_wrapper_override_still_sets_its_value(csi: RunningDriver) -> None:
    add_rule(csi, method="GetCapacity", override={"maximum_volume_size": 123})

    assert (await capacity(csi, "node-1")).maximum_volume_size.value == 123


# -- rescue ------------------------------------------------------------------------------


async def test_rescue_turns_not_found_into_ok_with_the_given_reply(
    csi: RunningDriver, target: Path
) -> None:
    rule = add_rule(
        csi,
        method="NodeGetVolumeStats",
        rescue={
            "code": "NOT_FOUND",
            "reply": {"volume_condition": {"abnormal": True, "message": "lost"}},
        },
    )

    report = await stats(csi, "vol-missing", target)

    assert (report.volume_condition.abnormal, report.volume_condition.message) == (True, "lost")
    assert list(report.usage) == []
    (record,) = csi.driver.journal.query(JournalQuery(method="NodeGetVolumeStats"))
    assert (record.code, record.fault) == ("OK", rule.id)
    assert record.message.startswith("rescued NOT_FOUND: ")
    assert "vol-missing" in record.message


async def test_rescue_leaves_other_codes_alone(csi: RunningDriver, target: Path) -> None:
    add_rule(csi, method="NodeGetVolumeStats", rescue={"code": "INTERNAL"})

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stats(csi, "vol-missing", target)

    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_rescue_without_a_code_rescues_any_error_with_an_empty_reply(
    csi: RunningDriver,
) -> None:
    add_rule(csi, method="ControllerGetVolume", rescue={})

    reply = await csi.controller.ControllerGetVolume(
        pb.ControllerGetVolumeRequest(volume_id="vol-missing")
    )

    assert reply == pb.ControllerGetVolumeResponse()


async def test_rescue_leaves_a_successful_reply_as_it_is(csi: RunningDriver) -> None:
    add_rule(csi, method="CreateVolume", rescue={"reply": {"volume": {"volume_id": "fake"}}})

    volume = await create_volume(csi, "pvc-1")

    assert volume.volume_id != "fake"
    (record,) = csi.driver.journal.query(JournalQuery(method="CreateVolume"))
    assert record.message == ""


async def test_an_override_applies_to_a_rescued_reply_too(csi: RunningDriver, target: Path) -> None:
    add_rule(
        csi,
        method="NodeGetVolumeStats",
        rescue={"code": "NOT_FOUND"},
        override={"volume_condition.message": "rewritten"},
    )

    report = await stats(csi, "vol-missing", target)

    assert report.volume_condition.message == "rewritten"


# -- through the admin API ---------------------------------------------------------------


async def test_the_admin_api_refuses_a_bad_path_with_a_400_naming_the_field_and_adds_nothing(
    with_admin: AdminDriver,
) -> None:
    admin = with_admin.admin

    with pytest.raises(AdminError) as where:
        await admin.add_fault("CreateVolume", where={"capacity_range.required": ">1Gi"}, delay=0.1)
    with pytest.raises(AdminError) as override:
        await admin.add_fault("NodeGetVolumeStats", override={"volume_condition.abnormal": 1})
    with pytest.raises(AdminError) as rescue:
        await admin.add_fault("DeleteVolume", rescue={"reply": {"volume": {}}})

    assert (where.value.status, where.value.field) == (400, "where")
    assert "has no field 'required'" in where.value.message
    assert (override.value.status, override.value.field) == (400, "override")
    assert "volume_condition.abnormal: 1 is not a valid bool" in override.value.message
    assert (rescue.value.status, rescue.value.field) == (400, "rescue")
    assert "DeleteVolumeResponse has no field 'volume'" in rescue.value.message
    assert await admin.faults() == []


async def test_where_override_and_rescue_round_trip_through_the_admin_api(
    with_admin: AdminDriver,
) -> None:
    admin = with_admin.admin
    rule = await admin.add_fault(
        "NodeGetVolumeStats",
        where={"volume_id": "vol-*"},
        override={"volume_condition.abnormal": True},
        rescue={"code": "not_found", "reply": {"volume_condition": {"message": "gone"}}},
    )

    assert rule == await admin.fault(rule.id)
    assert rule.where == {"volume_id": "vol-*"}
    assert rule.override == {"volume_condition.abnormal": True}
    assert rule.rescue is not None
    assert (rule.rescue.code, rule.rescue.reply) == (
        "NOT_FOUND",
        {"volume_condition": {"message": "gone"}},
    )
    assert rule.action == "rescue NOT_FOUND + override volume_condition.abnormal=True"


async def test_rules_from_the_config_file_take_the_same_fields(start_driver: StartDriver) -> None:
    csi = await start_driver(
        faults=[
            {
                "method": "CreateVolume",
                "where": {"capacity_range.required_bytes": ">=2Gi"},
                "override": {"volume.capacity_bytes": 1},
            }
        ]
    )

    assert (await create_volume(csi, "pvc-1", GiB)).capacity_bytes == GiB
    assert (await create_volume(csi, "pvc-2", 2 * GiB)).capacity_bytes == 1
