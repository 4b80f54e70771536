"""Fault rules as declared in a config file or posted to the admin API: plain, validated data.

Only the declaration lives here, so that configuration can validate rules without
importing grpc or protobuf; matching and firing are `csi_mock.control.faults`, the
replies `csi_mock.services.fault_replies`. Request conditions (`where`), reply rewrites
(`override`) and a rescue's reply name fields by path (`csi_mock.model.field_path`) and
are checked here against the proto's schema (`csi_mock.csi_methods`) for every method a
rule matches, so that a rule protobuf cannot hold is refused when it is added, never
at call time.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from csi_mock.csi_methods import ENUMS, RESPONSE_TYPES
from csi_mock.fault_schema import (
    FieldTarget,
    check_condition,
    check_value,
    compile_where,
    methods_matching,
    resolve,
    shape_name,
)
from csi_mock.model.duration import DurationError, parse_duration
from csi_mock.model.field_path import (
    FieldPathError,
    parse_path,
)

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


class ErrorAction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str = "injected fault"

    @field_validator("code")
    @classmethod
    def _known_code(cls, code: str) -> str:
        return status_code_name(code)


class RescueAction(BaseModel):
    """Turn the real handler's failure into success: when it fails with `code` (any
    code when None), the caller gets OK and `reply`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str | None = None
    reply: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("code")
    @classmethod
    def _known_code(cls, code: str | None) -> str | None:
        return None if code is None else status_code_name(code)


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
    where: dict[str, str | int | float | bool] | None = None
    """Field path of the request -> glob or comparison (`>1Gi`, `<=10`, `==0`); all
    must hold."""
    error: ErrorAction | None = None
    delay: Duration = Field(0.0, ge=0, le=3600)
    hang: bool = False
    override: dict[str, JsonValue] | None = None
    """Field path of the reply -> the value it gets."""
    rescue: RescueAction | None = None
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

    @field_validator("where")
    @classmethod
    def _known_request_fields(
        cls, where: dict[str, str | int | float | bool] | None, info: ValidationInfo
    ) -> dict[str, str | int | float | bool] | None:
        method = info.data.get("method")  # absent when the method itself was invalid
        for condition in compile_where(where):
            for matched in methods_matching(method) if method else ():
                check_condition(condition, matched)
        return where

    @field_validator("override")
    @classmethod
    def _known_fields(
        cls, override: dict[str, JsonValue] | None, info: ValidationInfo
    ) -> dict[str, JsonValue] | None:
        if override and info.data.get("error") is not None:
            raise ValueError("error and override exclude each other")
        method = info.data.get("method")
        for text, value in (override or {}).items():
            try:
                path = parse_path(text)
            except FieldPathError as error:
                raise ValueError(str(error)) from None
            for matched in methods_matching(method) if method else ():
                try:
                    target = resolve(RESPONSE_TYPES[matched], path, f"{matched} responses")
                except ValueError as error:
                    # A top-level name keeps the message it has always had.
                    if len(path.steps) == 1:
                        raise
                    raise ValueError(f"{text}: {error}") from None
                if len(path.steps) == 1 and target.scalar is None and target.kind not in ENUMS:
                    # A whole message, list or map takes its JSON form; anything else
                    # keeps today's message for a top-level field.
                    shape = {"single": dict, "repeated": list, "map": dict}[target.label]
                    if not isinstance(value, shape):
                        raise ValueError(
                            f"{matched}'s {text} is not a scalar an override can set: give"
                            f" its JSON form (a {shape_name(target)}) or a path into it"
                        )
                check_value(target, value, text)
        return override

    @field_validator("rescue")
    @classmethod
    def _reply_fits(cls, rescue: RescueAction | None, info: ValidationInfo) -> RescueAction | None:
        if rescue is None:
            return None
        if info.data.get("error") is not None or info.data.get("hang"):
            raise ValueError("rescue needs the handler to run: it excludes error and hang")
        method = info.data.get("method")
        for matched in methods_matching(method) if method else ():
            target = FieldTarget("single", RESPONSE_TYPES[matched])
            try:
                check_value(target, rescue.reply, "reply")
            except ValueError as error:
                raise ValueError(f"{error} (a {matched} reply)") from None
        return rescue

    @model_validator(mode="after")
    def _check(self) -> FaultRuleSpec:
        if (
            self.error is None
            and not self.delay
            and not self.hang
            and not self.override
            and self.rescue is None
        ):
            raise ValueError("a rule needs an action: error, delay, hang, override or rescue")
        return self
