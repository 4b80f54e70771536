"""What happens to a burst's claims over time, as seen through a watch: when each is
bound, to which node, and how often kube-scheduler had to try again.

``ClaimTimeline`` is pure (it is fed claims and times), so the counting is tested
on its own; ``ClaimWatcher`` feeds it from a watch in a thread of its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim

from csi_harness._internal.kube.waits import SELECTED_NODE
from csi_harness._internal.kube.watching import Selection, follow

WATCH_SLICE = 2.0
"""Seconds of one watch request: how late ``ClaimWatcher.stop`` may return."""


@dataclass
class ClaimTimeline:
    """Each claim's story, in seconds since ``start`` (a ``time.monotonic()``).

    A reschedule is a selected-node annotation taken off a claim that is not bound:
    external-provisioner does that when CreateVolume fails in a way a different
    node may fix (RESOURCE_EXHAUSTED with a selected node), so that kube-scheduler
    picks again.
    """

    start: float
    bound_at: dict[str, float] = field(default_factory=dict)
    node_of: dict[str, str] = field(default_factory=dict)
    """The selected node of every claim that has or had one (the last one)."""
    reschedules: dict[str, int] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    _selected: dict[str, str | None] = field(default_factory=dict)
    _versions: dict[str, str] = field(default_factory=dict)

    def observe(self, claims: Mapping[str, PersistentVolumeClaim], now: float) -> None:
        """Take in the claims as they are at ``now``; only changed ones are looked at."""
        for name, claim in claims.items():
            version = (claim.metadata.resourceVersion if claim.metadata else None) or ""
            if self._versions.get(name) == version and version:
                continue
            self._versions[name] = version
            self.seen.add(name)
            annotations = (claim.metadata.annotations if claim.metadata else None) or {}
            selected = annotations.get(SELECTED_NODE)
            before = self._selected.get(name)
            bound = claim.status is not None and claim.status.phase == "Bound"
            if before is not None and selected is None and not bound:
                self.reschedules[name] = self.reschedules.get(name, 0) + 1
            self._selected[name] = selected
            if selected is not None:
                self.node_of[name] = selected
            if bound and name not in self.bound_at:
                self.bound_at[name] = now - self.start

    @property
    def total_reschedules(self) -> int:
        return sum(self.reschedules.values())

    def bound_series(self) -> list[tuple[float, int]]:
        """(seconds, claims bound by then) at every binding, in time order."""
        return [(t, i + 1) for i, t in enumerate(sorted(self.bound_at.values()))]


@dataclass
class ClaimWatcher:
    """A ``ClaimTimeline`` kept up to date by a watch on the claims of a namespace
    until ``stop()``."""

    kube: Client
    namespace: str
    timeline: ClaimTimeline
    errors: list[str] = field(default_factory=list)
    """Transient watch failures (each followed by a new list, so nothing is missed
    but the exact time of what changed meanwhile)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> ClaimWatcher:
        self._thread = threading.Thread(target=self._run, name="claim-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        states = follow(
            self.kube,
            Selection(PersistentVolumeClaim, self.namespace),
            stopped=self._stop.is_set,
            on_error=lambda exc: self.errors.append(f"{type(exc).__name__}: {exc}"),
            slice_seconds=WATCH_SLICE,
        )
        with contextlib.closing(states):
            for claims in states:
                with self._lock:
                    self.timeline.observe(claims, time.monotonic())
                if self._stop.is_set():
                    return

    def bound(self) -> int:
        with self._lock:
            return len(self.timeline.bound_at)

    def stop(self) -> ClaimTimeline:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_SLICE + 10)
        return self.timeline
