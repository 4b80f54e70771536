"""ClusterLock: shared holders run together, an exclusive one runs alone and is not
starved by shared ones that come after it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from csi_harness._internal.core.cluster_lock import ClusterLock


def hold(lock: ClusterLock, mode: str, log: list[str], name: str, seconds: float) -> None:
    with lock.exclusive() if mode == "exclusive" else lock.shared():
        log.append(f"{name} in")
        time.sleep(seconds)
        log.append(f"{name} out")


def start(*args: object) -> threading.Thread:
    thread = threading.Thread(target=hold, args=args)
    thread.start()
    return thread


def test_shared_holders_overlap(tmp_path: Path) -> None:
    lock, log = ClusterLock(tmp_path / "c.lock"), []
    threads = [start(lock, "shared", log, name, 0.3) for name in ("a", "b")]
    for thread in threads:
        thread.join()
    assert log[:2] == ["a in", "b in"] or log[:2] == ["b in", "a in"]


def test_exclusive_waits_for_shared_and_holds_back_later_shared(tmp_path: Path) -> None:
    lock, log = ClusterLock(tmp_path / "c.lock"), []
    first = start(lock, "shared", log, "first", 0.4)
    time.sleep(0.1)
    wide = start(lock, "exclusive", log, "wide", 0.3)
    time.sleep(0.1)
    later = start(lock, "shared", log, "later", 0.0)
    for thread in (first, wide, later):
        thread.join()
    assert log == ["first in", "first out", "wide in", "wide out", "later in", "later out"]


def test_for_cluster_keeps_keys_apart_and_names_files_safely(tmp_path: Path) -> None:
    one = ClusterLock.for_cluster("local-csi-harness-e2e")
    other = ClusterLock.for_cluster("existing-/etc/kube config")
    assert one.path != other.path
    assert "/" not in other.path.name and " " not in other.path.name
    assert one.turnstile.parent == one.path.parent
