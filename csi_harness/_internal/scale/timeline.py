"""What happens to a burst's claims and pods over time, as seen through watches: when
each claim is bound, to which node, how often kube-scheduler had to try again, and
when each pod was placed on its node.

``ClaimTimeline`` and ``PodTimeline`` are pure (they are fed objects and times), so
the counting is tested on its own; ``Watcher`` feeds one from a watch in a thread of
its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from lightkube import Client
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod

from csi_harness._internal.kube.waits import SELECTED_NODE
from csi_harness._internal.kube.watching import Selection, follow

WATCH_SLICE = 2.0
"""Seconds of one watch request: how late ``Watcher.stop`` may return."""


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
class PodTimeline:
    """When each pod was placed on a node (``spec.nodeName`` set), in seconds since
    ``start``.

    Placed is as far as a pod gets on a simulated node (nothing starts it there), and
    the point the KEP author's "pods running" adds only a kubelet's container start
    to: kube-scheduler binds a pod to its node after its claims are bound
    (VolumeBinding's PreBind), so a placed pod has its volumes.
    """

    start: float
    placed_at: dict[str, float] = field(default_factory=dict)
    running_at: dict[str, float] = field(default_factory=dict)
    """When each pod was first seen Running: on a cluster whose kubelets start pods
    (kind, an existing one), the author's "pods running" itself."""
    seen: set[str] = field(default_factory=set)

    def observe(self, pods: Mapping[str, Pod], now: float) -> None:
        for name, pod in pods.items():
            self.seen.add(name)
            if name not in self.placed_at and pod.spec is not None and pod.spec.nodeName:
                self.placed_at[name] = now - self.start
            running = pod.status is not None and pod.status.phase == "Running"
            if running and name not in self.running_at:
                self.running_at[name] = now - self.start
                # A pod seen Running first was placed at least as early.
                self.placed_at.setdefault(name, now - self.start)


class Timeline(Protocol):
    def observe(self, objects: Mapping[str, Any], now: float) -> None: ...


@dataclass
class Watcher:
    """A timeline kept up to date by a watch on one kind of object of a namespace
    (claims for a ``ClaimTimeline``, pods for a ``PodTimeline``) until ``stop()``."""

    kube: Client
    namespace: str
    timeline: Timeline
    resource: type[Any] = PersistentVolumeClaim
    errors: list[str] = field(default_factory=list)
    """Transient watch failures (each followed by a new list, so nothing is missed
    but the exact time of what changed meanwhile)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        name = f"{self.resource.__name__.lower()}-watch"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        states = follow(
            self.kube,
            Selection(self.resource, self.namespace),
            stopped=self._stop.is_set,
            on_error=lambda exc: self.errors.append(f"{type(exc).__name__}: {exc}"),
            slice_seconds=WATCH_SLICE,
        )
        with contextlib.closing(states):
            for objects in states:
                with self._lock:
                    self.timeline.observe(objects, time.monotonic())
                if self._stop.is_set():
                    return

    def count(self, attribute: str) -> int:
        """How many entries the timeline's dict ``attribute`` has now (e.g.
        ``bound_at``), read under the watch's lock."""
        with self._lock:
            return len(getattr(self.timeline, attribute))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_SLICE + 10)
