"""The fields a fault rule names, checked against the CSI proto's schema
(`csi_mock.csi_methods`): a request condition (`where`) against the request of every
method the rule matches, a reply rewrite (`override`) or a rescue's reply against its
response, value by value, so that a rule protobuf cannot hold is refused when it is
added (`csi_mock.fault_rules`), never at call time."""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from csi_mock.csi_methods import ENUMS, MESSAGES, REQUEST_TYPES, RESPONSE_FIELDS
from csi_mock.model.field_path import (
    FieldCondition,
    FieldPath,
    FieldPathError,
    Step,
    parse_path,
)
from csi_mock.model.quantity import QuantityError, parse_quantity

_INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
}
_NUMERIC = frozenset({*_INT_RANGES, "double", "float"})


def _fits(kind: str, value: object) -> bool:
    """Whether protobuf takes `value` for a field of scalar type `kind` (an override
    it refuses would fail every matching call with INTERNAL)."""
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind in ("double", "float"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False  # bytes: no CSI message has one, so none can be set


def methods_matching(pattern: str) -> list[str]:
    return sorted(name for name in RESPONSE_FIELDS if fnmatch.fnmatchcase(name, pattern))


# -- field paths into CSI messages -------------------------------------------------------


def wrapped_scalar(kind: str) -> str | None:
    """The scalar a wrapper message (google.protobuf.Int64Value...) holds, else None.
    Wrappers are read and written as that scalar, as in proto3 JSON."""
    fields = MESSAGES.get(kind)
    if not kind.startswith("google.protobuf.") or fields is None or list(fields) != ["value"]:
        return None
    return fields["value"][1]


@dataclass(frozen=True)
class FieldTarget:
    """What a field path names in a message type: the whole list ("repeated"), the
    whole map ("map") or one value ("single") of type `kind` (a scalar, or a message or
    enum full name)."""

    label: str
    kind: str

    @property
    def scalar(self) -> str | None:
        """The scalar type when the target is one scalar (wrappers unwrapped)."""
        if self.label != "single" or self.kind in ENUMS:
            return None
        if self.kind in MESSAGES:
            return wrapped_scalar(self.kind)
        return self.kind


def _spelled(steps: tuple[Step, ...]) -> str:
    text = ""
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += f".{step}" if text else step
    return text


def resolve(root: str, path: FieldPath, owner: str) -> FieldTarget:
    """What `path` names in message `root`, by the proto's schema; ValueError naming the
    first step that does not exist. `owner` (e.g. "CreateVolume responses") opens the
    message. A map's key and a list's index are any key or index; a field name after a
    list applies to each element."""
    target = FieldTarget("single", root)
    for position, step in enumerate(path.steps):
        here = _spelled(path.steps[:position])
        if target.label == "map":
            if isinstance(step, int):
                raise ValueError(f'{owner}\' {here} is a map: name a key, {here}["KEY"]')
            target = FieldTarget("single", target.kind)
            continue
        if target.label == "repeated":
            target = FieldTarget("single", target.kind)
            if isinstance(step, int):
                continue
        fields = MESSAGES.get(target.kind)
        if fields is None:
            raise ValueError(
                f"{owner}' {here} is a {_short(target.kind)}: it has no field {step!r}"
            )
        if isinstance(step, int):
            raise ValueError(f"{owner}' {here or 'message'} is not a list: no index [{step}]")
        if step not in fields:
            known = ", ".join(fields) or "none"
            if not here:
                raise ValueError(f"{owner} have no field {step!r} (fields: {known})")
            raise ValueError(
                f"{owner}' {here} ({_short(target.kind)}) has no field {step!r} (fields: {known})"
            )
        label, kind, _ = fields[step]
        target = FieldTarget(label, kind)
    return target


def _short(kind: str) -> str:
    return kind.removeprefix("csi.v1.")


def check_value(target: FieldTarget, value: object, where: str) -> None:
    """ValueError naming `where` unless protobuf can hold `value` (proto3 JSON's shape:
    an object for a message, a list, an enum by name; a wrapper as its scalar) in what
    `target` names."""
    if target.label == "map":
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {value!r} is not a map of string to {_short(target.kind)}")
        for key, item in value.items():
            check_value(FieldTarget("single", target.kind), item, f"{where}[{key!r}]")
        return
    if target.label == "repeated":
        if not isinstance(value, list):
            raise ValueError(f"{where}: {value!r} is not a list of {_short(target.kind)}")
        for index, item in enumerate(value):
            check_value(FieldTarget("single", target.kind), item, f"{where}[{index}]")
        return
    kind = target.kind
    if kind in ENUMS:
        if not isinstance(value, str) or value not in ENUMS[kind]:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(ENUMS[kind])}")
        return
    scalar = target.scalar
    if scalar is not None:
        if not _fits(scalar, value):
            raise ValueError(f"{where}: {value!r} is not a valid {scalar}")
        return
    fields = MESSAGES[kind]
    if not isinstance(value, dict):
        raise ValueError(
            f"{where}: {value!r} is not a {_short(kind)} (a JSON object of its fields)"
        )
    oneofs: dict[str, str] = {}
    for name, item in value.items():
        if name not in fields:
            known = ", ".join(fields) or "none"
            raise ValueError(f"{where}: {_short(kind)} has no field {name!r} (fields: {known})")
        label, field_kind, oneof = fields[name]
        if oneof and oneof in oneofs:
            raise ValueError(f"{where}: {oneofs[oneof]} and {name} are one of {oneof}: give one")
        if oneof:
            oneofs[oneof] = name
        check_value(FieldTarget(label, field_kind), item, f"{where}.{name}")


