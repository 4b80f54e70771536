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
    may not exist yet, except an AssertionError: a probe that asserts has reached a
    verdict (an order of events that must never be seen), which a later success must
    not hide. ``check`` runs before every probe and may raise (e.g. when a component
    process exited) to end the wait at once.
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
        except AssertionError:
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
