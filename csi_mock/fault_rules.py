"""Fault rules as declared in a config file or posted to the admin API: plain, validated data.

Only the declaration lives here, so that configuration can validate rules without
importing grpc or protobuf; matching and firing are `csi_mock.control.faults`.
"""

from __future__ import annotations

import fnmatch
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from csi_mock.csi_methods import OVERRIDE_TYPES, RESPONSE_FIELDS
from csi_mock.model.duration import DurationError, parse_duration

STATUS_CODES = (
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
"""gRPC's status codes other than OK, by name (grpc/doc/statuscodes.md)."""


def _seconds(value: object) -> object:
    if isinstance(value, str | int | float):
        try:
            return parse_duration(value)
        except DurationError as error:
            raise ValueError(str(error)) from None
    return value  # Let the float field refuse it with its own message.


Duration = Annotated[float, BeforeValidator(_seconds)]
"""Seconds, given as a number or as a Go duration (`300ms`, `2s`, `1m`)."""


def status_code_name(code: str, *, ok: bool = False) -> str:
    """The upper-case name of a gRPC status code (OK only when `ok`), or ValueError."""
    upper = code.upper()
    if upper not in STATUS_CODES and not (ok and upper == "OK"):
        raise ValueError(f"{code!r} is not a gRPC status code (e.g. RESOURCE_EXHAUSTED)")
    return upper


_INT_RANGES = {
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
}


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
    return isinstance(value, int | float) and not isinstance(value, bool)  # double, float


def methods_matching(pattern: str) -> list[str]:
    return sorted(name for name in RESPONSE_FIELDS if fnmatch.fnmatchcase(name, pattern))


class ErrorAction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str = "injected fault"

    @field_validator("code")
    @classmethod
    def _known_code(cls, code: str) -> str:
        return status_code_name(code)


class FaultRuleSpec(BaseModel):
    """A rule as declared in the config file or posted to the admin API."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    method: str = Field(min_length=1)
    volume: str | None = None
    """Glob on the request's volume_id or name."""
    node: str | None = None
    """Glob on the request's node_id."""
    parameters: dict[str, str] | None = None
    """Every given parameter must be in the request's parameters with that value."""
    topology: dict[str, str] | None = None
    """Every given label must be in the request's topology (GetCapacity's segment or any
    requisite/preferred segment of CreateVolume)."""
    error: ErrorAction | None = None
    delay: Duration = Field(0.0, ge=0, le=3600)
    hang: bool = False
    override: dict[str, int | float | str | bool] | None = None
    times: int | None = Field(None, ge=1)
    skip: int = Field(0, ge=0)
    probability: float = Field(1.0, gt=0, le=1)
    seed: int | None = None

    # Field validators (not one model validator) so that each error's location names
    # the field: config files and the admin API report it as such.
    @field_validator("method")
    @classmethod
    def _known_method(cls, method: str) -> str:
        if not methods_matching(method):
            raise ValueError(f"{method!r} matches no CSI method this driver serves")
        return method

    @field_validator("override")
    @classmethod
    def _known_fields(
        cls, override: dict[str, int | float | str | bool] | None, info: ValidationInfo
    ) -> dict[str, int | float | str | bool] | None:
        if override and info.data.get("error") is not None:
            raise ValueError("error and override exclude each other")
        method = info.data.get("method")  # absent when the method itself was invalid
        for name, value in (override or {}).items():
            for matched in methods_matching(method) if method else ():
                if name not in RESPONSE_FIELDS[matched]:
                    raise ValueError(
                        f"{matched} responses have no field {name!r}"
                        f" (fields: {', '.join(RESPONSE_FIELDS[matched])})"
                    )
                kind = OVERRIDE_TYPES[matched].get(name)
                if kind is None:
                    raise ValueError(f"{matched}'s {name} is not a scalar an override can set")
                if not _fits(kind, value):
                    raise ValueError(f"{name}: {value!r} is not a valid {kind}")
        return override

    @model_validator(mode="after")
    def _check(self) -> FaultRuleSpec:
        if self.error is None and not self.delay and not self.hang and not self.override:
            raise ValueError("a rule needs an action: error, delay, hang or override")
        return self
