"""Fault rules: declarative misbehaviour matched against each RPC.

A rule matches a method (exact or glob) and optional request predicates (key fields, and
conditions on any field of the whole request); when it fires it delays, hangs until the
caller's deadline, fails with a status code, rewrites reply fields, or turns the
handler's failure into success. Firing can be limited to the first N matches after
skipping K, made probabilistic under a seed, or left on until the rule is removed.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from csi_mock.fault_rules import FaultRuleSpec
from csi_mock.fault_schema import RequestCondition, compile_override, compile_where
from csi_mock.model.field_path import FieldPath
from csi_mock.observe.calls import request_segments


@dataclass
class FaultRule:
    """A live rule: its spec, counters and random stream."""

    spec: FaultRuleSpec
    id: str
    matched: int = 0
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)
    conditions: tuple[RequestCondition, ...] = field(init=False, repr=False)
    """The spec's `where`, parsed once."""
    rewrites: tuple[tuple[FieldPath, Any], ...] = field(init=False, repr=False)
    """The spec's `override`: reply field paths, parsed once, and their values."""

    def __post_init__(self) -> None:
        self._rng = random.Random(self.spec.seed)
        self.conditions = compile_where(self.spec.where)
        self.rewrites = compile_override(self.spec.override)

    def matches(
        self,
        method: str,
        request: Mapping[str, Any],
        whole_request: Callable[[], Mapping[str, Any]] | None = None,
    ) -> bool:
        """Whether the call matches: `request` holds its key fields, `whole_request`
        gives the whole request as a JSON-like tree (asked only when a `where` condition
        needs it; without it the conditions look at `request`)."""
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
        if self.conditions:
            tree = whole_request() if whole_request is not None else request
            if not all(condition.holds(tree) for condition in self.conditions):
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

    def select(
        self,
        method: str,
        request: Mapping[str, Any],
        whole_request: Callable[[], Mapping[str, Any]] | None = None,
    ) -> FaultRule | None:
        """The rule whose fault this call gets, if any.

        Every matching rule counts the match, but rules after the deciding one are not
        asked to fire: a shadowed rule keeps its `times` budget and its random stream.
        `whole_request` is called at most once, and only when a rule's `where` needs it.
        """
        whole = functools.cache(whole_request) if whole_request is not None else None
        chosen: FaultRule | None = None
        for rule in list(self._rules.values()):
            if not rule.matches(method, request, whole):
                continue
            if chosen is not None:
                rule.matched += 1  # shadowed: counted as a match, not asked to fire
            elif rule.try_fire():
                chosen = rule
        return chosen
