"""The kind provider's lifecycle: a ``KindCluster`` created (or, with ``keep``, adopted
and left running) for the suites, and deleted or released at the end."""

from __future__ import annotations

from pathlib import Path

from csi_harness._internal.deploy.image_set import ImageSet
from csi_harness._internal.providers.base import Cluster
from csi_harness._internal.providers.kind.cluster import DEFAULT_CONFIG, KindCluster
from csi_harness._internal.providers.kind.kind_cli import DEFAULT_KUBECONFIG_ROOT
from csi_harness._internal.providers.kind.registry_mirror import MirrorAddress
from csi_harness._internal.providers.provider import ClusterProvider, Progress, silent


class KindProvider(ClusterProvider):
    """The kind cluster ``name`` from ``config_file``. ``keep``: adopt a running
    cluster of that name and leave it running at the end (released: the suites'
    drivers removed, the scheduler as kubeadm made it)."""

    def __init__(
        self,
        name: str,
        config_file: Path = DEFAULT_CONFIG,
        *,
        node_image: str | None = None,
        images: ImageSet | None = None,
        registry_mirror: MirrorAddress | None = None,
        progress: Progress = silent,
        keep: bool = False,
    ) -> None:
        super().__init__(progress=progress, keep=keep)
        self.name = name
        self.config_file = config_file
        self.node_image = node_image
        self.images = images
        self.registry_mirror = registry_mirror

    def cluster(self, progress: Progress | None = None) -> KindCluster:
        """The cluster object (nothing is created or changed by making it)."""
        return KindCluster(
            self.name,
            self.config_file,
            node_image=self.node_image,
            images=self.images,
            registry_mirror=self.registry_mirror,
            reuse=self.keep,
            progress=progress or self.progress,
        )

    @property
    def key(self) -> str:
        return f"kind-{self.name}"

    @property
    def directory(self) -> Path:
        return DEFAULT_KUBECONFIG_ROOT / f"kind-{self.name}"

    def bring_up(self, progress: Progress | None = None) -> Cluster:
        cluster = self.cluster(progress)
        cluster.up()
        (progress or self.progress)(
            "kind cluster ready: " + ", ".join(f"{k} {v}s" for k, v in cluster.timings.items())
        )
        return cluster

    def attach(self) -> Cluster:
        # Made ready by whoever brought it up: images loaded, network on.
        return self.cluster()

    def tear_down(self, *, keep: bool) -> str:
        cluster = self.cluster()
        if keep:
            cluster.release()
            return f"kind cluster kept: export KUBECONFIG={cluster.kubeconfig}"
        cluster.down()
        return f"kind cluster {cluster.name!r} deleted"
