"""Polling for a condition with a deadline, failing with what was expected and what
was last seen, and failing early when a process it depends on dies."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    pass


NOT_TRANSIENT: tuple[type[Exception], ...] = (
    AssertionError,
    TypeError,
    NameError,
    ImportError,
    NotImplementedError,
    SyntaxError,
    RecursionError,
)
"""Exceptions ``wait_for`` never retries: a verdict, or a bug in the probe. (An
AttributeError is retried: probes read objects that have no status yet.)"""


def wait_for(
    what: str,
    probe: Callable[[], tuple[bool, T]],
    *,
    timeout: float,
    interval: float = 0.1,
    check: Callable[[], None] | None = None,
) -> T:
    """Call ``probe`` until it returns ``(True, value)``; return the value.

    ``probe`` returns ``(done, observation)``; the last observation (or exception)
    goes into the timeout message. An exception is an observation, since an object
    may not exist yet or a server may not answer yet, unless it is one of
    ``NOT_TRANSIENT``: a probe that asserts has reached a verdict (an order of events
    that must never be seen), which a later success must not hide, and a probe with a
    bug (a TypeError, a NameError) would fail the same way until the timeout. Those
    are raised at once. ``check`` runs before every probe and may raise (e.g. when a
    component process exited) to end the wait at once.
    """
    deadline = time.monotonic() + timeout
    seen: object = "nothing yet"
    while True:
        if check is not None:
            check()
        try:
            done, value = probe()
            if done:
                return value
            seen = value
        except NOT_TRANSIENT:
            raise
        except Exception as exc:  # a probe error is an observation, not a verdict
            seen = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last seen: {seen}"
            )
        time.sleep(interval)


def socket_probe(path: Path) -> tuple[bool, str]:
    """A ``wait_for`` probe: ``path`` is a (listening) unix socket."""
    return path.is_socket(), f"{path} does not exist yet"
