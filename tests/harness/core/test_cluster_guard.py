"""The cluster guard: under ``NO_CLUSTER_ENV`` nothing brings up, tears down or enters
a real cluster; it fails at once naming what holds the guard. Each case is arranged
so that a guard that let it through would fail harmlessly (a run directory too deep
to bring anything up in, one that does not exist, a provider that only records)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from csi_harness._internal.core.cluster_guard import NO_CLUSTER_ENV, ClusterRefused
from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.providers.local.cluster import LocalCluster
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.providers.provider import ClusterProvider, Progress
from csi_harness._internal.shared_session import worker_cluster

HOLDER = "unit test test_x (no clusters here)"


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(NO_CLUSTER_ENV, HOLDER)
    yield


def test_this_repositorys_unit_tests_run_under_the_guard() -> None:
    """tests/conftest.py sets it around every test outside tests/e2e."""
    reason = os.environ.get(NO_CLUSTER_ENV, "")
    assert "test_this_repositorys_unit_tests_run_under_the_guard" in reason


def unbringable(tmp_path: Path) -> LocalCluster:
    """A local cluster whose bring-up would stop before starting anything: its run
    directory is too deep for its sockets."""
    deep = tmp_path / ("d" * 120)
    return LocalCluster(LocalClusterConfig(name="guarded", run_dir=deep), progress=print)


@pytest.mark.usefixtures("guarded")
def test_a_local_cluster_is_not_brought_up(tmp_path: Path) -> None:
    with pytest.raises(ClusterRefused, match=r"bring up local cluster 'guarded': unit test"):
        unbringable(tmp_path).up()


@pytest.mark.usefixtures("guarded")
def test_a_local_cluster_is_not_torn_down(tmp_path: Path) -> None:
    cluster = LocalCluster(LocalClusterConfig(name="guarded", run_dir=tmp_path / "absent"))
    with pytest.raises(ClusterRefused, match=r"tear down local cluster 'guarded'"):
        cluster.down()


@pytest.mark.usefixtures("guarded")
def test_the_local_provider_neither_brings_up_nor_removes_after_the_refusal(
    tmp_path: Path,
) -> None:
    provider = LocalProvider(unbringable(tmp_path).config)
    with pytest.raises(ClusterRefused, match="bring up"):
        provider.bring_up()
    assert provider.last_teardown is None


class RecordingProvider(ClusterProvider):
    """A provider that only records what it was asked to do."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    @property
    def key(self) -> str:
        return "recording"

    @property
    def directory(self) -> Path:
        return Path("/nonexistent/recording")

    def bring_up(self, progress: Progress | None = None) -> Cluster:
        self.calls.append("bring_up")
        raise AssertionError("brought up under the guard")

    def attach(self) -> Cluster:
        self.calls.append("attach")
        raise AssertionError("attached under the guard")

    def tear_down(self, *, keep: bool) -> str:
        self.calls.append("tear_down")
        return ""


@pytest.mark.usefixtures("guarded")
def test_no_provider_is_entered() -> None:
    provider = RecordingProvider()
    with (
        pytest.raises(ClusterRefused, match=r"enter the cluster of provider 'recording'"),
        provider,
    ):
        pass
    assert provider.calls == []


@pytest.mark.usefixtures("guarded")
def test_no_xdist_worker_brings_up_or_attaches_to_the_sessions_cluster() -> None:
    provider = RecordingProvider()
    with pytest.raises(ClusterRefused), worker_cluster(provider, "token"):
        pass
    assert provider.calls == []


def test_without_the_guard_nothing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_CLUSTER_ENV, raising=False)
    provider = RecordingProvider()
    with pytest.raises(AssertionError, match="brought up"), provider:
        pass
    assert provider.calls == ["bring_up"]
