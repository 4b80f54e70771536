"""A cluster provider owns the lifecycle of the cluster it gives the suites.

As a context manager a provider is all a caller needs::

    with LocalProvider(config, progress=print) as cluster:
        ...  # brought up (or attached to), ready for the suites

Entered, it brings its cluster up, or attaches to a running one; left, it tears down
what it brought up, or releases or keeps it, or leaves an attached cluster as it found
it, and says which on ``progress``. The pytest plugin, its xdist workers and the
``csi-harness`` commands all go through these methods, so no caller writes start-up or
tear-down of its own. What each step does is the provider's (``providers/local``,
``providers/kind``, ``providers/existing``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Generic

from typing_extensions import TypeVar

from csi_harness._internal.core.cluster_guard import refuse_cluster
from csi_harness._internal.providers.base import Cluster

Progress = Callable[[str], None]
C = TypeVar("C", bound=Cluster, default=Cluster, covariant=True)
"""What a provider's clusters are (``ClusterProvider[LocalCluster]``); a provider that
says nothing gives a ``Cluster``."""


def silent(_: str) -> None:
    """A progress sink that drops every line."""


class ClusterProvider(ABC, Generic[C]):
    """Brings up, attaches to and ends one cluster.

    ``keep``: leave a cluster this provider brought up running at exit (and after a
    failed bring-up, for inspection). ``attach``: enter by attaching to the running
    cluster instead of bringing one up; at exit it is left as it was found.
    """

    def __init__(self, *, progress: Progress = silent, keep: bool = False, attach: bool = False):
        self.progress = progress
        self.keep = keep
        self.attaching = attach
        self._cluster: C | None = None

    @property
    @abstractmethod
    def key(self) -> str:
        """Names the cluster among others on this host (e.g. for a bring-up lock)."""

    @property
    @abstractmethod
    def directory(self) -> Path:
        """The cluster's own directory on this host (its kubeconfig is there)."""

    @abstractmethod
    def bring_up(self, progress: Progress | None = None) -> C:
        """Bring the cluster up and return it ready for the suites; ``progress``
        overrides the provider's for this bring-up (e.g. a log file of a worker)."""

    @abstractmethod
    def attach(self) -> C:
        """The running cluster, brought up earlier by this provider or another
        process, ready for the suites; fails saying why when it is not running."""

    @abstractmethod
    def tear_down(self, *, keep: bool) -> str:
        """End the cluster this provider (or another process) brought up: remove it,
        or with ``keep`` release it (leave it running without the suites' drivers).
        Returns what was done, for the progress line."""

    @property
    def brings_up(self) -> bool:
        """Whether this provider brings a cluster up at all (an existing cluster's
        does not: ``bring_up`` only checks it)."""
        return True

    def check(self) -> None:
        """Fail now, saying why, if entering cannot work (the cluster to attach to is
        not running, the one to use does not answer); nothing is changed. Nothing to
        check by default."""
        return None

    def leave(self, cluster: Cluster) -> str:
        """Put an attached cluster back as it was found; returns what was done."""
        return f"cluster {cluster.name!r} left running"

    # -- as a context manager ------------------------------------------------------

    def __enter__(self) -> C:
        refuse_cluster(f"enter the cluster of provider {self.key!r}")
        self._cluster = self.attach() if self.attaching else self.bring_up()
        return self._cluster

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        cluster = self._cluster
        if cluster is None:
            return
        try:
            if self.attaching:
                self.progress(self.leave(cluster))
            else:
                self.progress(self.tear_down(keep=self.keep))
        finally:
            self._cluster = None
