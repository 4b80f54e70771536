"""Collecting without failing: a part whose source is broken becomes one line saying
so, and a source that failed once is not tried again (``Skipped``)."""

from __future__ import annotations

from collections.abc import Callable


def describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def safely(what: str, produce: Callable[[], str], problems: list[str] | None = None) -> str:
    """``produce()``, or one line saying that ``what`` was not collected and why
    (noted in ``problems`` too, unless it was only skipped). Diagnostics must never
    replace the failure they are meant to explain."""
    try:
        return produce()
    except Skipped as skipped:
        return f"({what}: skipped, {skipped})"
    except Exception as error:
        note = f"{what} ({describe_error(error)})"
        if problems is not None:
            problems.append(note)
        return f"({what}: not collected, {describe_error(error)})"


class Skipped(Exception):
    """A part not tried because its source failed already."""
