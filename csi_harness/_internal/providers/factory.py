"""The one way from options to a cluster provider.

The pytest plugin (``--csi-...``), ``csi-harness cluster``, scale and upstream runs
all describe the cluster they want as ``ClusterOptions`` and get its provider from
``open_provider``; each then uses it as a context manager (``with provider as
cluster``). Options that do not fit the provider, or a cluster to use that is not
there, raise ``ClusterOptionError`` naming the option, before anything is brought up.
Callers turn the option's field name into their own flag (``images`` is pytest's
``--csi-images`` and the CLI's ``--images``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from csi_harness._internal.core.run_state import STATE_FILE
from csi_harness._internal.core.tools import ToolsMissing
from csi_harness._internal.deploy.image_set import (
    BUILT,
    UPSTREAM,
    ImageSet,
    ImageSourceError,
    image_set,
    parse_image_source,
)
from csi_harness._internal.kube.feature_gates import parse_feature_gates
from csi_harness._internal.providers.base import Unsupported
from csi_harness._internal.providers.existing import ExistingProvider
from csi_harness._internal.providers.local.cluster import ClusterNotRunning
from csi_harness._internal.providers.local.config import LocalClusterConfig
from csi_harness._internal.providers.local.provider import LocalProvider
from csi_harness._internal.providers.provider import ClusterProvider, Progress, silent

PROVIDERS = ("local", "kind", "existing")
DEFAULT_NAME = "csi-harness-e2e"


class ClusterOptionError(ValueError):
    """An option that does not fit: ``option`` is the field of ``ClusterOptions``."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option
        self.message = message


@dataclass(frozen=True)
class ClusterOptions:
    """What a caller asks for. ``images``: ``built``, ``upstream`` or a registry prefix
    (None: ``built`` on the local provider, ``upstream`` elsewhere). ``registry_mirror``
    (kind): ``HOST:PORT`` of a registry the nodes' containerd pulls registry.k8s.io and
    Docker Hub names through."""

    provider: str = "local"
    name: str | None = None
    kubeconfig: Path | None = None
    kind_config: Path | None = None
    node_image: str | None = None
    feature_gates: str = ""
    keep: bool = False
    images: str | None = None
    driver_image: str | None = None
    registry_mirror: str | None = None
    local_config: LocalClusterConfig | None = None
    """The local provider: a whole configuration (upstream runs) instead of ``name``
    and ``feature_gates``."""


def session_images(options: ClusterOptions) -> ImageSet:
    """The image set ``options`` ask for, or a ``ClusterOptionError``."""
    if options.provider not in PROVIDERS:
        raise ClusterOptionError(
            "provider", f"{options.provider}: no such provider (one of {', '.join(PROVIDERS)})"
        )
    default = BUILT if options.provider == "local" else UPSTREAM
    try:
        source = parse_image_source(options.images or default)
    except ImageSourceError as exc:
        raise ClusterOptionError("images", str(exc)) from None
    if options.provider == "local" and source.pulls:
        raise ClusterOptionError(
            "images",
            f"{source}: the local provider runs csi-mock and its sidecars as processes from "
            "the pinned tools, so only 'built' applies to it; images are for kind and "
            "existing clusters",
        )
    if options.provider == "local" and options.driver_image:
        raise ClusterOptionError(
            "driver_image", "the local provider runs csi-mock as a process, not an image"
        )
    return image_set(source, options.driver_image)


def open_provider(options: ClusterOptions, *, progress: Progress = silent) -> ClusterProvider:
    """The provider ``options`` describe, checked but not entered: entered, it yields
    the cluster ready for the suites; left, it tears it down or leaves it running."""
    images = session_images(options)
    if options.provider != "existing" and options.kubeconfig:
        raise ClusterOptionError("kubeconfig", "names the cluster of the existing provider")
    if options.provider != "kind":
        for option in ("kind_config", "node_image", "registry_mirror"):
            if getattr(options, option):
                raise ClusterOptionError(option, "is an option of the kind provider")
    if options.provider == "local":
        config = options.local_config or LocalClusterConfig(
            name=options.name or DEFAULT_NAME, feature_gates=_gates(options.feature_gates)
        )
        return LocalProvider(config, progress=progress, keep=options.keep)
    if options.provider == "kind":
        return _kind_provider(options, images, progress)
    kubeconfig = options.kubeconfig
    if kubeconfig and not _attaches_local(options):
        return _existing_provider(options, kubeconfig, images, progress)
    return _attached_local_provider(options, progress)


