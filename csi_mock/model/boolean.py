"""Booleans as every csi-mock command line spells them: exactly the spellings of Go's
strconv.ParseBool, which hostpathplugin's flags take, so that `serve` and `ctl` accept
the same words."""

from __future__ import annotations

TRUE = ("1", "t", "T", "TRUE", "true", "True")
FALSE = ("0", "f", "F", "FALSE", "false", "False")


class BooleanError(ValueError):
    """A word that is none of the accepted spellings."""


def parse_bool(text: str) -> bool:
    """True for 1, t, T, TRUE, true, True; False for 0, f, F, FALSE, false, False."""
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise BooleanError(f"{text!r} is not a boolean (true or false; also 1/0, t/f)")
