"""A typed client for the admin API.

`AsyncAdminClient` is the one implementation (httpx.AsyncClient); `AdminClient` is
its synchronous face, running each of its coroutines on a private event loop, so the
two expose the same methods with the same behaviour. A refused request raises
AdminError carrying the HTTP status, the API's message and the field it names.

    async with AsyncAdminClient("/var/lib/csi-mock/admin.sock") as admin:
        rule = await admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=1)
        await admin.resize_pool("node-1", "20Gi")

    with AdminClient(url="http://10.0.0.7:9809", token=token) as admin:
        print(admin.pools())
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, Unpack, overload

import httpx

from csi_mock.admin._calls import (
    AdminConnectionError,
    AdminError,
    Api,
    Call,
    FaultSpec,
    FieldProblem,
    JournalFilter,
    QueryValue,
    fault_body,
)
from csi_mock.admin._portal import run_blocking
from csi_mock.admin.views import (
    ConditionView,
    FaultRuleView,
    Health,
    HealthView,
    Limits,
    PoolView,
    RegistrationView,
    SnapshotPage,
    SwitchesView,
    VolumePage,
)
from csi_mock.host.neighbours import Neighbour
from csi_mock.observe.calls import CallRecord

__all__ = [
    "AUTHORIZATION",
    "DEFAULT_TIMEOUT",
    "AdminClient",
    "AdminConnectionError",
    "AdminError",
    "AsyncAdminClient",
    "FaultSpec",
    "FieldProblem",
    "JournalFilter",
    "QueryValue",
    "fault_body",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")

DEFAULT_TIMEOUT = 30.0
AUTHORIZATION = "Authorization"
_UNIX_BASE_URL = "http://csi-mock"  # the host is ignored on a unix socket


# -- connection ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Endpoint:
    socket: str | None
    base_url: str
    headers: dict[str, str]

    @classmethod
    def of(
        cls,
        socket: str | os.PathLike[str] | None,
        url: str | None,
        token: str | None,
        token_header: str,
        headers: Mapping[str, str] | None,
    ) -> _Endpoint:
        if (socket is None) == (url is None):
            raise ValueError("give the admin API's unix socket or its url (with a token)")
        sent = dict(headers or {})
        if token:
            sent[token_header] = f"Bearer {token}" if token_header == AUTHORIZATION else token
        if socket is not None:
            return cls(os.fspath(socket), _UNIX_BASE_URL, sent)
        assert url is not None
        return cls(None, url, sent)

    def describe(self) -> str:
        return f"unix://{self.socket}" if self.socket else self.base_url


def _unreachable(endpoint: _Endpoint, error: httpx.TransportError) -> AdminConnectionError:
    return AdminConnectionError(
        f"cannot reach the admin API at {endpoint.describe()}: {error or type(error).__name__}"
    )


# -- the clients -----------------------------------------------------------------------


class AsyncAdminClient:
    """The admin API over httpx.AsyncClient: a unix socket, or a URL with a token."""

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        token_header: str = AUTHORIZATION,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        self.endpoint = _Endpoint.of(socket, url, token, token_header, headers)
        transport = (
            httpx.AsyncHTTPTransport(uds=self.endpoint.socket) if self.endpoint.socket else None
        )
        self._http = httpx.AsyncClient(
            base_url=self.endpoint.base_url,
            headers=self.endpoint.headers,
            timeout=timeout,
            transport=transport,
            verify=verify,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[_T]) -> _T:
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, json=call.body
            )
        except httpx.TransportError as error:
            raise _unreachable(self.endpoint, error) from error
        return call.result(response)

    async def health(self) -> Health:
        """Readiness (never raises for a not-ready driver: look at .ready)."""
        return await self._send(Api.health())

    async def faults(self) -> list[FaultRuleView]:
        return await self._send(Api.faults())

    async def fault(self, rule_id: str) -> FaultRuleView:
        return await self._send(Api.fault(rule_id))

    async def add_fault(self, method: str, **spec: Unpack[FaultSpec]) -> FaultRuleView:
        """Add a rule at the end of the list, e.g. add_fault("CreateVolume", code=..., times=1)."""
        return await self._send(Api.add_fault(method, spec))

    async def remove_fault(self, rule_id: str) -> FaultRuleView:
        """Remove a rule; returns it with its final counters."""
        return await self._send(Api.remove_fault(rule_id))

    async def clear_faults(self) -> int:
        """Remove every rule; returns how many there were."""
        return await self._send(Api.clear_faults())

    async def reset(self) -> None:
        """Back to how the driver started (faults, pools, capacity, limits, switches,
        conditions, journal); a 409 AdminError names what it still holds, if anything,
        and then nothing is reset."""
        await self._send(Api.reset())

    async def pools(self) -> list[PoolView]:
        return await self._send(Api.pools())

    async def pool(self, name: str) -> PoolView:
        return await self._send(Api.pool(name))

    async def resize_pool(self, name: str, size: int | str) -> PoolView:
        """Set the pool's size (bytes or a quantity like "10Gi"); 409 below what is used."""
        return await self._send(Api.pool_action(name, "resize", {"size": size}))

    async def consume(self, name: str, amount: int | str) -> PoolView:
        """Take space outside CSI (drift); 409 beyond what is free."""
        return await self._send(Api.pool_action(name, "consume", {"bytes": amount}))

    async def release(self, name: str, amount: int | str) -> PoolView:
        """Give back space taken by consume(); 409 beyond what was consumed."""
        return await self._send(Api.pool_action(name, "release", {"bytes": amount}))

    async def capacity_frozen(self) -> bool:
        return await self._send(Api.capacity(None))

    async def freeze_capacity(self) -> bool:
        """Answer GetCapacity from a snapshot taken now, until unfrozen."""
        return await self._send(Api.capacity("freeze"))

    async def unfreeze_capacity(self) -> bool:
        return await self._send(Api.capacity("unfreeze"))

    async def limits(self) -> Limits:
        return await self._send(Api.limits())

    async def set_limits(
        self, *, max_volumes_per_node: int | None = None, attach_limit: int | None = None
    ) -> Limits:
        """Change the given limits (both or neither: a 409 for either changes nothing)."""
        patch = {"max_volumes_per_node": max_volumes_per_node, "attach_limit": attach_limit}
        return await self._send(Api.limits(patch))

    async def renew_registration(self) -> RegistrationView:
        """Register with the kubelet again (its socket taken away and served anew): the
        kubelet asks NodeGetInfo again, so a changed ``max_volumes_per_node`` reaches
        the node's CSINode. A 409 AdminError when this process does not register."""
        return await self._send(Api.renew_registration())

    async def neighbours(self) -> list[Neighbour]:
        """The pod's programs this driver may pause (admin.neighbours), with their pids."""
        return await self._send(Api.neighbours())

    async def pause_neighbour(self, name: str) -> Neighbour:
        """SIGSTOP the program's processes; returns once each shows as stopped. A 404
        AdminError for a program admin.neighbours does not name; 409 when none runs, one
        may not be signalled or one does not stop within 2 s (nothing is left paused)."""
        return await self._send(Api.neighbour_action(name, "pause"))

    async def resume_neighbour(self, name: str) -> Neighbour:
        """SIGCONT the program's processes."""
        return await self._send(Api.neighbour_action(name, "resume"))

    async def switches(self) -> SwitchesView:
        return await self._send(Api.switches())

    async def set_switches(
        self,
        *,
        controller_expansion: bool | None = None,
        node_expansion: bool | None = None,
        node_expansion_required: bool | None = None,
        online_expansion: bool | None = None,
        volume_stats: bool | None = None,
    ) -> SwitchesView:
        """Change the given switches (all or none: a 409 for one changes nothing)."""
        patch = {
            "controller_expansion": controller_expansion,
            "node_expansion": node_expansion,
            "node_expansion_required": node_expansion_required,
            "online_expansion": online_expansion,
            "volume_stats": volume_stats,
        }
        return await self._send(Api.switches(patch))

    async def condition(self, volume_id: str) -> ConditionView:
        return await self._send(Api.condition(volume_id))

    async def set_condition(
        self, volume_id: str, *, abnormal: bool, message: str = ""
    ) -> ConditionView:
        """What ListVolumes, ControllerGetVolume and NodeGetVolumeStats report for it."""
        body = {"abnormal": abnormal, "message": message}
        return await self._send(Api.condition(volume_id, "PUT", body))

    async def clear_condition(self, volume_id: str) -> ConditionView:
        return await self._send(Api.condition(volume_id, "DELETE"))

    async def volume_health(self, volume_id: str) -> HealthView:
        return await self._send(Api.volume_health(volume_id))

    async def set_volume_health(
        self, volume_id: str, entries: Sequence[Mapping[str, str]]
    ) -> HealthView:
        """What NodeGetVolumeHealth, ControllerGetVolumeHealth and ControllerListVolumeHealth
        report for it: entries of {"status": "INACCESSIBLE", "reason": "CamelCase",
        "message": ...}; [] reports it healthy whatever the node measures."""
        body = {"entries": [dict(entry) for entry in entries]}
        return await self._send(Api.volume_health(volume_id, "PUT", body))

    async def clear_volume_health(self, volume_id: str) -> HealthView:
        return await self._send(Api.volume_health(volume_id, "DELETE"))

    async def storage_health(self) -> HealthView:
        return await self._send(Api.storage_health())

    async def set_storage_health(self, entries: Sequence[Mapping[str, str]]) -> HealthView:
        """What NodeGetStorageHealth reports: entries of {"status": "STORAGE_UNREACHABLE",
        "reason": "CamelCase", "message": ...}; [] is healthy."""
        body = {"entries": [dict(entry) for entry in entries]}
        return await self._send(Api.storage_health("PUT", body))

    async def clear_storage_health(self) -> HealthView:
        return await self._send(Api.storage_health("DELETE"))

    async def volumes(self, *, limit: int | None = None, after: int | None = None) -> VolumePage:
        return await self._send(Api.volumes(limit, after))

    async def snapshots(
        self, *, limit: int | None = None, after: int | None = None
    ) -> SnapshotPage:
        """A page of snapshots in creation order, with the pool bytes each one takes."""
        return await self._send(Api.snapshots(limit, after))

    async def journal(self, **query: Unpack[JournalFilter]) -> list[CallRecord]:
        """Call records, oldest first, e.g. journal(method="CreateVolume", code="OK")."""
        return await self._send(Api.journal(query))

    async def secret_hash(self, value: str) -> str:
        """How a secret with this value appears in the journal's whole requests
        (``sha256:`` and the salted hash; the salt is the driver's own)."""
        return await self._send(Api.secret_hash(value))

    async def metrics_text(self) -> str:
        """The Prometheus text exposition."""
        return await self._send(Api.metrics())


