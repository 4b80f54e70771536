"""csi-mock as a testcontainers module: the driver image in a container, its CSI and
admin sockets in a host directory.

    from csi_mock.container import CsiMockContainer

    with CsiMockContainer("csi-mock.local/csi-mock:dev", config={"pools": [...]}) as mock:
        channel = grpc.insecure_channel(mock.endpoint)
        with mock.admin() as admin:
            admin.add_fault("CreateVolume", code="RESOURCE_EXHAUSTED", times=1)

Needs the ``containers`` extra (``pip install 'csi-mock[containers]'``: testcontainers)
and a local Docker engine (the sockets are bind-mounted, so a remote engine cannot
work). The image is the repository's Dockerfile (``docker build -t
csi-mock.local/csi-mock:dev .``, or ``csi_harness._internal.deploy.images.build_driver_image``).
The container is ready when csi-mock's Probe says so over the mounted socket
(``ProbeReadyWaitStrategy``), not when a log line appears.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

try:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] != "testcontainers":
        raise
    _NEEDS_EXTRA = (
        "csi_mock.container needs testcontainers, which comes with the containers extra:"
        " pip install 'csi-mock[containers]'"
    )
    if __name__ == "__main__":  # python -m csi_mock.container: the one line, no traceback
        sys.exit(_NEEDS_EXTRA)
    raise ModuleNotFoundError(_NEEDS_EXTRA, name=missing.name) from None

from csi_mock.admin.client import AdminClient
from csi_mock.testing import DEFAULT_CONFIG, merge_config, probe_ready

__all__ = ["DEFAULT_IMAGE", "CsiMockContainer", "ProbeReadyWaitStrategy"]

DEFAULT_IMAGE = "csi-mock.local/csi-mock:dev"
SOCKET_DIR_IN_CONTAINER = "/csi"
"""Where the host directory is mounted: csi.sock, admin.sock and driver.yaml."""


class ProbeReadyWaitStrategy(WaitStrategy):
    """Ready when Identity.Probe over the host-side socket answers ready=true.

    A missing socket, UNAVAILABLE and not-ready answers are waited out; the container
    exiting is not (the wait fails at once, with its logs).
    """

    def __init__(self, socket_path: Path) -> None:
        super().__init__()
        self.socket_path = socket_path

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        deadline = time.monotonic() + self._startup_timeout
        last = "no socket yet"
        while time.monotonic() < deadline:
            container.reload()
            if container.status in ("exited", "dead"):
                stdout, stderr = container.get_logs()
                raise RuntimeError(
                    f"the csi-mock container {container.status} before it was ready:\n"
                    + (stdout + stderr).decode(errors="replace")[-4000:]
                )
            ready, last = probe_ready(self.socket_path)
            if ready:
                return
            time.sleep(self._poll_interval)
        raise TimeoutError(
            f"csi-mock at {self.socket_path} not ready within {self._startup_timeout:g} s ({last})"
        )


class CsiMockContainer(DockerContainer):
    """The csi-mock image serving controller and node on a socket in a host directory.

    ``config`` is csi-mock's configuration, deep-merged over ``csi_mock.testing``'s
    defaults (one 100Gi pool, node ``node-1``, no privileges needed); the endpoint
    and admin socket are set here. ``socket_dir`` defaults to a temporary directory,
    removed when the container stops.
    """

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        config: Mapping[str, Any] | None = None,
        socket_dir: Path | None = None,
        startup_timeout: float = 60,
        **kwargs: Any,
    ) -> None:
        super().__init__(image, **kwargs)
        self._owned_dir = socket_dir is None
        self.socket_dir = (
            Path(tempfile.mkdtemp(prefix="csi-mock-")) if socket_dir is None else socket_dir
        )
        inside = SOCKET_DIR_IN_CONTAINER
        self.config = merge_config(
            DEFAULT_CONFIG,
            config or {},
            {"endpoint": f"unix://{inside}/csi.sock", "admin": {"socket": f"{inside}/admin.sock"}},
        )
        self.with_volume_mapping(str(self.socket_dir), inside, "rw")
        self.with_command(["serve", f"--config={inside}/driver.yaml"])
        self.waiting_for(
            ProbeReadyWaitStrategy(self.socket_path).with_startup_timeout(
                timedelta(seconds=startup_timeout)
            )
        )

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / "csi.sock"

    @property
    def endpoint(self) -> str:
        """The CSI endpoint on the host (``unix:///.../csi.sock``)."""
        return f"unix://{self.socket_path}"

    def admin(self) -> AdminClient:
        """A client of the driver's admin API over the mounted socket (close it after use)."""
        return AdminClient(self.socket_dir / "admin.sock")

    def start(self) -> CsiMockContainer:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        (self.socket_dir / "driver.yaml").write_text(yaml.safe_dump(self.config))
        super().start()
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        try:
            super().stop(force=force, delete_volume=delete_volume)
        finally:
            if self._owned_dir:
                shutil.rmtree(self.socket_dir, ignore_errors=True)
