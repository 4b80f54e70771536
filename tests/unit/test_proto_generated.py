"""Checks on the generated CSI and plugin registration bindings in csi_mock/proto.

The first test fails when proto/*.proto and the committed generated code have
drifted apart; the others pin a few wire-level facts from CSI spec v1.13.0 and the
kubelet's pluginregistration v1 API that an accidental edit of a proto file would break.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf.message import Message

from csi_mock.proto import (
    csi_pb2,
    csi_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)

ROOT = Path(__file__).resolve().parents[2]
GEN_SCRIPT = ROOT / "scripts" / "gen_proto.py"


def _number(message: type[Message], field: str) -> int:
    return message.DESCRIPTOR.fields_by_name[field].number


def _message_type(message: type[Message], field: str) -> str:
    """Full name of the message type of a message-typed field."""
    field_type = message.DESCRIPTOR.fields_by_name[field].message_type
    assert field_type is not None, f"{message.__name__}.{field} is not a message field"
    return field_type.full_name


def test_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(GEN_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_and_services() -> None:
    file_desc = csi_pb2.DESCRIPTOR
    assert file_desc.package == "csi.v1"
    assert set(file_desc.services_by_name) == {
        "Identity",
        "Controller",
        "GroupController",
        "SnapshotMetadata",
        "Node",
    }
    controller = file_desc.services_by_name["Controller"]
    assert controller.full_name == "csi.v1.Controller"
    get_capacity = controller.methods_by_name["GetCapacity"]
    assert get_capacity.input_type.full_name == "csi.v1.GetCapacityRequest"
    assert get_capacity.output_type.full_name == "csi.v1.GetCapacityResponse"
    for method in ("ControllerModifyVolume", "GetSnapshot", "ControllerGetVolume"):
        assert method in controller.methods_by_name
    for method in ("ControllerGetVolumeHealth", "ControllerListVolumeHealth"):
        assert method in controller.methods_by_name
    node = file_desc.services_by_name["Node"]
    assert len(node.methods) == 10
    health = node.methods_by_name["NodeGetVolumeHealth"]
    assert health.output_type.full_name == "csi.v1.NodeGetVolumeHealthResponse"
    assert (
        node.methods_by_name["NodeGetStorageHealth"].GetOptions().Extensions[csi_pb2.alpha_method]
    )


def test_snapshot_metadata_is_server_streaming() -> None:
    service = csi_pb2.DESCRIPTOR.services_by_name["SnapshotMetadata"]
    for method in service.methods:
        assert method.server_streaming
        assert not method.client_streaming


def test_field_numbers() -> None:
    assert _number(csi_pb2.GetCapacityResponse, "maximum_volume_size") == 2
    assert _message_type(csi_pb2.GetCapacityResponse, "maximum_volume_size") == (
        "google.protobuf.Int64Value"
    )
    assert _number(csi_pb2.GetCapacityResponse, "minimum_volume_size") == 3
    assert _number(csi_pb2.NodeGetInfoResponse, "max_volumes_per_node") == 2
    assert _number(csi_pb2.CreateVolumeRequest, "accessibility_requirements") == 7
    assert _number(csi_pb2.CreateVolumeRequest, "mutable_parameters") == 8
    assert _number(csi_pb2.NodePublishVolumeRequest, "target_path") == 4
    assert _message_type(csi_pb2.Snapshot, "creation_time") == "google.protobuf.Timestamp"
    assert _message_type(csi_pb2.ProbeResponse, "ready") == "google.protobuf.BoolValue"
    # v1.13's volume health.
    assert _number(csi_pb2.NodeGetVolumeHealthRequest, "staging_target_path") == 3
    assert _number(csi_pb2.NodeGetVolumeHealthResponse, "volume_health") == 1
    assert _number(csi_pb2.VolumeHealth, "health_statuses") == 2
    assert _number(csi_pb2.VolumeHealth.VolumeHealthEntry, "message") == 3
    backend = csi_pb2.NodeGetStorageHealthResponse.StorageBackendHealth
    assert _number(backend, "volume_capability") == 4
    assert _number(csi_pb2.ControllerListVolumeHealthRequest, "secrets") == 3
    assert _number(csi_pb2.ControllerGetVolumeHealthRequest, "secrets") == 2
    assert _number(csi_pb2.CreateSnapshotRequest, "accessibility_requirements") == 5
    assert _number(csi_pb2.Snapshot, "accessible_topology") == 7


def test_v1_12_volume_conditions_keep_the_numbers_v1_13_reserves() -> None:
    # v1.13 removed VolumeCondition and reserved these numbers; csi-mock keeps them
    # there for COs and sidecars built on v1.12 (proto/csi.proto's header).
    for status in (
        csi_pb2.ListVolumesResponse.VolumeStatus,
        csi_pb2.ControllerGetVolumeResponse.VolumeStatus,
        csi_pb2.NodeGetVolumeStatsResponse,
    ):
        assert _number(status, "volume_condition") == 2
    assert csi_pb2.ControllerServiceCapability.RPC.VOLUME_CONDITION == 11
    assert csi_pb2.NodeServiceCapability.RPC.VOLUME_CONDITION == 4


def test_oneofs() -> None:
    oneof = csi_pb2.VolumeCapability.DESCRIPTOR.oneofs_by_name["access_type"]
    assert [f.name for f in oneof.fields] == ["block", "mount"]
    oneof = csi_pb2.VolumeContentSource.DESCRIPTOR.oneofs_by_name["type"]
    assert [f.name for f in oneof.fields] == ["snapshot", "volume"]


def test_enum_values() -> None:
    plugin_service = csi_pb2.PluginCapability.Service
    assert plugin_service.CONTROLLER_SERVICE == 1
    assert plugin_service.VOLUME_ACCESSIBILITY_CONSTRAINTS == 2
    assert plugin_service.GROUP_CONTROLLER_SERVICE == 3
    assert plugin_service.SNAPSHOT_METADATA_SERVICE == 4
    assert plugin_service.SNAPSHOT_ACCESSIBILITY_CONSTRAINTS == 5

    rpc = csi_pb2.ControllerServiceCapability.RPC
    assert rpc.GET_CAPACITY == 4
    assert rpc.CREATE_DELETE_SNAPSHOT == 5
    assert rpc.MODIFY_VOLUME == 14
    assert rpc.GET_SNAPSHOT == 15
    assert rpc.GET_VOLUME_HEALTH == 16
    assert rpc.LIST_VOLUME_HEALTH == 17

    assert csi_pb2.NodeServiceCapability.RPC.VOLUME_MOUNT_GROUP == 6
    assert csi_pb2.NodeServiceCapability.RPC.GET_VOLUME_HEALTH == 7
    assert csi_pb2.NodeServiceCapability.RPC.GET_STORAGE_HEALTH == 8
    assert csi_pb2.INACCESSIBLE == 2 and csi_pb2.DATA_LOSS == 3
    assert csi_pb2.STORAGE_UNREACHABLE == 2
    assert csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_MULTI_WRITER == 7
    assert csi_pb2.FIXED_LENGTH == 1  # top-level BlockMetadataType


def test_custom_options() -> None:
    assert csi_pb2.csi_secret.number == 1059
    for ext in (
        csi_pb2.alpha_field,
        csi_pb2.alpha_enum,
        csi_pb2.alpha_enum_value,
        csi_pb2.alpha_message,
        csi_pb2.alpha_method,
        csi_pb2.alpha_service,
    ):
        assert ext.number == 1060

    secrets = csi_pb2.CreateVolumeRequest.DESCRIPTOR.fields_by_name["secrets"]
    assert secrets.GetOptions().Extensions[csi_pb2.csi_secret]
    service = csi_pb2.DESCRIPTOR.services_by_name["SnapshotMetadata"]
    assert service.GetOptions().Extensions[csi_pb2.alpha_service]
    # ControllerModifyVolume went GA in v1.12; GetSnapshot arrived as alpha.
    controller = csi_pb2.DESCRIPTOR.services_by_name["Controller"]
    modify = controller.methods_by_name["ControllerModifyVolume"]
    assert not modify.GetOptions().Extensions[csi_pb2.alpha_method]
    assert controller.methods_by_name["GetSnapshot"].GetOptions().Extensions[csi_pb2.alpha_method]


def test_grpc_module_exposes_stubs_and_servicers() -> None:
    for service in ("Identity", "Controller", "GroupController", "SnapshotMetadata", "Node"):
        assert hasattr(csi_pb2_grpc, f"{service}Stub")
        assert hasattr(csi_pb2_grpc, f"{service}Servicer")
        assert hasattr(csi_pb2_grpc, f"add_{service}Servicer_to_server")
    # The gRPC module must use the packaged csi_pb2, not a top-level "csi_pb2" module.
    assert vars(csi_pb2_grpc)["csi__pb2"] is csi_pb2
    assert "csi_pb2" not in sys.modules


def test_plugin_registration_package_service_and_methods() -> None:
    file_desc = pluginregistration_pb2.DESCRIPTOR
    assert file_desc.package == "pluginregistration"
    assert set(file_desc.services_by_name) == {"Registration"}
    methods = {
        method.name: (method.input_type.full_name, method.output_type.full_name)
        for method in file_desc.services_by_name["Registration"].methods
    }
    assert methods == {
        "GetInfo": ("pluginregistration.InfoRequest", "pluginregistration.PluginInfo"),
        "NotifyRegistrationStatus": (
            "pluginregistration.RegistrationStatus",
            "pluginregistration.RegistrationStatusResponse",
        ),
    }


def test_plugin_registration_field_numbers() -> None:
    info = pluginregistration_pb2.PluginInfo
    assert [(f.name, f.number) for f in info.DESCRIPTOR.fields] == [
        ("type", 1),
        ("name", 2),
        ("endpoint", 3),
        ("supported_versions", 4),
    ]
    versions = info.DESCRIPTOR.fields_by_name["supported_versions"]
    assert versions.is_repeated
    status = pluginregistration_pb2.RegistrationStatus
    assert [(f.name, f.number) for f in status.DESCRIPTOR.fields] == [
        ("plugin_registered", 1),
        ("error", 2),
    ]
    assert not pluginregistration_pb2.InfoRequest.DESCRIPTOR.fields
    assert not pluginregistration_pb2.RegistrationStatusResponse.DESCRIPTOR.fields


def test_plugin_registration_grpc_module_uses_the_packaged_messages() -> None:
    assert hasattr(pluginregistration_pb2_grpc, "RegistrationStub")
    assert hasattr(pluginregistration_pb2_grpc, "add_RegistrationServicer_to_server")
    module = vars(pluginregistration_pb2_grpc)["pluginregistration__pb2"]
    assert module is pluginregistration_pb2
    assert "pluginregistration_pb2" not in sys.modules