def drivers_handed_over(options: ClusterOptions) -> bool:
    """Whether the cluster ``options`` open runs its drivers as pods that any process
    of the session can take over (``DriverHandover``): kind and existing clusters; not
    the local provider's, whose drivers are a process's children, nor an existing one
    that is a local cluster (``open_provider`` attaches to it)."""
    if options.provider == "kind":
        return True
    return options.provider == "existing" and not _attaches_local(options)


def _attaches_local(options: ClusterOptions) -> bool:
    """``--csi-cluster existing`` without a kubeconfig, or with a local cluster's."""
    kubeconfig = options.kubeconfig
    return kubeconfig is None or (kubeconfig.resolve().parent / STATE_FILE).exists()


def _gates(text: str) -> dict[str, bool]:
    try:
        return parse_feature_gates(text)
    except ValueError as exc:
        raise ClusterOptionError("feature_gates", str(exc)) from None


def _kind_provider(
    options: ClusterOptions, images: ImageSet, progress: Progress
) -> ClusterProvider:
    # Imported here: only kind sessions need the Docker-related modules.
    from csi_harness._internal.providers.kind.cluster import DEFAULT_CONFIG
    from csi_harness._internal.providers.kind.kind_binary import KindVersionError
    from csi_harness._internal.providers.kind.node_image import NodeImageError, require_docker
    from csi_harness._internal.providers.kind.provider import KindProvider
    from csi_harness._internal.providers.kind.registry_mirror import (
        RegistryMirrorError,
        parse_mirror_address,
    )

    if options.feature_gates:
        raise ClusterOptionError(
            "feature_gates",
            "a kind cluster takes its gates from the kind configuration "
            "(kind-config/capacity-scoring.yaml shows how)",
        )
    kind_config = (options.kind_config or DEFAULT_CONFIG).resolve()
    if not kind_config.is_file():
        raise ClusterOptionError("kind_config", f"{kind_config}: no such file")
    try:
        mirror = parse_mirror_address(options.registry_mirror) if options.registry_mirror else None
    except RegistryMirrorError as exc:
        raise ClusterOptionError("registry_mirror", str(exc)) from None
    provider = KindProvider(
        options.name or DEFAULT_NAME,
        kind_config,
        node_image=options.node_image,
        images=images,
        registry_mirror=mirror,
        progress=progress,
        keep=options.keep,
    )
    try:
        require_docker()
        provider.cluster()  # finds kind and the tools, checks kind's version
    except (NodeImageError, ToolsMissing, KindVersionError) as exc:
        raise ClusterOptionError("provider", f"kind: {exc}") from exc
    return provider


def _existing_provider(
    options: ClusterOptions, kubeconfig: Path, images: ImageSet, progress: Progress
) -> ClusterProvider:
    if not kubeconfig.is_file():
        raise ClusterOptionError(
            "kubeconfig",
            f"{kubeconfig}: no such file (and no local cluster here: no {STATE_FILE} beside it)",
        )
    if images.source.pulls and images.driver is None:
        raise ClusterOptionError(
            "driver_image",
            "an existing cluster pulls csi-mock's image like the others: push it with "
            "`csi-harness images push --registry REGISTRY` and pass the name it prints "
            "(or use images 'built' with images loaded onto the nodes by hand)",
        )
    provider = ExistingProvider(kubeconfig, images=images, progress=progress)
    try:
        provider.check()
    except Unsupported as exc:
        raise ClusterOptionError("provider", f"existing: {exc}") from exc
    return provider


def _attached_local_provider(options: ClusterOptions, progress: Progress) -> ClusterProvider:
    """A running local cluster made by csi-harness, attached to and left as found."""
    if options.feature_gates:
        raise ClusterOptionError(
            "feature_gates",
            "an existing cluster keeps the gates it was brought up with "
            "(csi-harness cluster up --feature-gates ...)",
        )
    config = LocalClusterConfig(name=options.name or DEFAULT_NAME)
    kubeconfig = options.kubeconfig
    run_dir = kubeconfig.resolve().parent if kubeconfig else config.effective_run_dir
    provider = LocalProvider(config, run_dir=run_dir, progress=progress, attach=True)
    try:
        provider.check()
    except (ClusterNotRunning, ToolsMissing) as exc:
        raise ClusterOptionError(
            "provider",
            f"existing: {exc}\n(only clusters made by csi-harness can be used so far: the "
            "suites redeploy the driver as local processes)",
        ) from exc
    return provider