# -- request conditions ------------------------------------------------------------------

_COMPARISON = re.compile(r"(>=|<=|==|>|<)\s*(.*)", re.DOTALL)
_COMPARE: dict[str, Callable[[Fraction, Fraction], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
}


def _number(text: str) -> Fraction:
    """A decimal number (exactly: 1.5, -3, 1e3) or a byte quantity (10Gi, 500M)."""
    stripped = text.strip()
    try:
        return Fraction(stripped)
    except (ValueError, ZeroDivisionError):
        pass
    negative = stripped.startswith("-")
    try:
        size = parse_quantity(stripped[1:] if negative else stripped)
    except QuantityError:
        raise ValueError(
            f"{text!r} is not a number or a quantity (e.g. 10, -1, 1.5, 1Gi)"
        ) from None
    return Fraction(-size if negative else size)


@dataclass(frozen=True)
class RequestCondition:
    """A condition on a request field: a glob its text must match (as the journal's
    where), or a numeric comparison. A list holds when one of its elements does; an
    absent field (inside a message the request leaves unset) never holds."""

    path: FieldPath
    operator: str
    """"glob", or one of >, >=, <, <=, ==."""
    operand: str | Fraction

    def holds(self, tree: Any) -> bool:
        if isinstance(self.operand, str):
            return FieldCondition(self.path, self.operand).holds(tree)
        compare = _COMPARE[self.operator]
        return any(
            number is not None and compare(number, self.operand)
            for number in _numbers(self.path.values(tree))
        )


def _numbers(values: list[Any]) -> Iterator[Fraction | None]:
    for value in values:
        if isinstance(value, list):
            yield from _numbers(value)
        elif isinstance(value, bool) or not isinstance(value, int | float | str):
            yield None
        else:
            try:
                # proto3 JSON writes an int64 beyond 2**53 as a string
                yield Fraction(value)
            except (ValueError, OverflowError):
                yield None


def request_condition(path_text: str, condition: object) -> RequestCondition:
    """The condition `where` declares for `path_text`: a string is a glob, or a
    comparison when it starts with >, >=, <, <= or ==; a number is ==; a boolean is the
    glob true or false. ValueError when the path or the number does not parse."""
    try:
        path = parse_path(path_text)
    except FieldPathError as error:
        raise ValueError(str(error)) from None
    if isinstance(condition, bool):
        return RequestCondition(path, "glob", "true" if condition else "false")
    if isinstance(condition, int | float):
        try:
            return RequestCondition(path, "==", Fraction(condition))
        except (ValueError, OverflowError):
            raise ValueError(f"{path_text}: {condition!r} is not a number") from None
    if not isinstance(condition, str):
        raise ValueError(f"{path_text}: {condition!r} is not a glob, a comparison or a number")
    comparison = _COMPARISON.fullmatch(condition)
    if comparison is None:
        return RequestCondition(path, "glob", condition)
    try:
        operand = _number(comparison[2])
    except ValueError as error:
        raise ValueError(f"{path_text}: {condition!r}: {error}") from None
    return RequestCondition(path, comparison[1], operand)


def compile_where(where: Mapping[str, object] | None) -> tuple[RequestCondition, ...]:
    return tuple(request_condition(path, value) for path, value in (where or {}).items())


def compile_override(override: Mapping[str, Any] | None) -> tuple[tuple[FieldPath, Any], ...]:
    """The override's paths, parsed, with their values, in order."""
    return tuple((parse_path(path), value) for path, value in (override or {}).items())


def check_condition(condition: RequestCondition, method: str) -> None:
    path = condition.path
    try:
        target = resolve(REQUEST_TYPES[method], path, f"{method} requests")
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if target.label == "map":
        raise ValueError(f'{path}: {method}\'s {path} is a map: name a key, {path}["KEY"]')
    if target.label == "repeated":
        target = FieldTarget("single", target.kind)  # a list holds when an element does
    scalar = target.scalar
    if scalar is None and target.kind not in ENUMS:
        fields = ", ".join(MESSAGES[target.kind]) or "none"
        raise ValueError(
            f"{path}: {method}'s {path} is a {_short(target.kind)} message:"
            f" name one of its fields ({fields})"
        )
    if condition.operator != "glob" and scalar not in _NUMERIC:
        kind = scalar or _short(target.kind)
        raise ValueError(
            f"{path}: {condition.operator} compares numbers, and {method}'s {path} is a {kind}"
            " (give a glob to match its text)"
        )


def shape_name(target: FieldTarget) -> str:
    kind = _short(target.kind)
    if target.label == "repeated":
        return f"list of {kind}"
    if target.label == "map":
        return f"map of string to {kind}"
    return f"JSON object of a {kind}"
