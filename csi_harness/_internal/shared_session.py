"""One cluster for all the pytest-xdist workers of a session.

The controller process runs no test; its workers do. The first worker whose test
needs the cluster brings it up, under a lock, while the others wait, and writes the
session's token (which the controller handed to every worker) into a file beside the
cluster's kubeconfig; the others find the token and attach. After every worker has
ended, the controller tears the cluster down if the token says this session made it.
A session of unit tests only never brings a cluster up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from csi_harness._internal.core.cluster_guard import refuse_cluster
from csi_harness._internal.core.cluster_lock import ClusterLock
from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.providers.provider import ClusterProvider

SESSION_FILE = "pytest-session"
"""Beside the kubeconfig of a cluster a worker brought up: the session's token."""


@contextlib.contextmanager
def worker_cluster(shared: ClusterProvider, session: str) -> Iterator[Cluster]:
    """The session's cluster, as one worker sees it: brought up by this worker if no
    other did yet, else attached. It is left running for the controller."""
    refuse_cluster(f"enter the cluster of provider {shared.key!r}")
    with ClusterLock.for_cluster(f"bring-up-{shared.key}").exclusive():
        owner = shared.directory / SESSION_FILE
        if _owned_by(owner, session):
            cluster = shared.attach()
        else:
            # A worker's terminal output is not shown: the progress goes to a file.
            log = shared.directory.with_name(f"{shared.directory.name}.bring-up.log")
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("")

            def progress(message: str) -> None:
                with log.open("a") as out:
                    out.write(f"{time.strftime('%H:%M:%S')} {message}\n")

            cluster = shared.bring_up(progress)
            owner.write_text(session)
    yield cluster


def end_session(shared: ClusterProvider, session: str, *, keep: bool) -> str | None:
    """In the controller, after the workers: tear down the cluster this session
    brought up; None when no worker needed one."""
    owner = shared.directory / SESSION_FILE
    if not _owned_by(owner, session):
        return None
    message = shared.tear_down(keep=keep)
    with contextlib.suppress(OSError):
        owner.unlink()
    return message


def _owned_by(owner: Path, session: str) -> bool:
    try:
        return owner.read_text() == session
    except OSError:
        return False
