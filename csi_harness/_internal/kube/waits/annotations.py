"""Following an annotation's values over time (e.g. a claim's selected node)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lightkube.resources.core_v1 import PersistentVolumeClaim

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.kube.waits.claims import SELECTED_NODE
from csi_harness._internal.kube.watching import Kube, Selection, follow

HISTORY_SLICE = 1.0
"""Seconds of one watch request of an ``AnnotationHistory``: how long its thread
outlives stop()."""


@dataclass
class AnnotationHistory:
    """Every value an annotation of one PVC takes, in order, as seen by a watch
    (None while it is absent); start() before the PVC changes, stop() after.

    Between two watch requests the watch resumes from the last resourceVersion it
    saw, so no change is lost there. After an error it must list again, and what
    changed meanwhile may be lost: stop() then raises ``HistoryIncomplete``, as an
    absence read from such a history proves nothing. stop() waits for the current
    watch request to end (at most ``HISTORY_SLICE`` seconds), so every change made
    before it was called is in the history."""

    kube: Kube
    name: str
    namespace: str
    key: str = SELECTED_NODE
    values: list[str | None] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None
    _seen_claim: bool = False
    retried: list[str] = field(default_factory=list)
    """Watch errors after which the watch listed again (changes in between may be lost)."""

    def start(self) -> AnnotationHistory:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _record(self, value: str | None) -> None:
        if not self.values or self.values[-1] != value:
            self.values.append(value)

    def _run(self) -> None:
        selection = Selection(
            PersistentVolumeClaim, self.namespace, fields={"metadata.name": self.name}
        )
        while not self._stop.is_set():
            states = follow(
                self.kube,
                selection,
                stopped=self._stop.is_set,
                on_error=lambda exc: self.retried.append(str(exc)),
                slice_seconds=HISTORY_SLICE,
            )
            try:
                with contextlib.closing(states):
                    # Read to the end of the slice, also once stopped: a change made
                    # before stop() may still be on its way.
                    for claims in states:
                        claim = claims.get(self.name)
                        self._seen_claim = self._seen_claim or claim is not None
                        annotations = (
                            claim.metadata.annotations if claim and claim.metadata else None
                        )
                        self._record((annotations or {}).get(self.key))
            except Exception as exc:  # what follow() does not retry (403 ...): try again
                # A new watch starts from a new list: changes in between may be lost, so
                # the history is no longer complete, and stop() says so.
                self._failed(exc)
                time.sleep(0.2)

    def _value(self, claim: PersistentVolumeClaim | None) -> str | None:
        annotations = claim.metadata.annotations if claim and claim.metadata else None
        return (annotations or {}).get(self.key)

    def _failed(self, exc: Exception) -> None:
        self._error = exc

    def wait_for_values(
        self, predicate: Callable[[list[str | None]], bool], what: str, timeout: float = 60
    ) -> list[str | None]:
        def probe() -> tuple[bool, list[str | None]]:
            self._raise_error()
            return predicate(list(self.values)), list(self.values)

        return wait_for(
            f"{self.key} of {self.namespace}/{self.name} to show {what}",
            probe,
            timeout=timeout,
            interval=0.25,
        )

    def stop(self) -> list[str | None]:
        """Stop following and return the values. Raises HistoryIncomplete when the watch
        failed in a way that may have lost changes, or never saw the claim at all: an
        absence read from such a history would prove nothing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HISTORY_SLICE + 10)
        self._raise_error()
        if self.retried:
            raise HistoryIncomplete(
                f"the watch of {self.namespace}/{self.name} listed again after "
                f"{len(self.retried)} error(s), so changes of {self.key} in between may be "
                f"missing: {self.retried[-1]}"
            )
        if not self._seen_claim:
            raise HistoryIncomplete(
                f"the watch never saw claim {self.namespace}/{self.name}: its history of "
                f"{self.key} ({self.values}) cannot show that a value was never set"
            )
        return list(self.values)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise HistoryIncomplete(
                f"the watch of {self.namespace}/{self.name} failed and started again, so "
                f"changes of {self.key} may be missing: {self._error}"
            ) from self._error


class HistoryIncomplete(AssertionError):
    """An ``AnnotationHistory`` that cannot vouch for every value the annotation took."""
