"""Fault actions as a CSI client sees them, through the in-process driver."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest

from csi_mock.control.faults import FaultRule, FaultRuleSpec
from csi_mock.control.journal import JournalQuery
from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver
from tests.driver.csi_helpers import GiB, assert_status, capacity, create_volume, list_all


def add_rule(csi: RunningDriver, **spec: Any) -> FaultRule:
    return csi.driver.faults.add(FaultRuleSpec(**spec))


async def test_error_action_fails_the_call_with_the_rules_code_and_message(
    csi: RunningDriver,
) -> None:
    add_rule(
        csi,
        method="CreateVolume",
        error={"code": "RESOURCE_EXHAUSTED", "message": "backend full (injected)"},
    )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-1")

    assert_status(raised, grpc.StatusCode.RESOURCE_EXHAUSTED, "backend full (injected)")


async def test_an_error_action_fails_before_the_handler_so_nothing_changes(
    csi: RunningDriver,
) -> None:
    before = await capacity(csi)
    add_rule(csi, method="CreateVolume", error={"code": "UNAVAILABLE"}, times=1)

    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(csi, "pvc-1")

    assert await list_all(csi) == []
    assert (await capacity(csi)).available_capacity == before.available_capacity


async def test_a_rule_fired_once_lets_the_retry_succeed(csi: RunningDriver) -> None:
    add_rule(csi, method="CreateVolume", error={"code": "RESOURCE_EXHAUSTED"}, times=1)

    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(csi, "pvc-1")
    volume = await create_volume(csi, "pvc-1")

    assert volume.capacity_bytes == GiB


async def test_delay_action_holds_the_call_at_least_that_long_then_serves_it(
    csi: RunningDriver,
) -> None:
    add_rule(csi, method="GetCapacity", delay=0.3)

    started = time.monotonic()
    response = await capacity(csi)
    elapsed = time.monotonic() - started

    assert elapsed >= 0.3
    assert response.available_capacity > 0


async def test_delay_applies_only_to_the_matching_method(csi: RunningDriver) -> None:
    add_rule(csi, method="CreateVolume", delay=2)

    started = time.monotonic()
    await capacity(csi)

    assert time.monotonic() - started < 1


async def test_hang_lasts_until_the_callers_deadline_which_sees_deadline_exceeded(
    csi: RunningDriver,
) -> None:
    add_rule(csi, method="GetCapacity", hang=True)

    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.GetCapacity(pb.GetCapacityRequest(), timeout=0.4)

    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started >= 0.4


async def test_a_hung_call_is_journaled_as_deadline_exceeded(csi: RunningDriver) -> None:
    rule = add_rule(csi, method="GetCapacity", hang=True)

    with pytest.raises(grpc.aio.AioRpcError):
        await csi.controller.GetCapacity(pb.GetCapacityRequest(), timeout=0.3)
    await wait_for_record(csi, "GetCapacity")

    (record,) = csi.driver.journal.query(JournalQuery(method="GetCapacity"))
    assert (record.code, record.fault) == ("DEADLINE_EXCEEDED", rule.id)


async def test_override_replaces_get_capacity_available_and_maximum_volume_size(
    csi: RunningDriver,
) -> None:
    add_rule(
        csi,
        method="GetCapacity",
        override={"available_capacity": 5 * GiB, "maximum_volume_size": 123},
    )

    response = await capacity(csi, "node-1")

    assert response.available_capacity == 5 * GiB
    assert response.maximum_volume_size.value == 123


async def test_override_can_report_no_capacity_while_creation_still_works(
    csi: RunningDriver,
) -> None:
    add_rule(csi, method="GetCapacity", override={"available_capacity": 0})

    assert (await capacity(csi)).available_capacity == 0
    assert (await create_volume(csi, "pvc-1")).capacity_bytes == GiB


async def test_override_replaces_node_get_info_max_volumes_per_node(csi: RunningDriver) -> None:
    add_rule(csi, method="NodeGetInfo", override={"max_volumes_per_node": 7})

    response = await csi.node.NodeGetInfo(pb.NodeGetInfoRequest())

    assert response.max_volumes_per_node == 7
    assert response.node_id == "node-1"


async def test_a_volume_predicate_leaves_other_volumes_alone(csi: RunningDriver) -> None:
    add_rule(csi, method="CreateVolume", volume="pvc-bad-*", error={"code": "INTERNAL"})

    assert (await create_volume(csi, "pvc-good-1")).volume_id
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await create_volume(csi, "pvc-bad-1")

    assert raised.value.code() == grpc.StatusCode.INTERNAL


async def test_the_journal_record_names_the_rule_that_fired(csi: RunningDriver) -> None:
    rule = add_rule(csi, method="CreateVolume", error={"code": "ABORTED"}, times=1)

    with pytest.raises(grpc.aio.AioRpcError):
        await create_volume(csi, "pvc-1")
    await create_volume(csi, "pvc-1")

    failed, succeeded = csi.driver.journal.query(JournalQuery(method="CreateVolume"))
    assert (failed.code, failed.fault, failed.message) == ("ABORTED", rule.id, "injected fault")
    assert (succeeded.code, succeeded.fault) == ("OK", None)


async def test_an_override_is_journaled_as_a_successful_call_with_the_rule(
    csi: RunningDriver,
) -> None:
    rule = add_rule(csi, method="GetCapacity", override={"available_capacity": 1})

    await capacity(csi)

    (record,) = csi.driver.journal.query(JournalQuery(method="GetCapacity"))
    assert (record.code, record.fault) == ("OK", rule.id)


async def wait_for_record(csi: RunningDriver, method: str, timeout: float = 5.0) -> None:
    """The server records a cancelled call just after the client gave up on it."""
    deadline = time.monotonic() + timeout
    while not csi.driver.journal.query(JournalQuery(method=method)):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {method} record in the journal after {timeout}s")
        await asyncio.sleep(0.01)
