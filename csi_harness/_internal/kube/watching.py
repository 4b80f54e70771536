"""Waiting on the API server with a list and a watch instead of polling.

``watch_until`` lists the selected objects once, then follows their changes from the
list's resourceVersion and asks ``check`` about the whole set after every change, so
a wait answers within one event of the change, and an object that is seen
only briefly (a PVC's selected-node annotation) is not missed between polls.

A watch runs in slices of at most ``WATCH_SLICE`` seconds, each resumed from the
last resourceVersion seen: no request outlives the deadline, and a connection
that dies silently costs one slice. A 410 Gone (the version left the watch
cache), a dropped connection or a 429/5xx answer starts over with a new list.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

import httpx2
from lightkube import AsyncClient, Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta

from csi_harness._internal.core.waiting import WaitTimeout, scaled

__all__ = [
    "WATCH_SLICE",
    "LightkubeListerWatcher",
    "ListerWatcher",
    "Selection",
    "follow",
    "watch_until",
]

WATCH_SLICE = 5.0
"""Seconds of one watch request before it is resumed from the last resourceVersion."""
RETRY_PAUSE = 0.5
"""Seconds between a transient failure (connection, 429, 5xx) and the next list."""
RETRIED_STATUS = frozenset({410, 429, 500, 502, 503, 504})
"""API statuses that end a watch but not the wait: it lists again."""


class _Named(Protocol):
    @property
    def metadata(self) -> ObjectMeta | None: ...


R = TypeVar("R", bound=_Named)
T = TypeVar("T")


@dataclass(frozen=True)
class Selection(Generic[R]):
    """Which objects a wait follows: the arguments that a list and a watch share."""

    resource: type[R]
    namespace: str | None = None
    labels: Mapping[str, str] | None = None
    fields: Mapping[str, str] | None = None


class ListerWatcher(Protocol):
    """What ``follow`` needs from the API server (client-go's ListerWatcher)."""

    def list(self, selection: Selection[R], *, seconds: float) -> tuple[list[R], str]:
        """The selected objects and the list's resourceVersion; raises
        ``TimeoutError`` after ``seconds``."""
        ...

    def watch(
        self, selection: Selection[R], *, resource_version: str, seconds: float
    ) -> Generator[tuple[str, R], None, None]:
        """(event type, object) for every change after ``resource_version``; ends
        after ``seconds`` whether or not anything happened, or when closed."""
        ...


Kube: TypeAlias = Client | ListerWatcher
"""A lightkube client, or (in unit tests) anything that lists and watches like one."""


class LightkubeListerWatcher:
    """A lightkube ``AsyncClient`` driven from synchronous code on an event loop of
    its own, one per thread.

    Async because only a cancelled watch ends on our clock: lightkube 1.0.1's
    synchronous ``Client.watch`` reads with no read timeout and silently reopens a
    stream that the server ended, so a quiet watch never returns. Cancelling the
    async one closes its response (``GenericAsyncClient.watch``'s ``finally``).
    Not usable inside a running event loop.
    """

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._loop = asyncio.new_event_loop()

    @classmethod
    def of(cls, kube: Client) -> LightkubeListerWatcher:
        """One for the cluster, credentials and default namespace of ``kube``."""
        return cls(AsyncClient(config=kube.config, namespace=kube.namespace))

    def __enter__(self) -> LightkubeListerWatcher:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()

    def list(self, selection: Selection[R], *, seconds: float) -> tuple[list[R], str]:
        async def collect() -> tuple[list[R], str]:
            found = cast(Any, self._client).list(selection.resource, **_selectors(selection))
            items = [obj async for obj in found]
            return items, str(found.resourceVersion)

        try:
            return self._loop.run_until_complete(asyncio.wait_for(collect(), seconds))
        except TimeoutError:
            raise TimeoutError(f"no answer to the list in {seconds:.1f}s") from None

    def watch(
        self, selection: Selection[R], *, resource_version: str, seconds: float
    ) -> Generator[tuple[str, R], None, None]:
        end = time.monotonic() + seconds
        events = cast(
            AsyncGenerator[tuple[str, R], None],
            cast(Any, self._client).watch(
                selection.resource,
                **_selectors(selection),
                resource_version=resource_version,
                # Past our own end, so that the server does not end the stream first
                # and lightkube reopen it for nothing.
                server_timeout=math.ceil(seconds) + 1,
            ),
        )
        try:
            while (left := end - time.monotonic()) > 0:
                try:
                    event = self._loop.run_until_complete(asyncio.wait_for(anext(events), left))
                except TimeoutError:
                    return
                yield event
        finally:
            if not self._loop.is_closed():
                self._loop.run_until_complete(events.aclose())


def _selectors(selection: Selection[Any]) -> dict[str, Any]:
    return {
        "namespace": selection.namespace,
        "labels": dict(selection.labels) if selection.labels else None,
        "fields": dict(selection.fields) if selection.fields else None,
    }


@contextlib.contextmanager
def _opened(kube: Client | ListerWatcher) -> Iterator[ListerWatcher]:
    if isinstance(kube, Client):
        with LightkubeListerWatcher.of(kube) as api:
            yield api
    else:
        yield kube


def _name(obj: _Named) -> str:
    return (obj.metadata.name if obj.metadata else None) or ""


def _pause(deadline: float) -> None:
    time.sleep(max(0.0, min(RETRY_PAUSE, deadline - time.monotonic())))


def follow(
    kube: Client | ListerWatcher,
    selection: Selection[R],
    *,
    deadline: float = math.inf,
    stopped: Callable[[], bool] = lambda: False,
    on_error: Callable[[Exception], None] = lambda exc: None,
    slice_seconds: float = WATCH_SLICE,
) -> Generator[dict[str, R], None, None]:
    """The selected objects by name: after the list, then after every change.

    Ends at ``deadline`` (``time.monotonic()``) or, checked between watch slices,
    when ``stopped()``. It yields the same dict each time, updated in place.
    Transient failures (``RETRIED_STATUS``, connection errors, a list that timed
    out) go to ``on_error`` and are followed by a new list; any other error is
    raised.
    """
    with _opened(kube) as api:
        objects: dict[str, R] = {}
        version: str | None = None
        while not stopped() and (left := deadline - time.monotonic()) > 0:
            try:
                if version is None:
                    listed, version = api.list(selection, seconds=left)
                    objects.clear()
                    objects.update((_name(obj), obj) for obj in listed)
                    yield objects
                    continue
                # Closed here, also when the caller stops following mid-slice: the
                # watch's response must be closed on the event loop, which ends
                # with the ``_opened`` context.
                with contextlib.closing(
                    api.watch(selection, resource_version=version, seconds=min(slice_seconds, left))
                ) as changes:
                    for kind, obj in changes:
                        if obj.metadata and obj.metadata.resourceVersion:
                            version = obj.metadata.resourceVersion
                        if kind == "DELETED":
                            objects.pop(_name(obj), None)
                        elif kind in ("ADDED", "MODIFIED"):
                            objects[_name(obj)] = obj
                        else:  # BOOKMARK: only a newer version
                            continue
                        yield objects
            except ApiError as exc:
                if exc.status.code not in RETRIED_STATUS:
                    raise
                on_error(exc)
                version = None
                if exc.status.code != 410:  # Gone: the version is too old, nothing is wrong
                    _pause(deadline)
            except (httpx2.TransportError, TimeoutError) as exc:
                on_error(exc)
                version = None
                _pause(deadline)


def watch_until(
    kube: Client | ListerWatcher,
    resource: type[R],
    *,
    namespace: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    fields: Mapping[str, str] | None = None,
    what: str,
    check: Callable[[dict[str, R]], tuple[bool, T]],
    timeout: float,
) -> T:
    """Follow the selected objects until ``check`` returns ``(True, value)``; return
    the value.

    ``check`` gets the current objects by name (``name`` selects one by the field
    ``metadata.name``) after the list and after every change, and returns
    ``(done, observation)``. After ``timeout`` seconds it raises ``WaitTimeout`` with
    the last observation, or the last transient error if that came later, in
    ``wait_for``'s words; ``timeout`` is scaled as ``wait_for``'s is.
    """
    selected = {**(fields or {}), **({"metadata.name": name} if name is not None else {})}
    selection = Selection(resource, namespace, labels, selected or None)
    seen: object = "nothing yet"

    def failed(exc: Exception) -> None:
        nonlocal seen
        seen = f"{type(exc).__name__}: {exc}"

    timeout, said = scaled(timeout)
    deadline = time.monotonic() + timeout
    with contextlib.closing(follow(kube, selection, deadline=deadline, on_error=failed)) as states:
        for objects in states:
            done, value = check(objects)
            if done:
                return value
            seen = value
    raise WaitTimeout(f"timed out after {said} waiting for {what}; last seen: {seen}")
