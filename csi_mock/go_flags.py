"""Command-line flags as Go's flag package parses them, for hostpathplugin's flags
(``csi-mock serve``): ``-name`` as well as ``--name``, booleans that take their value
only after ``=``, integers as ``strconv.ParseInt(value, 0, 64)``, klog's ``-v``; and a
refused value kept in place of an error, so that every bad flag is reported at once.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from csi_mock.model.boolean import BooleanError, parse_bool

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_LEGACY_OCTAL = re.compile(r"^[+-]?0[0-7_]+$")
_DECIMAL = re.compile(r"^[+-]?[0-9]+$")


T = TypeVar("T")


@dataclass(frozen=True)
class Refused:
    """A flag value its type refused, kept in place of an argparse error so that
    resolve_config reports every bad flag of the command line at once."""

    problem: str


def collected(parse: Callable[[str], T]) -> Callable[[str], T | Refused]:
    """`parse` as an argparse type that keeps a refusal (a Refused) instead of exiting."""

    def parse_or_keep(value: str) -> T | Refused:
        try:
            return parse(value)
        except argparse.ArgumentTypeError as error:
            return Refused(str(error))

    return parse_or_keep


def go_bool(value: str) -> bool:
    """A Go flag.BoolVar value: exactly the spellings strconv.ParseBool takes (the
    booleans of every csi-mock command)."""
    try:
        return parse_bool(value)
    except BooleanError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def go_int(value: str) -> int:
    """A Go flag.Int64Var value: strconv.ParseInt(value, 0, 64), so 0x1f, 0o17, 017
    (octal, as in Go) and 1_000 are integers, and "1Gi" is not."""
    try:
        legacy_octal = _LEGACY_OCTAL.match(value)
        number = int(value.replace("_", ""), 8) if legacy_octal else int(value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not INT64_MIN <= number <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{value!r} is out of the int64 range")
    return number


def klog_level(value: str) -> int:
    """klog's -v: a decimal int32 (strconv.ParseInt(value, 10, 32))."""
    if not _DECIMAL.match(value) or not -(2**31) <= int(value) < 2**31:
        raise argparse.ArgumentTypeError(f"{value!r} is not a klog verbosity (an integer)")
    return int(value)


class GoFlagParser(argparse.ArgumentParser):
    """An argparse parser whose boolean flags parse as Go's flag package does.

    A Go bool flag never takes a separate argument: `-enable-attach` is true,
    `-enable-attach=false` is false, and in `-enable-attach false` the word `false`
    ends the flags (hostpathplugin then ignores everything after it). csi-mock refuses
    that last form instead of reading it differently.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go_bool_flags: set[str] = set()

    def add_go_bool(self, name: str, **kwargs: Any) -> None:
        names = (f"--{name}", f"-{name}")
        self.go_bool_flags.update(names)
        self.add_argument(*names, type=collected(go_bool), metavar="BOOL", **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is not None and self.go_bool_flags:
            args = list(args)
            for index, arg in enumerate(args):
                if arg == "--":
                    break
                if arg not in self.go_bool_flags:
                    continue
                following = args[index + 1] if index + 1 < len(args) else None
                if following is not None and not following.startswith("-"):
                    self.error(
                        f"{arg} {following}: a boolean flag takes its value after '='"
                        f" ({arg}={following}); hostpathplugin would read {arg} as true"
                        f" and stop parsing flags at {following!r}"
                    )
                args[index] = f"{arg}=true"
        return super().parse_known_args(args, namespace)


def go_flag(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """Register --name and Go-style -name (csi-driver-host-path writes both)."""
    parser.add_argument(f"--{name}", f"-{name}", **kwargs)
