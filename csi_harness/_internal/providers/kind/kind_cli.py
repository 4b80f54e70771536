"""The ``kind`` command.

``KindCli`` drives the pinned kind binary (``tools.sh path kind``): ``create`` a
cluster from a kind configuration with its kubeconfig in a file of its own,
``load_image`` images into the nodes, ``exists`` and ``delete``. Every command goes
through a ``Runner``, so tests can check the command lines without Docker.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from csi_harness._internal.core.resources import TOOLS_SCRIPT
from csi_harness._internal.core.tools import ToolsMissing

DRIVER_IMAGE = "csi-mock.local/csi-mock:dev"
"""The image deploy/kubernetes/ runs (built from the repository's Dockerfile)."""
DEFAULT_KUBECONFIG_ROOT = Path("/var/lib/csi-harness")


class CommandFailed(RuntimeError):
    """A kind or kubectl command exited non-zero; the message has its output."""

    def __init__(self, argv: Sequence[str], returncode: int, output: str) -> None:
        super().__init__(
            f"`{' '.join(argv)}` exited with {returncode}:\n{output.strip() or '(no output)'}"
        )
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], *, cwd: Path | None = None) -> str:
        """Run ``argv`` (in ``cwd``) to completion; return its stdout or raise CommandFailed."""
        ...


def run_command(argv: Sequence[str], *, cwd: Path | None = None) -> str:
    """The real runner: a subprocess with captured output."""
    try:
        result = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CommandFailed(argv, -1, str(exc)) from exc
    if result.returncode != 0:
        raise CommandFailed(argv, result.returncode, result.stderr + result.stdout)
    return result.stdout


def tool_path(name: str, runner: Runner = run_command) -> str:
    """The pinned binary ``name`` as ``scripts/tools.sh path`` reports it (built and cached
    by ``make tools``)."""
    try:
        path = runner(["bash", str(TOOLS_SCRIPT), "path", name]).strip()
    except CommandFailed as exc:
        raise ToolsMissing(f"cannot locate {name}: {exc}") from exc
    if not path:
        raise ToolsMissing(f"scripts/tools.sh path {name} printed nothing")
    return path


@dataclass(frozen=True)
class ImageArchive:
    """An image as a ``docker save`` tarball, for ``kind load image-archive``."""

    path: Path


class KindCli:
    """One kind cluster, named ``name``, created from ``config_file``, running ``image``.

    ``kubeconfig`` defaults to ``/var/lib/csi-harness/kind-<name>/kubeconfig``, so the
    user's ``~/.kube/config`` is never touched. ``node_image`` overrides kind's default
    node image (``kindest/node``). ``kind`` is the path to the binary; by default it
    is looked up with ``tools.sh path`` on first use.
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
