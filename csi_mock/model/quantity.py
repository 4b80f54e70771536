"""Kubernetes resource quantities for byte sizes ("10Gi", "500M", "1.5Ki", "1e3")."""

from __future__ import annotations

import math
import re
from fractions import Fraction

INT64_MAX = 2**63 - 1

_SUFFIXES: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}

_QUANTITY = re.compile(
    r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]+))?$"
)


class QuantityError(ValueError):
    """A quantity string that is not a valid, non-negative int64 byte count."""


def parse_quantity(value: str | int) -> int:
    """Return the byte count of a Kubernetes quantity, rounded up to whole bytes.

    Negative values and values above int64 are refused, as the CSI wire type is int64.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f"{value} is negative")
        if value > INT64_MAX:
            raise QuantityError(f"{value} exceeds the int64 range")
        return value
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None:
        if text.startswith("-"):
            raise QuantityError(f"{value!r} is negative")
        raise QuantityError(f"{value!r} is not a quantity (expected e.g. 1024, 500M, 10Gi, 1e9)")
    number = Fraction(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if exponent > 30:
            raise QuantityError(f"{value!r} exceeds the int64 range")
        if exponent < -len(match["number"]):
            # Below 1 (the number has fewer digits than that): 1 byte or none, found
            # without computing 10**exponent, which for 1e-999999999 would take minutes.
            return 1 if number > 0 else 0
        number *= Fraction(10) ** exponent
    else:
        number *= _SUFFIXES[match["suffix"] or ""]
    result = math.ceil(number)
    if result > INT64_MAX:
        raise QuantityError(f"{value!r} exceeds the int64 range")
    return result


def format_quantity(size: int) -> str:
    """Render a byte count in the largest binary unit that divides it exactly."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIXES[suffix]
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)
