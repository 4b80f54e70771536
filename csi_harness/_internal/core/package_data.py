"""The files the harness reads at run time, wherever csi-mock is installed.

Manifests, kind configurations, the pinned tools' Go modules with their build script
(``tools/build.sh``), the Docker engine script with its runc wrapper (``docker/``) and the
driver's Dockerfile are package data of ``csi_harness`` (``csi_harness/_internal/data/``; in
the source tree those entries are symlinks to the top-level ``deploy/``, ``kind-config/``,
``tools/``, ``docker/``, ``Dockerfile`` and ``pyproject.toml``), found through
``importlib.resources`` so that a wheel installed in any virtualenv has them. The
developer-only scripts of ``scripts/`` (proto generation, CI steps) are not package data.
They are used as real paths (bash runs the scripts, ``go build`` reads the modules),
so the package must be installed as files, not imported from a zip archive. Each path
is resolved: in a source tree it names the top-level file, as messages and kind's
relative mounts expect.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_dir() -> Path:
    """``csi_harness/_internal/data`` of the installed package."""
    path = Path(str(files("csi_harness._internal") / "data"))
    if not path.is_dir():
        raise FileNotFoundError(
            f"the harness's data directory {path} is missing: csi-mock must be installed"
            " from a wheel or a source tree, not imported from a zip archive"
        )
    return path


DATA_DIR = data_dir()
MANIFEST_DIR = (DATA_DIR / "deploy" / "kubernetes").resolve()
"""The driver's Kubernetes manifests (``kubectl apply -k`` works on it too)."""
KIND_CONFIG_DIR = (DATA_DIR / "kind-config").resolve()
TOOLS_DIR = (DATA_DIR / "tools").resolve()
"""One Go module per pinned tool (``tools/<unit>/``)."""
TOOLS_SCRIPT = (DATA_DIR / "tools" / "build.sh").resolve()
"""Builds the pinned tools and answers ``path``/``list``/``doctor`` (``csi-harness tools``)."""
DOCKER_ENGINE_SCRIPT = (DATA_DIR / "docker" / "engine.sh").resolve()
"""Starts a Docker engine with the runc wrapper next to it; builds the Python base image."""
DOCKERFILE = (DATA_DIR / "Dockerfile").resolve()
