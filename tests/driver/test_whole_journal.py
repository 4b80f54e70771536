"""The journal with `admin.journal_requests: whole`: every request and reply, secrets hashed.

In-process driver (directory mounts, no root needed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from csi_mock.admin.views import record_to_json
from csi_mock.control.journal import JournalQuery
from csi_mock.observe.calls import CallRecord
from csi_mock.observe.field_path import parse_condition
from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import create_volume, mount_capability, publish_request

POD_NAME = "csi.storage.k8s.io/pod.name"
TOKENS = "csi.storage.k8s.io/serviceAccount.tokens"
STAGE_SECRET = "s3cr3t-stage-value"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.token-value"


@pytest.fixture
async def whole(start_driver: StartDriver) -> RunningDriver:
    return await start_driver(admin={"journal_requests": "whole"})


def records(csi: RunningDriver, method: str) -> list[CallRecord]:
    return csi.driver.journal.query(JournalQuery(method=method))


def everything_shown(csi: RunningDriver) -> str:
    """The journal as the admin API answers it, and as the JSON log lines say it."""
    every = csi.driver.journal.query(JournalQuery())
    return json.dumps([record_to_json(r) for r in every]) + "".join(r.to_json() for r in every)


async def staged(csi: RunningDriver, staging: Path) -> str:
    volume = await create_volume(csi, "pvc-1")
    capability = mount_capability()
    capability.mount.mount_flags.extend(["noatime", 'context="system_u:object_r:x:s0"'])
    await csi.node.NodeStageVolume(
        pb.NodeStageVolumeRequest(
            volume_id=volume.volume_id,
            staging_target_path=str(staging),
            volume_capability=capability,
            secrets={"password": STAGE_SECRET, "user": "admin"},
        )
    )
    return volume.volume_id


async def test_node_publish_records_the_whole_volume_context(
    whole: RunningDriver, staging: Path, target: Path
) -> None:
    volume_id = await staged(whole, staging)
    context = {POD_NAME: "web-0", "csi.storage.k8s.io/pod.namespace": "default"}
    await whole.node.NodePublishVolume(
        publish_request(volume_id, target, staging, volume_context=context)
    )

    (record,) = records(whole, "NodePublishVolume")
    assert record.whole_request is not None
    assert record.whole_request["volume_context"] == context
    assert record.whole_request["target_path"] == str(target)
    assert record.whole_reply == {}
    condition = parse_condition(f'volume_context["{POD_NAME}"]=web-0')
    assert whole.driver.journal.query(JournalQuery(where=(condition,))) == [record]


async def test_node_stage_records_its_secrets_hashed_and_never_in_clear(
    whole: RunningDriver, staging: Path
) -> None:
    await staged(whole, staging)

    (record,) = records(whole, "NodeStageVolume")
    assert record.whole_request is not None
    journal = whole.driver.journal
    assert record.whole_request["secrets"] == {
        "password": journal.secret_hash(STAGE_SECRET),
        "user": journal.secret_hash("admin"),
    }
    assert record.whole_request["volume_capability"]["mount"]["mount_flags"] == [
        "noatime",
        'context="system_u:object_r:x:s0"',
    ]
    assert STAGE_SECRET not in everything_shown(whole)


async def test_a_service_account_token_is_recorded_hashed(
    whole: RunningDriver, staging: Path, target: Path
) -> None:
    volume_id = await staged(whole, staging)
    tokens = json.dumps({"audience": {"token": TOKEN, "expirationTimestamp": "2026-11-27"}})
    await whole.node.NodePublishVolume(
        publish_request(volume_id, target, staging, volume_context={TOKENS: tokens})
    )

    (record,) = records(whole, "NodePublishVolume")
    assert record.whole_request is not None
    assert record.whole_request["volume_context"][TOKENS] == whole.driver.journal.secret_hash(
        tokens
    )
    assert TOKEN not in everything_shown(whole)


async def test_create_volume_records_the_reply_whole(whole: RunningDriver) -> None:
    volume = await create_volume(whole, "pvc-1")

    (record,) = records(whole, "CreateVolume")
    assert record.whole_reply is not None
    assert record.whole_reply["volume"]["volume_id"] == volume.volume_id
    assert record.whole_reply["volume"]["capacity_bytes"] == str(volume.capacity_bytes)


async def test_a_failed_call_records_its_request_but_no_reply(whole: RunningDriver) -> None:
    request = pb.NodeUnstageVolumeRequest(volume_id="", staging_target_path="/x")
    with pytest.raises(Exception):  # noqa: B017 - INVALID_ARGUMENT, not what is tested here
        await whole.node.NodeUnstageVolume(request)

    (record,) = records(whole, "NodeUnstageVolume")
    assert record.code != "OK"
    assert record.whole_request == {"staging_target_path": "/x"}
    assert record.whole_reply is None


async def test_by_default_the_journal_keeps_key_fields_only(
    csi: RunningDriver, staging: Path
) -> None:
    await staged(csi, staging)

    (record,) = records(csi, "NodeStageVolume")
    assert (record.whole_request, record.whole_reply) == (None, None)
    assert "secrets" not in record.request
    assert "whole_request" not in record.to_json()
