"""Polling for a condition with a deadline, failing with what was expected and what
was last seen, and failing early when a process it depends on dies."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    pass


TIME_SCALE_VARIABLE = "CSI_HARNESS_TIME_SCALE"
"""The environment variable that lengthens every wait: ``time_scale``."""


def time_scale() -> float:
    """How many times longer than written each wait may take: ``CSI_HARNESS_TIME_SCALE``
    (pytest's ``--csi-time-scale`` sets it), 1 when unset. For machines slower than
    the ones the deadlines were written on; a factor below 1 would only make waits fail
    early, so it is refused, as is anything but a finite number."""
    text = os.environ.get(TIME_SCALE_VARIABLE, "").strip()
    if not text:
        return 1.0
    try:
        return parse_time_scale(text)
    except ValueError as exc:
        raise ValueError(f"{TIME_SCALE_VARIABLE}: {exc}") from None


def parse_time_scale(text: str) -> float:
    """``text`` as a time scale (a finite number of 1 or more), or a ValueError."""
    try:
        scale = float(text)
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and scale >= 1):
        raise ValueError(f"expected a number of 1 or more, got {text!r}")
    return scale


def scaled(timeout: float) -> tuple[float, str]:
    """``timeout`` times ``time_scale()``, and how a timeout message says it: "90s",
    or "180s (90s x 2 from CSI_HARNESS_TIME_SCALE)"."""
    scale = time_scale()
    if scale == 1:
        return timeout, _seconds(timeout)
    said = (
        f"{_seconds(timeout * scale)} ({_seconds(timeout)} x {scale:g} from {TIME_SCALE_VARIABLE})"
    )
    return timeout * scale, said


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 else f"{value:.2g}s"


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
    component process exited) to end the wait at once. ``timeout`` is scaled by
    ``time_scale()``.
    """
    timeout, said = scaled(timeout)
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
            raise WaitTimeout(f"timed out after {said} waiting for {what}; last seen: {seen}")
        time.sleep(interval)


def socket_probe(path: Path) -> tuple[bool, str]:
    """A ``wait_for`` probe: ``path`` is a (listening) unix socket."""
    return path.is_socket(), f"{path} does not exist yet"
