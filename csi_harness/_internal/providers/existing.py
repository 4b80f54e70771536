"""The ``existing`` provider: any running cluster, reached by a kubeconfig, with
csi-mock deployed in it (a ``KubeconfigCluster``). Nothing is brought up or torn
down: entering checks that the cluster answers, leaving removes the suites' csi-mock.
What the harness cannot do to a cluster it did not make (restart its scheduler or
kubelets, read its control plane's metrics) are capabilities its clusters lack, so
the tests that need them are skipped with that reason.
"""

from __future__ import annotations

from pathlib import Path

from csi_harness._internal.deploy.image_set import ImageSet
from csi_harness._internal.deploy.images import DRIVER_IMAGE
from csi_harness._internal.providers.kubeconfig_cluster import KubeconfigCluster
from csi_harness._internal.providers.provider import ClusterProvider, Progress, silent


class ExistingProvider(ClusterProvider[KubeconfigCluster]):
    """Any running cluster by its kubeconfig. Nothing is brought up or torn down:
    entering checks that the cluster answers, leaving removes the suites' csi-mock."""

    def __init__(
        self, kubeconfig: Path, *, images: ImageSet | None = None, progress: Progress = silent
    ) -> None:
        super().__init__(progress=progress, keep=True)
        self.kubeconfig = kubeconfig
        self.images = images

    def _cluster_of(self, progress: Progress) -> KubeconfigCluster:
        if self.images is None:
            return KubeconfigCluster(self.kubeconfig, progress=progress)
        return KubeconfigCluster(
            self.kubeconfig,
            driver_image=self.images.driver or DRIVER_IMAGE,
            sidecar_images=self.images.sidecars,
            progress=progress,
        )

    @property
    def key(self) -> str:
        return f"existing-{self.kubeconfig}"

    @property
    def brings_up(self) -> bool:
        return False

    def check(self) -> None:
        KubeconfigCluster(self.kubeconfig).check_reachable()

    @property
    def directory(self) -> Path:
        return self.kubeconfig.parent

    def bring_up(self, progress: Progress | None = None) -> KubeconfigCluster:
        cluster = self._cluster_of(progress or self.progress)
        cluster.check_reachable()
        self.progress(
            f"using the cluster of {self.kubeconfig}; each test's csi-mock goes to a "
            "namespace of its own (csi-mock-<tag>)"
        )
        return cluster

    def attach(self) -> KubeconfigCluster:
        return self.bring_up()

    def tear_down(self, *, keep: bool) -> str:
        cluster = self._cluster or self._cluster_of(self.progress)
        cluster.remove_driver()
        return "csi-mock removed; the cluster is left running"
