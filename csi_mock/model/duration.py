"""Durations as Kubernetes users write them: Go's `300ms`, `2s`, `1m30s`, or plain seconds."""

from __future__ import annotations

import math
import re

# Go's time.ParseDuration units.
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")


class DurationError(ValueError):
    """Not a duration; the message shows what is accepted."""


def parse_duration(value: str | int | float) -> float:
    """Seconds from a number of seconds or a Go duration string (`1m30s`, `-2s`, `0`)."""
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is not a duration")
    seconds = float(value) if isinstance(value, int | float) else _parse_text(value)
    if not math.isfinite(seconds):
        raise DurationError(f"{value!r} is not a finite duration")
    return seconds


def _parse_text(text: str) -> float:
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped):
        return float(stripped)
    sign = -1.0 if stripped.startswith("-") else 1.0
    body = stripped[1:] if stripped[:1] in "+-" else stripped
    total, position = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        raise DurationError(
            f"{text!r} is not a duration (e.g. 300ms, 2s, 1m30s, or seconds as a number)"
        )
    return sign * total
