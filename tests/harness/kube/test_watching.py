"""Waiting by list and watch: when the wait ends, what it lists again after, and what
it says when it times out. ``FakeApi`` plays the API server from a script;
``LightkubeListerWatcher`` is tried against lightkube over a mock transport."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.core.waiting import TIME_SCALE_VARIABLE, WaitTimeout
from csi_harness._internal.kube import watching
from csi_harness._internal.kube.watching import (
    LightkubeListerWatcher,
    Selection,
    follow,
    watch_until,
)

Step = tuple[str, Any] | Exception


@dataclass
class FakeApi:
    """Answers lists and watches from scripts, in order. A watch whose script is
    used up is quiet until its ``seconds`` end, as a server's would be."""

    lists: list[tuple[list[Any], str] | Exception]
    watches: list[list[Step]] = field(default_factory=list)
    listed: list[Selection[Any]] = field(default_factory=list)
    watched: list[str] = field(default_factory=list)
    """The resourceVersion each watch started from."""

    def list(self, selection: Selection[Any], *, seconds: float) -> tuple[list[Any], str]:
        self.listed.append(selection)
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def watch(
        self, selection: Selection[Any], *, resource_version: str, seconds: float
    ) -> Iterator[tuple[str, Any]]:
        self.watched.append(resource_version)
        for step in self.watches.pop(0) if self.watches else []:
            if isinstance(step, Exception):
                raise step
            yield step
        time.sleep(seconds)


def pod(name: str, version: str, node: str | None = None) -> Any:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
            "spec": {"containers": [{"name": "app"}], **({"nodeName": node} if node else {})},
            "status": {"phase": "Pending"},
        }
    )


def api_error(code: int, message: str) -> ApiError:
    return ApiError(status=Status(code=code, message=message, reason="Expired"))


def node_of(name: str) -> Any:
    """A check: done when pod ``name`` has a node; the node, or what the pod is."""

    def check(pods: dict[str, Pod]) -> tuple[bool, str]:
        found = pods.get(name)
        if found is None:
            return False, f"no pod {name}"
        node = found.spec.nodeName if found.spec else None
        return bool(node), node or "unscheduled"

    return check


def wait_node(api: FakeApi, name: str = "app", timeout: float = 5) -> str:
    result: str = watch_until(
        api, Pod, namespace="ns", name=name, what="a node", check=node_of(name), timeout=timeout
    )
    return result


def test_a_listed_state_that_satisfies_the_check_ends_the_wait_without_a_watch() -> None:
    api = FakeApi(lists=[([pod("app", "5", node="worker")], "10")])

    assert wait_node(api) == "worker"
    assert api.watched == []


def test_a_name_is_selected_by_the_metadata_name_field() -> None:
    api = FakeApi(lists=[([pod("app", "5", node="worker")], "10")])

    wait_node(api)

    assert api.listed == [Selection(Pod, "ns", None, {"metadata.name": "app"})]


def test_a_later_modified_event_ends_the_wait_and_the_watch_starts_at_the_lists_version() -> None:
    api = FakeApi(
        lists=[([pod("app", "5")], "10")],
        watches=[[("MODIFIED", pod("app", "11")), ("MODIFIED", pod("app", "12", node="worker"))]],
    )

    assert wait_node(api) == "worker"
    assert api.watched == ["10"]


def test_a_deleted_event_removes_the_object() -> None:
    api = FakeApi(
        lists=[([pod("app", "5"), pod("other", "6")], "10")],
        watches=[[("DELETED", pod("app", "11"))]],
    )

    left = watch_until(
        api,
        Pod,
        namespace="ns",
        what="app to go",
        check=lambda pods: ("app" not in pods, sorted(pods)),
        timeout=5,
    )

    assert left == ["other"]


def test_a_410_lists_again_and_watches_from_the_new_lists_version() -> None:
    api = FakeApi(
        lists=[([pod("app", "5")], "10"), ([pod("app", "40")], "50")],
        watches=[
            [api_error(410, "too old resource version: 10 (30)")],
            [("MODIFIED", pod("app", "51", node="worker"))],
        ],
    )

    assert wait_node(api) == "worker"
    assert len(api.listed) == 2
    assert api.watched == ["10", "50"]


def test_a_dropped_connection_lists_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watching, "RETRY_PAUSE", 0.01)
    api = FakeApi(
        lists=[([pod("app", "5")], "10"), ([pod("app", "20", node="worker")], "21")],
        watches=[[httpx2.ReadError("connection reset by peer")]],
    )

    assert wait_node(api) == "worker"
    assert len(api.listed) == 2


def test_an_error_that_waiting_cannot_cure_is_raised_at_once() -> None:
    api = FakeApi(lists=[([pod("app", "5")], "10")], watches=[[api_error(403, "forbidden")]])

    started = time.monotonic()
    with pytest.raises(ApiError, match="forbidden"):
        wait_node(api)
    assert time.monotonic() - started < 0.5


