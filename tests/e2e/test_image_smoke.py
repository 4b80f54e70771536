"""The driver image (Dockerfile) builds, starts and answers CSI Identity calls over a
socket in a directory mounted from the host. Uses testcontainers; runs only where a
Docker engine answers, and skips (saying why) everywhere else.

The base image: $CSI_MOCK_BASE_IMAGE, default python:3.11-slim (the Dockerfile's
default). Without a registry, build a local base first, e.g. from a debootstrapped
Debian rootfs (the Dockerfile's header has the commands), and point the variable at it:

    sudo debootstrap --variant=minbase --include=python3,python3-venv bookworm /tmp/rootfs
    sudo tar -C /tmp/rootfs -c . | docker import \\
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \\
        - csi-mock.local/python-base:bookworm
    CSI_MOCK_BASE_IMAGE=csi-mock.local/python-base:bookworm pytest tests/e2e/test_image_smoke.py

On a host like the project's own CI machines (no registry, no CAP_SYS_RESOURCE),
scripts/docker/engine.sh starts a suitable engine and builds that base
(docs/docker.md):

    scripts/docker/engine.sh start && scripts/docker/engine.sh base
    CSI_MOCK_BASE_IMAGE=csi-mock.local/python-base:bookworm CSI_MOCK_BUILD_NETWORK=host \
        pytest tests/e2e/test_image_smoke.py

The image build installs csi-mock's dependencies from PyPI ($PIP_INDEX_URL if set).
The test talks to the socket as the user running pytest, and the driver in the image
runs as root: run it as root, or with a rootless engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock import __version__
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_BASE_IMAGE = "python:3.11-slim"
START_TIMEOUT = 60.0


def docker_engine_problem() -> str | None:
    """Why no Docker engine can be used here, or None when `docker info` succeeds."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return f"DOCKER_HOST={host} is remote: the socket directory must be a local bind mount"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"`docker info` failed: {last}"
    return None


@pytest.fixture(scope="module")
def docker_engine() -> None:
    problem = docker_engine_problem()
    if problem is not None:
        print(f"image smoke test skipped: no Docker engine ({problem})")
        pytest.skip(f"no Docker engine: {problem}")


@pytest.fixture(scope="module")
def driver_image(docker_engine: None) -> Iterator[str]:
    """The image built from the repository's Dockerfile on $CSI_MOCK_BASE_IMAGE."""
    pytest.importorskip("testcontainers", reason="testcontainers is not installed")
    import docker
    from testcontainers.core.image import DockerImage

    base = os.environ.get("CSI_MOCK_BASE_IMAGE", DEFAULT_BASE_IMAGE)
    client = docker.from_env()
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(base)
        except docker.errors.APIError as exc:
            pytest.skip(
                f"base image {base} is not present and cannot be pulled ({exc}); build a local"
                " one and set CSI_MOCK_BASE_IMAGE (see this module's docstring)"
            )
    finally:
        client.close()
    build_args = {"BASE_IMAGE": base}
    if os.environ.get("PIP_INDEX_URL"):
        build_args["PIP_INDEX_URL"] = os.environ["PIP_INDEX_URL"]
    tag = f"csi-mock.local/csi-mock:smoke-{uuid.uuid4().hex[:8]}"
    # An engine without a default bridge (scripts/docker/engine.sh) builds on the host
    # network: CSI_MOCK_BUILD_NETWORK=host.
    network = (
        {"network_mode": os.environ["CSI_MOCK_BUILD_NETWORK"]}
        if os.environ.get("CSI_MOCK_BUILD_NETWORK")
        else {}
    )
    with DockerImage(path=REPO_ROOT, tag=tag, buildargs=build_args, **network) as image:
        yield str(image)


def wait_until_ready(identity: pb_grpc.IdentityStub, timeout: float) -> pb.ProbeResponse:
    """Probe until the driver says ready; fail with the last answer or error seen."""
    deadline = time.monotonic() + timeout
    seen: object = "nothing yet"
    while time.monotonic() < deadline:
        try:
            response = identity.Probe(pb.ProbeRequest(), timeout=2)
            if response.ready.value:
                return response
            seen = response
        except grpc.RpcError as exc:
            seen = f"{exc.code().name}: {exc.details()}"  # the socket is not there yet
        time.sleep(0.2)
    raise AssertionError(f"the driver was not ready within {timeout:.0f} s; last seen: {seen}")


@pytest.fixture
def driver_socket(driver_image: str, tmp_path: Path) -> Iterator[Path]:
    """The image serving in combined mode, its CSI socket in tmp_path (mounted at /csi)."""
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer

    # Ryuk (the reaper) would be pulled from Docker Hub; the context manager removes the
    # container anyway. An explicit TESTCONTAINERS_RYUK_DISABLED setting wins.
    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True
    socket_dir = tmp_path / "csi"
    socket_dir.mkdir()
    container: Any = (
        DockerContainer(driver_image)
        .with_volume_mapping(str(socket_dir), "/csi", "rw")
        .with_command(["serve", "--endpoint=unix:///csi/csi.sock", "--nodeid=smoke-node", "--v=5"])
    )
    with container:
        try:
            yield socket_dir / "csi.sock"
        finally:
            stdout, stderr = container.get_logs()
            print("--- csi-mock container log ---")
            print((stdout + stderr).decode(errors="replace")[-4000:])


def test_image_answers_probe_and_get_plugin_info_over_the_mounted_socket(
    driver_socket: Path,
) -> None:
    with grpc.insecure_channel(f"unix://{driver_socket}") as channel:
        identity = pb_grpc.IdentityStub(channel)
        wait_until_ready(identity, START_TIMEOUT)
        info = identity.GetPluginInfo(pb.GetPluginInfoRequest(), timeout=5)
    assert info.name == "csi-mock.example"
    assert info.vendor_version == __version__
