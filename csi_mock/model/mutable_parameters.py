"""Mutable parameters: the volume attributes a CO may change after creation.

CSI's MODIFY_VOLUME (Kubernetes' VolumeAttributesClass): CreateVolume may set them and
ControllerModifyVolume changes them. Which names and values are allowed is configured;
these rules decide what a request may ask for and what a volume holds afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from csi_mock.model.errors import InvalidArgument

FIELD = "mutable_parameters"
"""The request field these rules judge (the same name in both RPCs), named in errors."""


@dataclass(frozen=True)
class MutableParameterRules:
    """Which mutable parameters a volume may carry.

    `allowed` maps each mutable name to its allowed values; an empty tuple allows any
    value. None allows any name with any value.
    """

    allowed: Mapping[str, tuple[str, ...]] | None = None

    def check(self, parameters: Mapping[str, str]) -> None:
        """Refuse (InvalidArgument) the first parameter, in name order, that is not
        mutable or whose value is not allowed; the message names it and what is allowed."""
        if self.allowed is None:
            return
        for name in sorted(parameters):
            if name not in self.allowed:
                mutable = ", ".join(map(repr, self.allowed)) or "none"
                raise InvalidArgument(
                    f"{FIELD}: {name!r} is not a mutable parameter (mutable: {mutable})"
                )
            values = self.allowed[name]
            if values and parameters[name] not in values:
                raise InvalidArgument(
                    f"{FIELD}: {name}={parameters[name]!r} is not allowed"
                    f" (allowed: {', '.join(map(repr, values))})"
                )


def modified_parameters(
    current: Mapping[str, str], requested: Mapping[str, str], rules: MutableParameterRules
) -> dict[str, str]:
    """A volume's mutable parameters after ControllerModifyVolume asked for `requested`.

    `requested` must not be empty and must pass `rules`; its keys replace or join the
    current ones and the others stay, because the spec forbids modifying a volume for
    the absence of a key. Asking again for what the volume holds changes nothing.
    """
    if not requested:
        raise InvalidArgument(f"{FIELD} is required (the parameters to change)")
    rules.check(requested)
    return {**current, **requested}


def satisfies(current: Mapping[str, str], requested: Mapping[str, str]) -> bool:
    """Whether a volume holding `current` is what a repeated CreateVolume asking for
    `requested` wants: every requested parameter has that value (a later modification
    may have added others)."""
    return all(current.get(name) == value for name, value in requested.items())
