"""The call journal: the last N call records, queryable."""

from __future__ import annotations

import fnmatch
import itertools
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from csi_mock.observe.calls import CallRecord
from csi_mock.observe.field_path import FieldCondition
from csi_mock.observe.whole_messages import SecretHasher, WholeMessages

DEFAULT_CAPACITY = 10_000
DEFAULT_WHOLE_CAPACITY = 1_000
REPLY_ROOT = "reply"
"""A path starting `reply.` looks into the reply (no CSI request has a field `reply`)."""


@dataclass(frozen=True)
class JournalQuery:
    method: str | None = None
    """Exact name or glob."""
    code: str | None = None
    volume: str | None = None
    """Glob on volume_id or name."""
    node: str | None = None
    since: float | None = None
    """Unix time; records at or after it."""
    after: int | None = None
    """Sequence number; records after it (a cursor for polling)."""
    limit: int | None = None
    where: Sequence[FieldCondition] = ()
    """Conditions on request (or `reply.`) fields, all of which must hold."""

    def accepts(self, record: CallRecord) -> bool:
        if self.method and not fnmatch.fnmatchcase(record.method, self.method):
            return False
        if self.code and record.code != self.code.upper():
            return False
        if self.volume and not any(
            fnmatch.fnmatchcase(str(record.request.get(key, "")), self.volume)
            for key in ("volume_id", "name")
            if record.request.get(key)
        ):
            return False
        if self.node and not fnmatch.fnmatchcase(str(record.request.get("node_id", "")), self.node):
            return False
        if self.since is not None and record.time < self.since:
            return False
        if self.after is not None and record.seq <= self.after:
            return False
        return all(_holds(condition, record) for condition in self.where)


def _holds(condition: FieldCondition, record: CallRecord) -> bool:
    steps = condition.path.steps
    if steps[0] == REPLY_ROOT:
        return record.whole_reply is not None and condition.holds(record.whole_reply, start=1)
    # A record without its whole request (keys mode, or past the whole cap) still
    # answers for its key fields.
    root = record.whole_request if record.whole_request is not None else record.request
    return condition.holds(root)


class Journal:
    """A bounded ring buffer of CallRecords; also a RecordSink.

    With `whole` set, the last `whole_capacity` records keep their whole request and
    reply (secrets hashed); older ones keep their key fields only, so memory stays
    bounded whatever the journal's capacity.
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        whole: bool = False,
        whole_capacity: int = DEFAULT_WHOLE_CAPACITY,
        hasher: SecretHasher | None = None,
    ) -> None:
        self._records: deque[CallRecord] = deque(maxlen=capacity)
        self._seq = itertools.count(1)
        self.hasher = hasher or SecretHasher()
        self.whole_messages = WholeMessages(self.hasher) if whole else None
        """What the call interceptor turns requests and replies into dicts with."""
        self._whole: deque[CallRecord] = deque()
        self._whole_capacity = min(whole_capacity, capacity)
        self._cleared_at = float("-inf")

    def __call__(self, record: CallRecord) -> None:
        if record.time < self._cleared_at:
            return  # a call in flight when the journal was cleared: of the time before
        record.seq = next(self._seq)
        self._records.append(record)
        if record.whole_request is not None or record.whole_reply is not None:
            if len(self._whole) == self._whole_capacity:
                oldest = self._whole.popleft()
                oldest.whole_request = oldest.whole_reply = None
            self._whole.append(record)

    def clear(self) -> None:
        """Forget every record, and the records of the calls in flight now (started
        before, recorded once they answer: a handler that waits on the store lets a
        reset run between its effect and its record); sequence numbers go on from
        where they were."""
        self._cleared_at = time.time()
        self._records.clear()
        self._whole.clear()

    @property
    def capacity(self) -> int:
        return self._records.maxlen or 0

    @property
    def whole_capacity(self) -> int:
        """How many of the latest records keep whole messages (0: key fields only)."""
        return self._whole_capacity if self.whole_messages is not None else 0

    def secret_hash(self, value: str) -> str:
        """What a secret with this value looks like in the journal."""
        return self.hasher.digest(value)

    def query(self, query: JournalQuery) -> list[CallRecord]:
        found: Iterable[CallRecord] = (r for r in self._records if query.accepts(r))
        result = list(found)
        if query.limit is not None:
            result = result[-query.limit :] if query.limit else []
        return result
