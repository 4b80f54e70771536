"""The call journal: the last N call records, queryable."""

from __future__ import annotations

import fnmatch
import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from csi_mock.observe.calls import CallRecord

DEFAULT_CAPACITY = 10_000


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
        return self.after is None or record.seq > self.after


class Journal:
    """A bounded ring buffer of CallRecords; also a RecordSink."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._records: deque[CallRecord] = deque(maxlen=capacity)
        self._seq = itertools.count(1)

    def __call__(self, record: CallRecord) -> None:
        record.seq = next(self._seq)
        self._records.append(record)

    @property
    def capacity(self) -> int:
        return self._records.maxlen or 0

    def query(self, query: JournalQuery) -> list[CallRecord]:
        found: Iterable[CallRecord] = (r for r in self._records if query.accepts(r))
        result = list(found)
        if query.limit is not None:
            result = result[-query.limit :] if query.limit else []
        return result
