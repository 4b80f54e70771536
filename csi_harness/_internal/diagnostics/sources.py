"""Where diagnostics look: the cluster's API (its kubeconfig), the component logs (a
log directory, or the driver's own), and the admin API of every driver instance."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod

from csi_harness._internal.deploy import snapshot_controller
from csi_harness._internal.deploy.spec import DRIVER_NAMESPACE
from csi_harness._internal.providers.base import Cluster, Driver
from csi_mock.admin.client import AdminClient
from csi_mock.observe.calls import CallRecord


class JournalSource(Protocol):
    """The part of an ``AdminClient`` the journal section reads."""

    def journal(self, *, limit: int) -> Sequence[CallRecord]: ...


class ComponentLogs(Protocol):
    """Where the component logs come from."""

    @property
    def location(self) -> str:
        """Where they are, for the overview."""
        ...

    def components(self) -> list[str]:
        """The components that have a log (may raise OSError)."""
        ...

    def tail(self, component: str, max_bytes: int) -> str:
        """The last ``max_bytes`` of the component's log, from a whole line on."""
        ...


@dataclass(frozen=True)
class LogDirectory:
    """A ``<component>.log`` file per process in one directory (the local provider)."""

    path: Path

    @property
    def location(self) -> str:
        return str(self.path)

    def components(self) -> list[str]:
        return [log.stem for log in self.path.glob("*.log")]

    def tail(self, component: str, max_bytes: int) -> str:
        return read_tail(self.path / f"{component}.log", max_bytes)


class PodLogs(Protocol):
    """The part of ``lightkube.Client`` that finds a pod and reads its log."""

    def list(
        self, res: Any, *, namespace: str | None = ..., labels: dict[str, Any] | None = ...
    ) -> Iterable[Any]: ...

    def log(self, name: str, *, namespace: str | None = ...) -> Iterable[str]: ...


SHARED_COMPONENTS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    snapshot_controller.NAME: (snapshot_controller.NAMESPACE, snapshot_controller.SELECTOR),
}
"""In-cluster components that every driver's tests use and that the harness deploys
where a cluster lacks them: their pod's namespace and labels. On clusters without a
log directory their logs come through the API server, beside the driver's."""


@dataclass(frozen=True)
class DriverLogs:
    """The logs of the driver's components, as the driver gives them
    (``Driver.component_log``), for clusters that keep no log directory; with ``kube``,
    also those of the ``SHARED_COMPONENTS`` running in the cluster."""

    driver: Driver
    kube: Callable[[], PodLogs] | None = None

    @property
    def location(self) -> str:
        return f"the components of driver {self.driver.spec.name}"

    def components(self) -> list[str]:
        return self.driver.components() + list(self._shared_pods)

    def tail(self, component: str, max_bytes: int) -> str:
        pod = self._shared_pods.get(component)
        if pod is not None and self._api is not None:
            namespace, _ = SHARED_COMPONENTS[component]
            data = "".join(self._api.log(pod, namespace=namespace)).encode()
        else:
            data = self.driver.component_log(component).encode()
        return _from_a_whole_line(data[-max_bytes:], cut=len(data) > max_bytes)

    @cached_property
    def _api(self) -> PodLogs | None:
        """One client of the cluster's API for every shared component's lookup and log."""
        if self.kube is None:
            return None
        try:
            return self.kube()
        except Exception:
            return None

    @cached_property
    def _shared_pods(self) -> dict[str, str]:
        """The pod of each shared component the cluster runs, looked up once. An API
        that does not answer costs only these logs, not the driver's."""
        found: dict[str, str] = {}
        if self._api is None:
            return found
        for component, (namespace, labels) in SHARED_COMPONENTS.items():
            try:
                pods = self._api.list(Pod, namespace=namespace, labels=dict(labels))
                pod = next((pod.metadata.name for pod in pods), None)
            except Exception:
                continue
            if pod is not None:
                found[component] = pod
        return found


@dataclass(frozen=True)
class ClusterTarget:
    """Where to look: the cluster's API, its logs, the driver's admin APIs."""

    kubeconfig: Path
    logs: ComponentLogs | None
    """None: no logs to read (no log directory and no driver)."""
    admin: Mapping[str, JournalSource] = field(default_factory=dict)
    """Driver instance ("controller" or a node name) -> a client of its admin API."""
    namespace: str | None = None
    """The test's namespace, when it has one."""
    driver_name: str | None = None
    driver_namespace: str = DRIVER_NAMESPACE


@contextlib.contextmanager
def cluster_target(
    cluster: Cluster, namespace: str | None = None, driver: Driver | None = None
) -> Iterator[ClusterTarget]:
    """Where to look in ``cluster`` (and the test's ``namespace``): component logs
    from its log directory, else from the driver; the admin clients of every instance
    of the driver, closed when the context ends. ``driver``: the test's, when it has
    one of its own (None: the cluster's current driver)."""
    own = driver is not None and driver is not cluster.driver
    driver = driver if driver is not None else cluster.driver
    logs: ComponentLogs | None = None
    if cluster.log_dir is not None:
        logs = LogDirectory(cluster.log_dir)
    elif driver is not None:
        kubeconfig = cluster.kubeconfig
        logs = DriverLogs(driver, kube=lambda: Client(KubeConfig.from_file(kubeconfig)))
    if own and driver is not None:
        clients: Mapping[str, AdminClient] = {i: driver.admin(i) for i in driver.instances()}
    else:
        clients = cluster.admin_instances()
    spec = driver.spec if driver is not None else cluster.default_driver
    try:
        yield ClusterTarget(
            kubeconfig=cluster.kubeconfig,
            logs=logs,
            admin=clients,
            namespace=namespace,
            driver_name=spec.name,
            driver_namespace=spec.namespace,
        )
    finally:
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.close()


def read_tail(path: Path, max_bytes: int) -> str:
    """The last ``max_bytes`` of a file, from the first whole line on."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        data = f.read()
    return _from_a_whole_line(data, cut=size > max_bytes)


def _from_a_whole_line(data: bytes, *, cut: bool) -> str:
    """``data`` as text; when it is the end of a longer text (``cut``), from its first
    whole line on (the cut may be inside a line)."""
    if cut:
        data = data.partition(b"\n")[2]
    return data.decode(errors="replace")
