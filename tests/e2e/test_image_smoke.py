"""The driver image (Dockerfile) runs as a testcontainers module, CsiMockContainer:
it starts, answers CSI and admin calls over sockets in a mounted host directory, takes
its configuration, and a bad one fails the start with the driver's message. Runs only
where a Docker engine answers and skips (saying why) everywhere else.

The image is built as the kind provider builds it (csi_harness._internal.deploy.images: the
Dockerfile on a debootstrapped Python base, docker/engine.sh base), unless
$CSI_MOCK_BASE_IMAGE names another base. On the project's CI machines (no registry,
no CAP_SYS_RESOURCE) docker/engine.sh starts a suitable engine
(docs/docker.md):

    docker/engine.sh start
    pytest tests/e2e/test_image_smoke.py

The test talks to the sockets as the user running pytest, and the driver in the image
runs as root: run it as root, or with a rootless engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import grpc
import pytest

from csi_mock import __version__
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc

pytestmark = pytest.mark.e2e


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
def driver_image(docker_engine: None) -> str:
    """The driver image as the kind provider builds it (the Dockerfile on the local
    Python base, both cached by Docker)."""
    pytest.importorskip("testcontainers", reason="testcontainers is not installed")
    from testcontainers.core.config import testcontainers_config

    from csi_harness._internal.deploy.images import build_driver_image

    # Ryuk (the reaper) would be pulled from Docker Hub; the context manager removes the
    # container anyway. An explicit TESTCONTAINERS_RYUK_DISABLED setting wins.
    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True
    base = os.environ.get("CSI_MOCK_BASE_IMAGE")
    return build_driver_image() if base is None else build_driver_image(base=base)


def test_the_container_answers_probe_and_plugin_info_over_the_mounted_socket(
    driver_image: str,
) -> None:
    from csi_mock.container import CsiMockContainer

    with (
        CsiMockContainer(driver_image, config={"name": "smoke.csi-mock.example"}) as mock,
        grpc.insecure_channel(mock.endpoint) as channel,
    ):
        identity = pb_grpc.IdentityStub(channel)
        assert identity.Probe(pb.ProbeRequest(), timeout=5).ready.value
        info = identity.GetPluginInfo(pb.GetPluginInfoRequest(), timeout=5)
        socket_dir = mock.socket_dir
    assert (info.name, info.vendor_version) == ("smoke.csi-mock.example", __version__)
    assert not socket_dir.exists(), "the temporary socket directory is removed"


def test_the_container_takes_its_configuration_and_its_admin_api_answers(
    driver_image: str, tmp_path: Path
) -> None:
    from csi_mock.container import CsiMockContainer

    config = {"pools": [{"name": "small", "size": "1Gi"}], "node": {"id": "box-1"}}
    with CsiMockContainer(driver_image, config=config, socket_dir=tmp_path) as mock:
        channel = grpc.insecure_channel(mock.endpoint)
        controller = pb_grpc.ControllerStub(channel)
        with mock.admin() as admin:
            assert [pool.name for pool in admin.pools()] == ["small"]
            admin.add_fault("CreateVolume", code="UNAVAILABLE", times=1)
            request = pb.CreateVolumeRequest(
                name="v1",
                capacity_range=pb.CapacityRange(required_bytes=1 << 20),
                volume_capabilities=[
                    pb.VolumeCapability(
                        mount=pb.VolumeCapability.MountVolume(),
                        access_mode=pb.VolumeCapability.AccessMode(mode=1),
                    )
                ],
            )
            with pytest.raises(grpc.RpcError) as failed:
                controller.CreateVolume(request, timeout=5)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            assert controller.CreateVolume(request, timeout=5).volume.capacity_bytes == 1 << 20
            codes = [r.code for r in admin.journal(method="CreateVolume")]
        node = pb_grpc.NodeStub(channel).NodeGetInfo(pb.NodeGetInfoRequest(), timeout=5)
        channel.close()
    assert codes == ["UNAVAILABLE", "OK"]
    assert node.node_id == "box-1"
    assert (tmp_path / "driver.yaml").exists(), "a given socket directory is kept"


def test_a_bad_configuration_fails_the_start_with_the_drivers_message(driver_image: str) -> None:
    from csi_mock.container import CsiMockContainer

    container = CsiMockContainer(driver_image, config={"pools": [{"size": "1Gi"}]})
    with pytest.raises(RuntimeError) as failed, container:
        pass
    assert "pools.0.name" in str(failed.value)


def test_the_image_carries_the_driver_without_the_harness(driver_image: str) -> None:
    from csi_mock.container import CsiMockContainer

    probe = (
        "import importlib.util as u;"
        "print(','.join(m for m in ('csi_mock', 'harness', 'csi_harness', 'lightkube',"
        " 'cryptography') if u.find_spec(m)))"
    )
    with CsiMockContainer(driver_image) as mock:
        result = mock.exec(["python3", "-c", probe])
    assert result.exit_code == 0, result.output
    assert result.output.decode().strip() == "csi_mock"
