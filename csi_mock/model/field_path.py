"""Field paths into a recorded request or reply, and conditions on them.

A path names fields the way the CSI proto spells them, with map keys and list indexes
in brackets:

    volume_id
    volume_capability.mount.mount_flags
    volume_context["csi.storage.k8s.io/pod.name"]
    secrets['password']
    volume_capabilities[0].access_mode.mode
    reply.volume.capacity_bytes

A quoted key takes backslash escapes (``\\"``, ``\\'``, ``\\\\``), so any key, however
hostile, can be named. A field name applied to a list applies to each element, so
``volume_capabilities.mount.fs_type`` looks at every capability. A condition is a path,
``=``, and a glob its value must match (``fnmatch``, case-sensitive); a list matches when
one of its elements does.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"[0-9]+")
MAX_PATH_LENGTH = 1024


class FieldPathError(ValueError):
    """A path that does not parse; the message names the path and where it went wrong."""


Step = str | int
"""A field name or map key (str), or a list index (int)."""


@dataclass(frozen=True)
class FieldPath:
    text: str
    steps: tuple[Step, ...]

    def values(self, root: Any, start: int = 0) -> list[Any]:
        """Every value the path (from its step `start`) reaches in a JSON-like tree;
        none when a step is absent."""
        return list(_walk(root, self.steps[start:]))

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class FieldCondition:
    path: FieldPath
    pattern: str

    def holds(self, root: Any, start: int = 0) -> bool:
        return any(_matches(value, self.pattern) for value in self.path.values(root, start))

    def __str__(self) -> str:
        return f"{self.path}={self.pattern}"


def parse_path(text: str) -> FieldPath:
    """The path `text`, all of it; FieldPathError names what is wrong and where."""
    path, end = _parse(text)
    if end != len(text):
        raise _error(text, end, "expected '.', '[' or the end")
    return path


def parse_path_prefix(text: str) -> tuple[FieldPath, int]:
    """The path at the start of `text` and where it ends (what follows is not a step:
    an operator, say); FieldPathError when no path starts there."""
    return _parse(text)


def parse_condition(text: str) -> FieldCondition:
    """``PATH=GLOB``: the path ends at the first '=' outside brackets."""
    path, end = _parse(text)
    if end == len(text):
        raise FieldPathError(f"{text!r}: expected PATH=VALUE")
    if text[end] != "=":
        raise _error(text, end, "expected '.', '[' or '='")
    return FieldCondition(path, text[end + 1 :])


def _parse(text: str) -> tuple[FieldPath, int]:
    if len(text) > MAX_PATH_LENGTH:
        raise FieldPathError(f"field path longer than {MAX_PATH_LENGTH} characters")
    steps: list[Step] = []
    position = _name(text, 0, steps)
    while position < len(text) and text[position] in ".[":
        if text[position] == ".":
            position = _name(text, position + 1, steps)
        else:
            position = _bracket(text, position + 1, steps)
    return FieldPath(text[:position], tuple(steps)), position


def _name(text: str, position: int, steps: list[Step]) -> int:
    match = _NAME.match(text, position)
    if match is None:
        raise _error(text, position, "expected a field name")
    steps.append(match.group())
    return match.end()


def _bracket(text: str, position: int, steps: list[Step]) -> int:
    index = _INDEX.match(text, position)
    if index is not None:
        steps.append(int(index.group()))
        position = index.end()
    elif position < len(text) and text[position] in "\"'":
        key, position = _quoted(text, position)
        steps.append(key)
    else:
        raise _error(text, position, "expected an index or a quoted key after '['")
    if position >= len(text) or text[position] != "]":
        raise _error(text, position, "expected ']'")
    return position + 1


def _quoted(text: str, position: int) -> tuple[str, int]:
    quote = text[position]
    chars: list[str] = []
    position += 1
    while position < len(text):
        char = text[position]
        if char == quote:
            return "".join(chars), position + 1
        if char == "\\":
            position += 1
            if position >= len(text):
                break
            char = text[position]
        chars.append(char)
        position += 1
    raise _error(text, len(text), f"unterminated key (no closing {quote})")


def _error(text: str, position: int, expectation: str) -> FieldPathError:
    return FieldPathError(f"field path {text!r} at character {position}: {expectation}")


def _walk(value: Any, steps: tuple[Step, ...]) -> Iterator[Any]:
    if not steps:
        yield value
        return
    step, rest = steps[0], steps[1:]
    if isinstance(value, list):
        if isinstance(step, int):
            if step < len(value):
                yield from _walk(value[step], rest)
        else:
            for element in value:
                yield from _walk(element, steps)
    elif isinstance(value, dict) and isinstance(step, str) and step in value:
        yield from _walk(value[step], rest)


def _matches(value: Any, pattern: str) -> bool:
    if isinstance(value, list):
        return any(_matches(element, pattern) for element in value)
    if isinstance(value, dict):
        return False
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return fnmatch.fnmatchcase(text, pattern)