class _Blocking(Generic[_P, _T]):
    """A method of AdminClient: the AsyncAdminClient method of the same name, run to
    completion on the private loop; its signature and docstring are the async one's."""

    def __init__(
        self, method: Callable[Concatenate[AsyncAdminClient, _P], Coroutine[Any, Any, _T]]
    ) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, client: None, owner: type[AdminClient]) -> Self: ...
    @overload
    def __get__(self, client: AdminClient, owner: type[AdminClient]) -> Callable[_P, _T]: ...
    def __get__(
        self, client: AdminClient | None, owner: type[AdminClient]
    ) -> Self | Callable[_P, _T]:
        if client is None:
            return self
        method, target = self._method, client.asynchronous

        @functools.wraps(method)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            return run_blocking(method(target, *args, **kwargs))

        return call


class AdminClient:
    """The same API, synchronous: usable from any thread, in a running event loop or not."""

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        token_header: str = AUTHORIZATION,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
    ) -> None:
        self.asynchronous = AsyncAdminClient(
            socket,
            url=url,
            token=token,
            token_header=token_header,
            headers=headers,
            timeout=timeout,
            verify=verify,
        )
        """The async client that does the work."""
        self.endpoint = self.asynchronous.endpoint

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        run_blocking(self.asynchronous.aclose())

    health = _Blocking(AsyncAdminClient.health)
    faults = _Blocking(AsyncAdminClient.faults)
    fault = _Blocking(AsyncAdminClient.fault)
    add_fault = _Blocking(AsyncAdminClient.add_fault)
    remove_fault = _Blocking(AsyncAdminClient.remove_fault)
    clear_faults = _Blocking(AsyncAdminClient.clear_faults)
    reset = _Blocking(AsyncAdminClient.reset)
    pools = _Blocking(AsyncAdminClient.pools)
    pool = _Blocking(AsyncAdminClient.pool)
    resize_pool = _Blocking(AsyncAdminClient.resize_pool)
    consume = _Blocking(AsyncAdminClient.consume)
    release = _Blocking(AsyncAdminClient.release)
    capacity_frozen = _Blocking(AsyncAdminClient.capacity_frozen)
    freeze_capacity = _Blocking(AsyncAdminClient.freeze_capacity)
    unfreeze_capacity = _Blocking(AsyncAdminClient.unfreeze_capacity)
    limits = _Blocking(AsyncAdminClient.limits)
    set_limits = _Blocking(AsyncAdminClient.set_limits)
    renew_registration = _Blocking(AsyncAdminClient.renew_registration)
    neighbours = _Blocking(AsyncAdminClient.neighbours)
    pause_neighbour = _Blocking(AsyncAdminClient.pause_neighbour)
    resume_neighbour = _Blocking(AsyncAdminClient.resume_neighbour)
    switches = _Blocking(AsyncAdminClient.switches)
    set_switches = _Blocking(AsyncAdminClient.set_switches)
    condition = _Blocking(AsyncAdminClient.condition)
    set_condition = _Blocking(AsyncAdminClient.set_condition)
    clear_condition = _Blocking(AsyncAdminClient.clear_condition)
    volume_health = _Blocking(AsyncAdminClient.volume_health)
    set_volume_health = _Blocking(AsyncAdminClient.set_volume_health)
    clear_volume_health = _Blocking(AsyncAdminClient.clear_volume_health)
    storage_health = _Blocking(AsyncAdminClient.storage_health)
    set_storage_health = _Blocking(AsyncAdminClient.set_storage_health)
    clear_storage_health = _Blocking(AsyncAdminClient.clear_storage_health)
    volumes = _Blocking(AsyncAdminClient.volumes)
    snapshots = _Blocking(AsyncAdminClient.snapshots)
    journal = _Blocking(AsyncAdminClient.journal)
    secret_hash = _Blocking(AsyncAdminClient.secret_hash)
    metrics_text = _Blocking(AsyncAdminClient.metrics_text)
