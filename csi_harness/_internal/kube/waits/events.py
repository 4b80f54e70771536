"""Events as the suites read them, and waiting for one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Event

from csi_harness._internal.kube.watching import Kube, watch_until


@dataclass(frozen=True)
class SeenEvent:
    reason: str
    message: str
    kind: str
    name: str
    count: int

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} {self.reason}: {self.message} (x{self.count})"

    @classmethod
    def of(cls, event: Event) -> SeenEvent:
        obj = event.involvedObject
        return cls(
            reason=event.reason or "",
            message=event.message or "",
            kind=obj.kind or "",
            name=obj.name or "",
            count=event.count or 1,
        )

    def matches(
        self, reason: str | None = None, contains: str | None = None, involved: str | None = None
    ) -> bool:
        return (
            (reason is None or self.reason == reason)
            and (contains is None or contains in self.message)
            and (involved is None or self.name == involved)
        )


def events(
    kube: Client,
    namespace: str,
    *,
    reason: str | None = None,
    contains: str | None = None,
    involved: str | None = None,
) -> list[SeenEvent]:
    seen = (SeenEvent.of(event) for event in kube.list(Event, namespace=namespace))
    return [event for event in seen if event.matches(reason, contains, involved)]


_SCHEDULED = re.compile(r"^Successfully assigned (?P<pod>\S+) to (?P<node>\S+)$")


def scheduled_placements(kube: Client, namespace: str) -> set[tuple[str, str]]:
    """Each (pod, node) kube-scheduler placed a pod of ``namespace`` on, from its
    Scheduled events: they outlive the pods, so a pod deleted since still counts."""
    found = (
        _SCHEDULED.match(event.message) for event in events(kube, namespace, reason="Scheduled")
    )
    return {(match["pod"], match["node"]) for match in found if match is not None}


def wait_event(
    kube: Kube,
    namespace: str,
    *,
    reason: str,
    contains: str | None = None,
    involved: str | None = None,
    timeout: float = 60,
) -> SeenEvent:
    def check(found: dict[str, Event]) -> tuple[bool, Any]:
        seen = [SeenEvent.of(event) for event in found.values()]
        matching = [event for event in seen if event.matches(reason, contains, involved)]
        if matching:
            return True, matching[0]
        recent = [str(e) for e in seen][-8:]
        return False, recent or "no events"

    what = f"a {reason} event" + (f" for {involved}" if involved else "")
    what += f" containing {contains!r}" if contains else ""
    event: SeenEvent = watch_until(
        kube, Event, namespace=namespace, what=what, check=check, timeout=timeout
    )
    return event
