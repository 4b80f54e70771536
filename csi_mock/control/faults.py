"""Fault rules: declarative misbehaviour matched against each RPC.

A rule matches a method (exact or glob) and optional request predicates; when it fires
it delays, hangs until the caller's deadline, fails with a status code, or overrides
response fields. Firing can be limited to the first N matches after skipping K, made
probabilistic under a seed, or left on until the rule is removed.
"""

from __future__ import annotations

import fnmatch
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from csi_mock.control.methods import RESPONSE_OF, methods_matching
from csi_mock.observe.calls import request_segments

_CODES = {code.name: code for code in grpc.StatusCode if code is not grpc.StatusCode.OK}


class ErrorAction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str = "injected fault"

    @field_validator("code")
    @classmethod
    def _known_code(cls, code: str) -> str:
        upper = code.upper()
        if upper not in _CODES:
            raise ValueError(f"{code!r} is not a gRPC status code (e.g. RESOURCE_EXHAUSTED)")
        return upper

    @property
    def status(self) -> grpc.StatusCode:
        return _CODES[self.code]


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
    delay: float = Field(0.0, ge=0, le=3600)
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
        for name in override or {}:
            for matched in methods_matching(method) if method else ():
                if name not in RESPONSE_OF[matched].fields_by_name:
                    raise ValueError(
                        f"{matched} responses have no field {name!r}"
                        f" (fields: {', '.join(RESPONSE_OF[matched].fields_by_name)})"
                    )
        return override

    @model_validator(mode="after")
    def _check(self) -> FaultRuleSpec:
        if self.error is None and not self.delay and not self.hang and not self.override:
            raise ValueError("a rule needs an action: error, delay, hang or override")
        return self


@dataclass
class FaultRule:
    """A live rule: its spec, counters and random stream."""

    spec: FaultRuleSpec
    id: str
    matched: int = 0
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.spec.seed)

    def matches(self, method: str, request: Mapping[str, Any]) -> bool:
        spec = self.spec
        if not fnmatch.fnmatchcase(method, spec.method):
            return False
        if spec.volume is not None and not any(
            fnmatch.fnmatchcase(str(request.get(key, "")), spec.volume)
            for key in ("volume_id", "name")
            if request.get(key)
        ):
            return False
        if spec.node is not None and not fnmatch.fnmatchcase(
            str(request.get("node_id", "")), spec.node
        ):
            return False
        if spec.parameters is not None:
            given = request.get("parameters") or {}
            if any(given.get(k) != v for k, v in spec.parameters.items()):
                return False
        if spec.topology is not None:
            segments = request_segments(dict(request))
            if not any(all(s.get(k) == v for k, v in spec.topology.items()) for s in segments):
                return False
        return True

    def try_fire(self) -> bool:
        """Count a match and decide whether this one fires."""
        self.matched += 1
        if self.matched <= self.spec.skip:
            return False
        if self.spec.times is not None and self.fired >= self.spec.times:
            return False
        if self.spec.probability < 1 and self._rng.random() >= self.spec.probability:
            return False
        self.fired += 1
        return True

    def describe(self) -> dict[str, Any]:
        return {
            **self.spec.model_dump(exclude_none=True, exclude_defaults=True),
            "id": self.id,
            "method": self.spec.method,
            "matched": self.matched,
            "fired": self.fired,
        }


class FaultEngine:
    """The ordered rule list. The first rule that fires for a call decides its fault.

    All access happens on the server's event loop, so counters need no lock: a match and
    its firing decision are one synchronous step.
    """

    def __init__(self) -> None:
        self._rules: dict[str, FaultRule] = {}
        self._ids = itertools.count(1)

    def add(self, spec: FaultRuleSpec) -> FaultRule:
        rule_id = spec.id or f"rule-{next(self._ids)}"
        while spec.id is None and rule_id in self._rules:
            rule_id = f"rule-{next(self._ids)}"
        if rule_id in self._rules:
            raise KeyError(f"a rule with id {rule_id!r} already exists")
        rule = FaultRule(spec=spec, id=rule_id)
        self._rules[rule_id] = rule
        return rule

    def remove(self, rule_id: str) -> FaultRule:
        try:
            return self._rules.pop(rule_id)
        except KeyError:
            raise KeyError(f"no rule with id {rule_id!r}") from None

    def clear(self) -> int:
        count = len(self._rules)
        self._rules.clear()
        return count

    def rules(self) -> list[FaultRule]:
        return list(self._rules.values())

    def get(self, rule_id: str) -> FaultRule:
        try:
            return self._rules[rule_id]
        except KeyError:
            raise KeyError(f"no rule with id {rule_id!r}") from None

    def select(self, method: str, request: Mapping[str, Any]) -> FaultRule | None:
        """The rule whose fault this call gets, if any.

        Every matching rule counts the match, but rules after the deciding one are not
        asked to fire: a shadowed rule keeps its `times` budget and its random stream.
        """
        chosen: FaultRule | None = None
        for rule in list(self._rules.values()):
            if not rule.matches(method, request):
                continue
            if chosen is not None:
                rule.matched += 1  # shadowed: counted as a match, not asked to fire
            elif rule.try_fire():
                chosen = rule
        return chosen
