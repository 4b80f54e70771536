"""The local provider's lifecycle: a ``LocalCluster`` brought up from a configuration,
or attached to by its run directory (``csi-harness cluster up``, a kept session)."""

from __future__ import annotations

from pathlib import Path

from csi_harness._internal.core.cluster_guard import ClusterRefused
from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.providers.base import Cluster, scheduler_restarts
from csi_harness._internal.providers.local.cluster import LocalCluster, format_teardown
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.teardown import TeardownReport
from csi_harness._internal.providers.provider import ClusterProvider, Progress, silent


class LocalProvider(ClusterProvider[LocalCluster]):
    """A local cluster from ``config``. ``run_dir`` (attach only): the run directory of
    the running cluster, when it is not the one ``config`` names (a kubeconfig's)."""

    def __init__(
        self,
        config: LocalClusterConfig,
        *,
        run_dir: Path | None = None,
        progress: Progress = silent,
        keep: bool = False,
        attach: bool = False,
    ) -> None:
        super().__init__(progress=progress, keep=keep, attach=attach)
        self.config = config
        self.run_dir = run_dir
        self._found: tuple[DriverDeployment | None, dict[str, object]] | None = None
        self.last_teardown: TeardownReport | None = None
        """What the last removal of the cluster by this provider did (after a failed
        bring-up, or at exit); None while it removed nothing."""

    @property
    def key(self) -> str:
        return f"local-{self.config.name}"

    @property
    def directory(self) -> Path:
        return self.run_dir or self.config.effective_run_dir

    def bring_up(self, progress: Progress | None = None) -> LocalCluster:
        """Bring the cluster up; if that fails it is torn down again, unless ``keep``
        asks to leave it for inspection (``csi-harness cluster down`` removes it). The
        cluster's ``up_result`` has the bring-up's time and phases."""
        cluster = LocalCluster(self.config, progress=progress or self.progress)
        try:
            cluster.up()
        except ClusterRefused:
            raise  # nothing was started, and nothing may be removed
        except BaseException:
            if not self.keep:
                self.last_teardown = cluster.down()
            raise
        return cluster

    def check(self) -> None:
        if self.attaching:
            LocalCluster.attach(self.directory)

    def attach(self) -> LocalCluster:
        cluster = LocalCluster.attach(self.directory, progress=self.progress)
        self._found = (
            cluster.driver.spec if cluster.driver is not None else None,
            cluster.scheduler_config,
        )
        self.progress(f"attached to cluster {cluster.name!r}: KUBECONFIG={cluster.kubeconfig}")
        return cluster

    def leave(self, cluster: Cluster) -> str:
        """Put back the scheduler configuration and the driver the cluster had."""
        restarts = scheduler_restarts(cluster)  # a local cluster's own
        driver, scheduler = self._found or (None, restarts.scheduler_config)
        if restarts.scheduler_config != scheduler:
            restarts.restart_scheduler(scheduler)
        if driver is not None and (cluster.driver is None or cluster.driver.spec != driver):
            cluster.redeploy_driver(driver)
        return f"cluster {cluster.name!r} left running with its own driver"

    def tear_down(self, *, keep: bool) -> str:
        cluster = LocalCluster(self.config)
        if keep:
            return f"cluster kept: export KUBECONFIG={cluster.kubeconfig}"
        self.last_teardown = cluster.down()
        return f"cluster removed: {format_teardown(self.last_teardown)}"
