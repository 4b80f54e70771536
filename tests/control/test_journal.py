"""The call journal: a bounded ring of call records and its filters."""

from __future__ import annotations

import time
from typing import Any

from csi_mock.control.journal import Journal, JournalQuery
from csi_mock.observe.calls import CallRecord
from csi_mock.observe.field_path import FieldCondition, parse_condition


def record(
    method: str = "CreateVolume", code: str = "OK", at: float = 1000.0, **request: Any
) -> CallRecord:
    return CallRecord(time=at, method=method, service="Controller", request=request, code=code)


def filled(*records: CallRecord, capacity: int = 100) -> Journal:
    journal = Journal(capacity)
    for each in records:
        journal(each)
    return journal


def seqs(journal: Journal, **query: Any) -> list[int]:
    return [r.seq for r in journal.query(JournalQuery(**query))]


def test_records_are_numbered_in_arrival_order() -> None:
    journal = filled(record(), record(), record())

    assert seqs(journal) == [1, 2, 3]


def test_method_filter_takes_a_name_or_a_glob() -> None:
    journal = filled(record("CreateVolume"), record("DeleteVolume"), record("GetCapacity"))

    assert seqs(journal, method="DeleteVolume") == [2]
    assert seqs(journal, method="*Volume") == [1, 2]


def test_code_filter_ignores_case() -> None:
    journal = filled(record(code="OK"), record(code="RESOURCE_EXHAUSTED"), record(code="OK"))

    assert seqs(journal, code="resource_exhausted") == [2]


def test_volume_filter_globs_the_volume_id_or_the_name() -> None:
    journal = filled(
        record(name="pvc-a"),
        record("DeleteVolume", volume_id="vol-1"),
        record(name="pvc-b"),
        record("GetCapacity"),
    )

    assert seqs(journal, volume="pvc-*") == [1, 3]
    assert seqs(journal, volume="vol-1") == [2]


def test_node_filter_globs_the_node_id() -> None:
    journal = filled(
        record("ControllerPublishVolume", node_id="node-1"),
        record("ControllerPublishVolume", node_id="node-2"),
        record("CreateVolume"),
    )

    assert seqs(journal, node="node-2") == [2]
    assert seqs(journal, node="node-*") == [1, 2]


def test_since_keeps_records_at_or_after_that_time() -> None:
    journal = filled(record(at=10.0), record(at=20.0), record(at=30.0))

    assert seqs(journal, since=20.0) == [2, 3]


def test_after_is_a_cursor_returning_only_newer_records() -> None:
    journal = filled(record(), record(), record())

    assert seqs(journal, after=1) == [2, 3]
    journal(record())
    assert seqs(journal, after=3) == [4]


def test_limit_keeps_the_last_matching_records() -> None:
    journal = filled(*(record() for _ in range(5)))

    assert seqs(journal, limit=2) == [4, 5]
    assert seqs(journal, limit=0) == []


def test_filters_combine() -> None:
    journal = filled(
        record("CreateVolume", "OK", name="pvc-1"),
        record("CreateVolume", "ABORTED", name="pvc-1"),
        record("CreateVolume", "ABORTED", name="pvc-2"),
        record("DeleteVolume", "ABORTED", volume_id="pvc-1"),
    )

    assert seqs(journal, method="CreateVolume", code="ABORTED", volume="pvc-1") == [2]


def test_the_ring_keeps_only_the_newest_records_up_to_its_capacity() -> None:
    journal = filled(*(record() for _ in range(7)), capacity=3)

    assert journal.capacity == 3
    assert seqs(journal) == [5, 6, 7]


# -- whole requests ----------------------------------------------------------------------


def whole_record(method: str = "NodePublishVolume", **request: Any) -> CallRecord:
    made = record(method, **{k: v for k, v in request.items() if k == "volume_id"})
    made.whole_request = request
    made.whole_reply = {}
    return made


def where(*conditions: str) -> tuple[FieldCondition, ...]:
    return tuple(parse_condition(c) for c in conditions)


def test_where_matches_a_field_path_of_the_whole_request() -> None:
    pod = "csi.storage.k8s.io/pod.name"
    journal = filled(
        whole_record(volume_id="vol-1", volume_context={pod: "web-0"}),
        whole_record(volume_id="vol-2", volume_context={pod: "web-1"}),
        whole_record(volume_id="vol-3"),
    )

    assert seqs(journal, where=where(f'volume_context["{pod}"]=web-1')) == [2]
    assert seqs(journal, where=where(f'volume_context["{pod}"]=web-*', "volume_id=vol-1")) == [1]


def test_where_on_a_record_without_its_whole_request_looks_at_its_key_fields() -> None:
    journal = filled(record("DeleteVolume", volume_id="vol-1"), record(volume_id="vol-2"))

    assert seqs(journal, where=where("volume_id=vol-2")) == [2]
    assert seqs(journal, where=where("volume_context.x=*")) == []


def test_a_reply_path_looks_into_the_reply() -> None:
    made = whole_record(volume_id="vol-1")
    made.whole_reply = {"volume": {"capacity_bytes": "1024"}}
    journal = filled(made, whole_record(volume_id="vol-2"))

    assert seqs(journal, where=where("reply.volume.capacity_bytes=1024")) == [1]


def test_only_the_latest_records_keep_their_whole_messages() -> None:
    journal = Journal(10, whole=True, whole_capacity=2)
    for number in range(4):
        journal(whole_record(volume_id=f"vol-{number}"))

    kept = [r.whole_request is not None for r in journal.query(JournalQuery())]
    assert kept == [False, False, True, True]
    assert [r.whole_reply is not None for r in journal.query(JournalQuery())] == kept
    assert journal.whole_capacity == 2


def test_a_keys_journal_keeps_no_whole_messages() -> None:
    assert Journal(10).whole_messages is None
    assert Journal(10).whole_capacity == 0


def test_a_call_in_flight_when_the_journal_is_cleared_leaves_no_record() -> None:
    # A record is published once its call has answered: a handler waiting on the
    # store lets a reset run between its effect and its record.
    journal = filled(record())
    started = time.time() - 0.5
    journal.clear()
    journal(record("DeleteVolume", at=started))
    journal(record("CreateVolume", at=time.time()))

    assert [(r.method, r.seq) for r in journal.query(JournalQuery())] == [("CreateVolume", 2)]
