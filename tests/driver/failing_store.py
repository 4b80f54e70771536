"""A state store that fails the writes a test names, handed to the backend in place of
the real one (`start_driver(backend_store=failing.around)`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from csi_mock.store.interface import Store


class FailingStore:
    """The real store, except that each method named by fail() raises what a broken
    disk raises (sqlite3.OperationalError) until heal()."""

    def __init__(self) -> None:
        self._store: Store | None = None
        self._failing: dict[str, bool] = {}

    def around(self, store: Store) -> Store:
        """Wrap the driver's store (Driver.open's backend_store)."""
        self._store = store
        return self  # type: ignore[return-value]  # a Store by __getattr__

    def fail(self, method: str, *, after_writing: bool = False) -> None:
        """Make `method` fail from now on; `after_writing`: after it has written, so
        only the transaction's rollback can undo the write."""
        self._failing[method] = after_writing

    def heal(self) -> None:
        self._failing.clear()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)
        if name not in self._failing:
            return real
        return _failing(real, after_writing=self._failing[name])


def _failing(real: Callable[..., Any], *, after_writing: bool) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        if after_writing:
            real(*args, **kwargs)
        raise sqlite3.OperationalError("disk I/O error")

    return fail
