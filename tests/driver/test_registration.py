"""Registration with the kubelet's plugin watcher, on the real registration socket."""

from __future__ import annotations

import logging
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from csi_mock.config import ConfigError
from csi_mock.proto import csi_pb2 as pb
from csi_mock.proto import csi_pb2_grpc as pb_grpc
from csi_mock.proto import pluginregistration_pb2 as reg
from csi_mock.proto import pluginregistration_pb2_grpc as reg_grpc
from tests.driver.conftest import RunningDriver, StartDriver

DRIVER_NAME = "csi-mock.example"


def registering(registry: Path, **registration: Any) -> dict[str, Any]:
    """Config overrides for a node that registers through `registry`."""
    node = {"id": "node-1", "mount": "directory"}
    return {"node": {**node, "registration": {"plugins_registry": str(registry), **registration}}}


@asynccontextmanager
async def dial(path: Path) -> AsyncIterator[reg_grpc.RegistrationStub]:
    """The kubelet's side of the registration socket."""
    async with grpc.aio.insecure_channel(f"unix://{path}") as channel:
        yield reg_grpc.RegistrationStub(channel)


@pytest.fixture
def registry(short_tmp_path: Path) -> Path:
    return short_tmp_path / "plugins_registry"


@pytest.fixture
async def registered(start_driver: StartDriver, registry: Path) -> RunningDriver:
    return await start_driver(**registering(registry))


def reg_socket(registry: Path) -> Path:
    return registry / f"{DRIVER_NAME}-reg.sock"


async def test_the_socket_is_named_after_the_driver_and_served_once_the_state_is_loaded(
    registered: RunningDriver, registry: Path
) -> None:
    assert reg_socket(registry).is_socket()
    assert registered.driver.readiness.ready


async def test_get_info_describes_a_csi_plugin_on_the_drivers_own_socket(
    registered: RunningDriver, registry: Path
) -> None:
    async with dial(reg_socket(registry)) as registration:
        info = await registration.GetInfo(reg.InfoRequest())

    assert info.type == "CSIPlugin"
    assert info.name == DRIVER_NAME
    assert info.endpoint == str(registered.config.socket_path)
    assert list(info.supported_versions) == ["1.0.0"]


async def test_get_info_reports_the_kubelet_endpoint_when_it_is_configured(
    start_driver: StartDriver, registry: Path
) -> None:
    kubelet_path = "/var/lib/kubelet/plugins/csi-mock.example/csi.sock"
    await start_driver(**registering(registry, kubelet_endpoint=kubelet_path))

    async with dial(reg_socket(registry)) as registration:
        info = await registration.GetInfo(reg.InfoRequest())

    assert info.endpoint == kubelet_path


async def test_the_socket_takes_the_configured_driver_name(
    start_driver: StartDriver, registry: Path
) -> None:
    await start_driver(name="other.csi.example", **registering(registry))

    async with dial(registry / "other.csi.example-reg.sock") as registration:
        info = await registration.GetInfo(reg.InfoRequest())

    assert info.name == "other.csi.example"


async def test_a_kubelet_registers_the_driver_as_it_would_with_node_driver_registrar(
    registered: RunningDriver, registry: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="csi_mock.registration")
    assert registered.driver.registration is not None
    assert registered.driver.registration.registered is None

    async with dial(reg_socket(registry)) as registration:
        info = await registration.GetInfo(reg.InfoRequest())
        async with grpc.aio.insecure_channel(f"unix://{info.endpoint}") as csi:
            node = await pb_grpc.NodeStub(csi).NodeGetInfo(pb.NodeGetInfoRequest())
        await registration.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True))

    assert node.node_id == "node-1"
    state = registered.driver.registration
    assert (state.registered, state.error) == (True, None)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, f"registered with the kubelet as {DRIVER_NAME}")
    ]


async def test_a_refused_registration_is_recorded_and_logged_as_an_error(
    registered: RunningDriver, registry: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="csi_mock.registration")
    refusal = "RegisterPlugin error -- plugin registration failed with err: no CSINode"

    async with dial(reg_socket(registry)) as registration:
        await registration.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error=refusal)
        )

    state = registered.driver.registration
    assert state is not None
    assert (state.registered, state.error) == (False, refusal)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, f"the kubelet did not register {DRIVER_NAME}: {refusal}")
    ]


async def test_a_later_success_replaces_an_earlier_refusal(
    registered: RunningDriver, registry: Path
) -> None:
    async with dial(reg_socket(registry)) as registration:
        await registration.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=False, error="kubelet restarting")
        )
        await registration.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True))

    state = registered.driver.registration
    assert state is not None
    assert (state.registered, state.error) == (True, None)


async def test_the_socket_is_removed_at_shutdown_so_the_kubelet_deregisters(
    registered: RunningDriver, registry: Path
) -> None:
    await registered.server.stop(grace=1)

    assert not reg_socket(registry).exists()
    assert not registered.config.socket_path.exists()


async def test_a_stale_socket_from_an_earlier_run_is_replaced(
    start_driver: StartDriver, registry: Path
) -> None:
    registry.mkdir()
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(reg_socket(registry)))  # closed without unlinking, as after kill -9

    await start_driver(**registering(registry))

    async with dial(reg_socket(registry)) as registration:
        info = await registration.GetInfo(reg.InfoRequest())
    assert info.name == DRIVER_NAME


async def test_a_live_socket_of_another_driver_is_refused_and_kept(
    start_driver: StartDriver, tmp_path: Path, registry: Path
) -> None:
    registry.mkdir()
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(reg_socket(registry)))
        other.listen()

        with pytest.raises(ConfigError, match=r"plugins_registry: .* is a live socket"):
            await start_driver(**registering(registry))

        assert reg_socket(registry).is_socket()
    assert not (tmp_path / "csi.sock").exists()


async def test_the_socket_is_private_to_the_drivers_user(
    registered: RunningDriver, registry: Path
) -> None:
    assert stat.S_IMODE(reg_socket(registry).stat().st_mode) == 0o600


async def test_an_unusable_registry_stops_start_up_naming_the_key_and_removes_the_csi_socket(
    start_driver: StartDriver, tmp_path: Path, short_tmp_path: Path
) -> None:
    not_a_directory = short_tmp_path / "plugins_registry"
    not_a_directory.write_text("")

    with pytest.raises(ConfigError, match=r"node\.registration\.plugins_registry: cannot listen"):
        await start_driver(**registering(not_a_directory))

    assert not (tmp_path / "csi.sock").exists()


async def test_a_driver_without_node_registration_opens_no_registration_socket(
    csi: RunningDriver, tmp_path: Path
) -> None:
    assert csi.driver.registration is None
    assert csi.server.registration is None
    assert not list(tmp_path.rglob("*-reg.sock"))
