"""The ``kind`` command.

``KindCli`` drives the pinned kind binary (``tools/build.sh path kind``): ``create`` a
cluster from a kind configuration with its kubeconfig in a file of its own,
``load_image`` images into the nodes, ``exists`` and ``delete``. Every command goes
through a ``Runner``, so tests can check the command lines without Docker.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.commands import Runner, run_command
from csi_harness._internal.core.tools import tool_path

DRIVER_IMAGE = "csi-mock.local/csi-mock:dev"
"""The image deploy/kubernetes/ runs (built from the repository's Dockerfile)."""
DEFAULT_KUBECONFIG_ROOT = Path("/var/lib/csi-harness")


@dataclass(frozen=True)
class ImageArchive:
    """An image as a ``docker save`` tarball, for ``kind load image-archive``."""

    path: Path


class KindCli:
    """One kind cluster, named ``name``, created from ``config_file``, running ``image``.

    ``kubeconfig`` defaults to ``/var/lib/csi-harness/kind-<name>/kubeconfig``, so the
    user's ``~/.kube/config`` is never touched. ``node_image`` overrides kind's default
    node image (``kindest/node``). ``kind`` is the path to the binary; by default it
    is looked up with ``tools/build.sh path`` on first use.
    """

    def __init__(
        self,
        name: str,
        config_file: Path | None = None,
        image: str = DRIVER_IMAGE,
        *,
        kubeconfig: Path | None = None,
        node_image: str | None = None,
        wait: str | None = "120s",
        kind: str | None = None,
        runner: Runner = run_command,
    ) -> None:
        self.name = name
        self.config_file = config_file.resolve() if config_file is not None else None
        self.image = image
        self.kubeconfig = kubeconfig or DEFAULT_KUBECONFIG_ROOT / f"kind-{name}" / "kubeconfig"
        self.node_image = node_image
        self.wait = wait
        self._kind = kind
        self._run = runner

    # -- binaries ----------------------------------------------------------------------

    @property
    def kind(self) -> str:
        if self._kind is None:
            self._kind = tool_path("kind", self._run)
        return self._kind

    # -- lifecycle ---------------------------------------------------------------------

    def create(self) -> None:
        """``kind create cluster``, waiting up to ``wait`` for the control plane (None:
        not at all, as for a cluster without a CNI yet, whose nodes stay NotReady).

        kind runs from the configuration file's directory, because it resolves relative
        ``extraMounts`` host paths against its working directory."""
        argv = [self.kind, "create", "cluster", "--name", self.name]
        argv += ["--kubeconfig", str(self.kubeconfig)]
        if self.wait is not None:
            argv += ["--wait", self.wait]
        if self.config_file is not None:
            argv += ["--config", str(self.config_file)]
        if self.node_image is not None:
            argv += ["--image", self.node_image]
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        cwd = self.config_file.parent if self.config_file is not None else None
        self._run(argv, cwd=cwd)

    def export_kubeconfig(self) -> None:
        """Write the running cluster's kubeconfig to ``kubeconfig`` (``kind export``)."""
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        argv = [self.kind, "export", "kubeconfig", "--name", self.name]
        self._run([*argv, "--kubeconfig", str(self.kubeconfig)])

    def exists(self) -> bool:
        """Whether kind knows a cluster of this name."""
        return self.name in self._run([self.kind, "get", "clusters"]).split()

    def load_image(
        self,
        image: str | ImageArchive | None = None,
        *,
        nodes: Sequence[str] = (),
    ) -> None:
        """Copy an image into the nodes (all, or ``nodes``): one from the local Docker
        engine by name (default: ``self.image``), or an ``ImageArchive``."""
        image = self.image if image is None else image
        if isinstance(image, ImageArchive):
            argv = [self.kind, "load", "image-archive", str(image.path)]
        else:
            argv = [self.kind, "load", "docker-image", image]
        argv += ["--name", self.name]
        if nodes:
            argv += ["--nodes", ",".join(nodes)]
        self._run(argv)

    def delete(self) -> None:
        """``kind delete cluster`` (kind succeeds when there is no such cluster), then
        remove this cluster's kubeconfig file."""
        argv = [self.kind, "delete", "cluster", "--name", self.name]
        self._run([*argv, "--kubeconfig", str(self.kubeconfig)])
        self.kubeconfig.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty (or shared): leave the directory
            self.kubeconfig.parent.rmdir()
