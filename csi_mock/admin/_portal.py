"""A private event loop on a daemon thread, for running coroutines from sync code.

The sync admin client runs the async client's coroutines here (as kr8s does), so
that it works from any thread, inside a running event loop or outside one. One loop
serves the whole process; a forked child starts its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


class _Portal:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=self._loop.run_forever, name="csi-mock-admin-client", daemon=True
        )
        thread.start()

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the request too
            raise


_lock = threading.Lock()
_portal: _Portal | None = None


def run_blocking(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run `coroutine` on the private loop and wait for its result (or exception)."""
    global _portal
    with _lock:
        if _portal is None or _portal.pid != os.getpid():
            _portal = _Portal()
        portal = _portal
    return portal.run(coroutine)