def test_each_watch_slice_resumes_from_the_last_version_seen() -> None:
    api = FakeApi(lists=[([], "10")], watches=[[("ADDED", pod("app", "12"))], []])

    states = follow(api, Selection(Pod, "ns"), deadline=time.monotonic() + 0.2, slice_seconds=0.05)
    for _ in states:
        pass

    assert api.watched[:3] == ["10", "12", "12"]
    assert len(api.listed) == 1


def test_a_timeout_names_the_last_observation_and_keeps_the_deadline() -> None:
    api = FakeApi(lists=[([], "10")], watches=[[("ADDED", pod("app", "11"))]])

    started = time.monotonic()
    with pytest.raises(WaitTimeout) as failure:
        wait_node(api, timeout=0.3)
    elapsed = time.monotonic() - started

    assert str(failure.value) == "timed out after 0.3s waiting for a node; last seen: unscheduled"
    assert 0.3 <= elapsed < 1.3


# LightkubeListerWatcher, against lightkube's AsyncClient over a mock transport.

KUBECONFIG = {
    "clusters": [{"name": "test", "cluster": {"server": "http://kube.test"}}],
    "users": [{"name": "test", "user": {}}],
    "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    "current-context": "test",
}


class Stream(httpx2.AsyncByteStream):
    """A watch response: these lines, then silence for ``quiet`` seconds."""

    def __init__(self, lines: list[dict[str, Any]], quiet: float) -> None:
        self.lines = lines
        self.quiet = quiet
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for line in self.lines:
            yield json.dumps(line).encode() + b"\n"
        await asyncio.sleep(self.quiet)

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class MockServer:
    list_body: dict[str, Any] = field(default_factory=dict)
    watch_lines: list[dict[str, Any]] = field(default_factory=list)
    requests: list[httpx2.Request] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        headers = {"Content-Type": "application/json"}
        if request.url.params.get("watch") != "true":
            return httpx2.Response(200, headers=headers, json=self.list_body)
        stream = Stream(self.watch_lines, quiet=30)
        self.streams.append(stream)
        return httpx2.Response(200, headers=headers, stream=stream)

    def lister_watcher(self) -> LightkubeListerWatcher:
        config = KubeConfig.from_dict(KUBECONFIG)
        client = AsyncClient(config=config, transport=httpx2.MockTransport(self))
        return LightkubeListerWatcher(client)


def pod_json(name: str, version: str) -> dict[str, Any]:
    metadata = {"name": name, "resourceVersion": version}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def test_lightkube_list_gives_the_objects_and_the_lists_version() -> None:
    server = MockServer(
        list_body={
            "apiVersion": "v1",
            "kind": "PodList",
            "metadata": {"resourceVersion": "10"},
            "items": [pod_json("app", "5")],
        }
    )
    with server.lister_watcher() as api:
        selection = Selection(Pod, "ns", fields={"metadata.name": "app"})
        objects, version = api.list(selection, seconds=5)

    assert [o.metadata.name for o in objects if o.metadata] == ["app"]
    assert version == "10"
    assert server.requests[0].url.params["fieldSelector"] == "metadata.name=app"


def test_lightkube_watch_of_a_quiet_stream_ends_after_its_seconds() -> None:
    # lightkube's own watch would read the silent stream for 30 s, and then reopen it.
    server = MockServer(watch_lines=[{"type": "ADDED", "object": pod_json("app", "11")}])
    with server.lister_watcher() as api:
        started = time.monotonic()
        seen = list(api.watch(Selection(Pod, "ns"), resource_version="10", seconds=0.3))
        elapsed = time.monotonic() - started

    assert [(kind, obj.metadata and obj.metadata.resourceVersion) for kind, obj in seen] == [
        ("ADDED", "11")
    ]
    assert 0.3 <= elapsed < 1
    assert server.requests[0].url.params["resourceVersion"] == "10"
    assert all(stream.closed for stream in server.streams)


def test_lightkube_watch_raises_the_410_of_an_error_event() -> None:
    expired = {"kind": "Status", "apiVersion": "v1", "code": 410, "message": "too old"}
    server = MockServer(watch_lines=[{"type": "ERROR", "object": expired}])
    with server.lister_watcher() as api, pytest.raises(ApiError) as failure:
        list(api.watch(Selection(Pod, "ns"), resource_version="10", seconds=5))

    assert failure.value.status.code == 410


def test_a_time_scale_lengthens_the_watch_and_the_timeout_says_by_what(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIME_SCALE_VARIABLE, "3")
    api = FakeApi(lists=[([], "10")], watches=[[("ADDED", pod("app", "11"))]])

    started = time.monotonic()
    with pytest.raises(WaitTimeout) as failure:
        wait_node(api, timeout=0.3)
    elapsed = time.monotonic() - started

    assert str(failure.value).startswith(
        "timed out after 0.9s (0.3s x 3 from CSI_HARNESS_TIME_SCALE) waiting for a node"
    )
    assert 0.9 <= elapsed < 1.9
