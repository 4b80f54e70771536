"""Identity service: GetPluginInfo, GetPluginCapabilities, Probe."""

from pathlib import Path

import grpc
import pytest

from csi_mock import __version__
from csi_mock.proto import csi_pb2 as pb
from tests.driver.conftest import RunningDriver, StartDriver
from tests.driver.csi_helpers import assert_status, create_request

Service = pb.PluginCapability.Service
Expansion = pb.PluginCapability.VolumeExpansion


def services(response: pb.GetPluginCapabilitiesResponse) -> set[int]:
    return {c.service.type for c in response.capabilities if c.HasField("service")}


def expansions(response: pb.GetPluginCapabilitiesResponse) -> set[int]:
    return {
        c.volume_expansion.type for c in response.capabilities if c.HasField("volume_expansion")
    }


async def test_get_plugin_info_reports_the_configured_name_and_the_package_version(
    csi: RunningDriver,
) -> None:
    info = await csi.identity.GetPluginInfo(pb.GetPluginInfoRequest())

    assert info.name == "csi-mock.example"
    assert info.vendor_version == __version__


async def test_get_plugin_info_reports_a_name_set_in_the_config(
    start_driver: StartDriver,
) -> None:
    csi = await start_driver(name="other.csi.example")

    info = await csi.identity.GetPluginInfo(pb.GetPluginInfoRequest())

    assert info.name == "other.csi.example"


async def test_get_plugin_info_manifest_names_the_mode(csi: RunningDriver) -> None:
    info = await csi.identity.GetPluginInfo(pb.GetPluginInfoRequest())

    assert info.manifest["mode"] == "all"


async def test_plugin_capabilities_offer_controller_topology_and_online_expansion(
    csi: RunningDriver,
) -> None:
    response = await csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())

    assert services(response) == {
        Service.CONTROLLER_SERVICE,
        Service.VOLUME_ACCESSIBILITY_CONSTRAINTS,
    }
    assert expansions(response) == {Expansion.ONLINE}


async def test_plugin_capabilities_omit_topology_when_it_is_off(start_driver: StartDriver) -> None:
    csi = await start_driver(topology=False)

    response = await csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())

    assert Service.VOLUME_ACCESSIBILITY_CONSTRAINTS not in services(response)


async def test_plugin_capabilities_omit_expansion_when_it_is_off(start_driver: StartDriver) -> None:
    csi = await start_driver(controller={"expansion": False})

    response = await csi.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())

    assert expansions(response) == set()


async def test_plugin_capabilities_are_the_same_in_node_and_controller_mode(
    start_driver: StartDriver, tmp_path: Path
) -> None:
    # Spec (GetPluginCapabilities): all instances of one plugin version SHALL return the
    # same capabilities regardless of which RPCs an instance is serving.
    node = await start_driver(mode="node")
    controller = await start_driver(
        mode="controller",
        endpoint=f"unix://{tmp_path}/controller.sock",
        state_dir=str(tmp_path / "controller-state"),
    )

    from_node = await node.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    from_controller = await controller.identity.GetPluginCapabilities(
        pb.GetPluginCapabilitiesRequest()
    )

    assert services(from_node) == services(from_controller)
    assert expansions(from_node) == expansions(from_controller)


async def test_probe_reports_ready_once_state_is_loaded(csi: RunningDriver) -> None:
    response = await csi.identity.Probe(pb.ProbeRequest())

    assert response.HasField("ready")
    assert response.ready.value is True


async def test_probe_reports_not_ready_while_state_is_loading(csi: RunningDriver) -> None:
    csi.driver.readiness.ready = False

    response = await csi.identity.Probe(pb.ProbeRequest())

    assert response.ready.value is False


async def test_volume_rpcs_are_unavailable_while_state_is_loading(csi: RunningDriver) -> None:
    csi.driver.readiness.ready = False

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await csi.controller.CreateVolume(create_request("pvc-early"))

    assert_status(raised, grpc.StatusCode.UNAVAILABLE, "loading")


async def test_identity_rpcs_answer_while_state_is_loading(csi: RunningDriver) -> None:
    csi.driver.readiness.ready = False

    info = await csi.identity.GetPluginInfo(pb.GetPluginInfoRequest())

    assert info.name == "csi-mock.example"
