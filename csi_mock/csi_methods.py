"""The CSI methods this driver serves, their messages and fields, as plain data.

Generated from proto/csi.proto by scripts/gen_proto.py; do not edit. Configuration
validates fault rules with it without importing protobuf.
"""

RESPONSE_FIELDS: dict[str, tuple[str, ...]] = {
    "ControllerExpandVolume": ("capacity_bytes", "node_expansion_required"),
    "ControllerGetCapabilities": ("capabilities",),
    "ControllerGetVolume": ("volume", "status"),
    "ControllerGetVolumeHealth": ("volume_health",),
    "ControllerListVolumeHealth": ("entries", "next_token"),
    "ControllerModifyVolume": (),
    "ControllerPublishVolume": ("publish_context",),
    "ControllerUnpublishVolume": (),
    "CreateSnapshot": ("snapshot",),
    "CreateVolume": ("volume",),
    "DeleteSnapshot": (),
    "DeleteVolume": (),
    "GetCapacity": ("available_capacity", "maximum_volume_size", "minimum_volume_size"),
    "GetPluginCapabilities": ("capabilities",),
    "GetPluginInfo": ("name", "vendor_version", "manifest"),
    "GetSnapshot": ("snapshot",),
    "ListSnapshots": ("entries", "next_token"),
    "ListVolumes": ("entries", "next_token"),
    "NodeExpandVolume": ("capacity_bytes",),
    "NodeGetCapabilities": ("capabilities",),
    "NodeGetInfo": ("node_id", "max_volumes_per_node", "accessible_topology"),
    "NodeGetStorageHealth": ("backend_health",),
    "NodeGetVolumeHealth": ("volume_health",),
    "NodeGetVolumeStats": ("usage", "volume_condition"),
    "NodePublishVolume": (),
    "NodeStageVolume": (),
    "NodeUnpublishVolume": (),
    "NodeUnstageVolume": (),
    "Probe": ("ready",),
    "ValidateVolumeCapabilities": ("confirmed", "message"),
}

# The request message of each method (a key of MESSAGES).
REQUEST_TYPES: dict[str, str] = {
    "ControllerExpandVolume": "csi.v1.ControllerExpandVolumeRequest",
    "ControllerGetCapabilities": "csi.v1.ControllerGetCapabilitiesRequest",
    "ControllerGetVolume": "csi.v1.ControllerGetVolumeRequest",
    "ControllerGetVolumeHealth": "csi.v1.ControllerGetVolumeHealthRequest",
    "ControllerListVolumeHealth": "csi.v1.ControllerListVolumeHealthRequest",
    "ControllerModifyVolume": "csi.v1.ControllerModifyVolumeRequest",
    "ControllerPublishVolume": "csi.v1.ControllerPublishVolumeRequest",
    "ControllerUnpublishVolume": "csi.v1.ControllerUnpublishVolumeRequest",
    "CreateSnapshot": "csi.v1.CreateSnapshotRequest",
    "CreateVolume": "csi.v1.CreateVolumeRequest",
    "DeleteSnapshot": "csi.v1.DeleteSnapshotRequest",
    "DeleteVolume": "csi.v1.DeleteVolumeRequest",
    "GetCapacity": "csi.v1.GetCapacityRequest",
    "GetPluginCapabilities": "csi.v1.GetPluginCapabilitiesRequest",
    "GetPluginInfo": "csi.v1.GetPluginInfoRequest",
    "GetSnapshot": "csi.v1.GetSnapshotRequest",
    "ListSnapshots": "csi.v1.ListSnapshotsRequest",
    "ListVolumes": "csi.v1.ListVolumesRequest",
    "NodeExpandVolume": "csi.v1.NodeExpandVolumeRequest",
    "NodeGetCapabilities": "csi.v1.NodeGetCapabilitiesRequest",
    "NodeGetInfo": "csi.v1.NodeGetInfoRequest",
    "NodeGetStorageHealth": "csi.v1.NodeGetStorageHealthRequest",
    "NodeGetVolumeHealth": "csi.v1.NodeGetVolumeHealthRequest",
    "NodeGetVolumeStats": "csi.v1.NodeGetVolumeStatsRequest",
    "NodePublishVolume": "csi.v1.NodePublishVolumeRequest",
    "NodeStageVolume": "csi.v1.NodeStageVolumeRequest",
    "NodeUnpublishVolume": "csi.v1.NodeUnpublishVolumeRequest",
    "NodeUnstageVolume": "csi.v1.NodeUnstageVolumeRequest",
    "Probe": "csi.v1.ProbeRequest",
    "ValidateVolumeCapabilities": "csi.v1.ValidateVolumeCapabilitiesRequest",
}

# The response message of each method (a key of MESSAGES).
RESPONSE_TYPES: dict[str, str] = {
    "ControllerExpandVolume": "csi.v1.ControllerExpandVolumeResponse",
    "ControllerGetCapabilities": "csi.v1.ControllerGetCapabilitiesResponse",
    "ControllerGetVolume": "csi.v1.ControllerGetVolumeResponse",
    "ControllerGetVolumeHealth": "csi.v1.ControllerGetVolumeHealthResponse",
    "ControllerListVolumeHealth": "csi.v1.ControllerListVolumeHealthResponse",
    "ControllerModifyVolume": "csi.v1.ControllerModifyVolumeResponse",
    "ControllerPublishVolume": "csi.v1.ControllerPublishVolumeResponse",
    "ControllerUnpublishVolume": "csi.v1.ControllerUnpublishVolumeResponse",
    "CreateSnapshot": "csi.v1.CreateSnapshotResponse",
    "CreateVolume": "csi.v1.CreateVolumeResponse",
    "DeleteSnapshot": "csi.v1.DeleteSnapshotResponse",
    "DeleteVolume": "csi.v1.DeleteVolumeResponse",
    "GetCapacity": "csi.v1.GetCapacityResponse",
    "GetPluginCapabilities": "csi.v1.GetPluginCapabilitiesResponse",
    "GetPluginInfo": "csi.v1.GetPluginInfoResponse",
    "GetSnapshot": "csi.v1.GetSnapshotResponse",
    "ListSnapshots": "csi.v1.ListSnapshotsResponse",
    "ListVolumes": "csi.v1.ListVolumesResponse",
    "NodeExpandVolume": "csi.v1.NodeExpandVolumeResponse",
    "NodeGetCapabilities": "csi.v1.NodeGetCapabilitiesResponse",
    "NodeGetInfo": "csi.v1.NodeGetInfoResponse",
    "NodeGetStorageHealth": "csi.v1.NodeGetStorageHealthResponse",
    "NodeGetVolumeHealth": "csi.v1.NodeGetVolumeHealthResponse",
    "NodeGetVolumeStats": "csi.v1.NodeGetVolumeStatsResponse",
    "NodePublishVolume": "csi.v1.NodePublishVolumeResponse",
    "NodeStageVolume": "csi.v1.NodeStageVolumeResponse",
    "NodeUnpublishVolume": "csi.v1.NodeUnpublishVolumeResponse",
    "NodeUnstageVolume": "csi.v1.NodeUnstageVolumeResponse",
    "Probe": "csi.v1.ProbeResponse",
    "ValidateVolumeCapabilities": "csi.v1.ValidateVolumeCapabilitiesResponse",
}

# Every message a request or a reply holds, by full name: each field"s label
# ("single", "repeated", or "map" from string keys), its type (a scalar such as
# "int64", or the full name of a message in MESSAGES or of an enum in ENUMS) and
# its oneof ("" for none). Fault rules walk field paths with it.
MESSAGES: dict[str, dict[str, tuple[str, str, str]]] = {
    "csi.v1.CapacityRange": {
        "required_bytes": ("single", "int64", ""),
        "limit_bytes": ("single", "int64", ""),
    },
    "csi.v1.ControllerExpandVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "capacity_range": ("single", "csi.v1.CapacityRange", ""),
        "secrets": ("map", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
    },
    "csi.v1.ControllerExpandVolumeResponse": {
        "capacity_bytes": ("single", "int64", ""),
        "node_expansion_required": ("single", "bool", ""),
    },
    "csi.v1.ControllerGetCapabilitiesRequest": {},
    "csi.v1.ControllerGetCapabilitiesResponse": {
        "capabilities": ("repeated", "csi.v1.ControllerServiceCapability", ""),
    },
    "csi.v1.ControllerGetVolumeHealthRequest": {
        "volume_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.ControllerGetVolumeHealthResponse": {
        "volume_health": ("single", "csi.v1.VolumeHealth", ""),
    },
    "csi.v1.ControllerGetVolumeRequest": {
        "volume_id": ("single", "string", ""),
    },
    "csi.v1.ControllerGetVolumeResponse": {
        "volume": ("single", "csi.v1.Volume", ""),
        "status": ("single", "csi.v1.ControllerGetVolumeResponse.VolumeStatus", ""),
    },
    "csi.v1.ControllerGetVolumeResponse.VolumeStatus": {
        "published_node_ids": ("repeated", "string", ""),
        "volume_condition": ("single", "csi.v1.VolumeCondition", ""),
    },
    "csi.v1.ControllerListVolumeHealthRequest": {
        "max_entries": ("single", "int32", ""),
        "starting_token": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.ControllerListVolumeHealthResponse": {
        "entries": ("repeated", "csi.v1.VolumeHealth", ""),
        "next_token": ("single", "string", ""),
    },
    "csi.v1.ControllerModifyVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
        "mutable_parameters": ("map", "string", ""),
    },
    "csi.v1.ControllerModifyVolumeResponse": {},
    "csi.v1.ControllerPublishVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "node_id": ("single", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
        "readonly": ("single", "bool", ""),
        "secrets": ("map", "string", ""),
        "volume_context": ("map", "string", ""),
    },
    "csi.v1.ControllerPublishVolumeResponse": {
        "publish_context": ("map", "string", ""),
    },
    "csi.v1.ControllerServiceCapability": {
        "rpc": ("single", "csi.v1.ControllerServiceCapability.RPC", "type"),
    },
    "csi.v1.ControllerServiceCapability.RPC": {
        "type": ("single", "csi.v1.ControllerServiceCapability.RPC.Type", ""),
    },
    "csi.v1.ControllerUnpublishVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "node_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.ControllerUnpublishVolumeResponse": {},
    "csi.v1.CreateSnapshotRequest": {
        "source_volume_id": ("single", "string", ""),
        "name": ("single", "string", ""),
        "secrets": ("map", "string", ""),
        "parameters": ("map", "string", ""),
        "accessibility_requirements": ("single", "csi.v1.TopologyRequirement", ""),
    },
    "csi.v1.CreateSnapshotResponse": {
        "snapshot": ("single", "csi.v1.Snapshot", ""),
    },
    "csi.v1.CreateVolumeRequest": {
        "name": ("single", "string", ""),
        "capacity_range": ("single", "csi.v1.CapacityRange", ""),
        "volume_capabilities": ("repeated", "csi.v1.VolumeCapability", ""),
        "parameters": ("map", "string", ""),
        "secrets": ("map", "string", ""),
        "volume_content_source": ("single", "csi.v1.VolumeContentSource", ""),
        "accessibility_requirements": ("single", "csi.v1.TopologyRequirement", ""),
        "mutable_parameters": ("map", "string", ""),
    },
    "csi.v1.CreateVolumeResponse": {
        "volume": ("single", "csi.v1.Volume", ""),
    },
    "csi.v1.DeleteSnapshotRequest": {
        "snapshot_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.DeleteSnapshotResponse": {},
    "csi.v1.DeleteVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.DeleteVolumeResponse": {},
    "csi.v1.GetCapacityRequest": {
        "volume_capabilities": ("repeated", "csi.v1.VolumeCapability", ""),
        "parameters": ("map", "string", ""),
        "accessible_topology": ("single", "csi.v1.Topology", ""),
    },
    "csi.v1.GetCapacityResponse": {
        "available_capacity": ("single", "int64", ""),
        "maximum_volume_size": ("single", "google.protobuf.Int64Value", ""),
        "minimum_volume_size": ("single", "google.protobuf.Int64Value", ""),
    },
    "csi.v1.GetPluginCapabilitiesRequest": {},
    "csi.v1.GetPluginCapabilitiesResponse": {
        "capabilities": ("repeated", "csi.v1.PluginCapability", ""),
    },
    "csi.v1.GetPluginInfoRequest": {},
    "csi.v1.GetPluginInfoResponse": {
        "name": ("single", "string", ""),
        "vendor_version": ("single", "string", ""),
        "manifest": ("map", "string", ""),
    },
    "csi.v1.GetSnapshotRequest": {
        "snapshot_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.GetSnapshotResponse": {
        "snapshot": ("single", "csi.v1.Snapshot", ""),
    },
    "csi.v1.ListSnapshotsRequest": {
        "max_entries": ("single", "int32", ""),
        "starting_token": ("single", "string", ""),
        "source_volume_id": ("single", "string", ""),
        "snapshot_id": ("single", "string", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.ListSnapshotsResponse": {
        "entries": ("repeated", "csi.v1.ListSnapshotsResponse.Entry", ""),
        "next_token": ("single", "string", ""),
    },
    "csi.v1.ListSnapshotsResponse.Entry": {
        "snapshot": ("single", "csi.v1.Snapshot", ""),
    },
    "csi.v1.ListVolumesRequest": {
        "max_entries": ("single", "int32", ""),
        "starting_token": ("single", "string", ""),
    },
    "csi.v1.ListVolumesResponse": {
        "entries": ("repeated", "csi.v1.ListVolumesResponse.Entry", ""),
        "next_token": ("single", "string", ""),
    },
    "csi.v1.ListVolumesResponse.Entry": {
        "volume": ("single", "csi.v1.Volume", ""),
        "status": ("single", "csi.v1.ListVolumesResponse.VolumeStatus", ""),
    },
    "csi.v1.ListVolumesResponse.VolumeStatus": {
        "published_node_ids": ("repeated", "string", ""),
        "volume_condition": ("single", "csi.v1.VolumeCondition", ""),
    },
    "csi.v1.NodeExpandVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "volume_path": ("single", "string", ""),
        "capacity_range": ("single", "csi.v1.CapacityRange", ""),
        "staging_target_path": ("single", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
        "secrets": ("map", "string", ""),
    },
    "csi.v1.NodeExpandVolumeResponse": {
        "capacity_bytes": ("single", "int64", ""),
    },
    "csi.v1.NodeGetCapabilitiesRequest": {},
    "csi.v1.NodeGetCapabilitiesResponse": {
        "capabilities": ("repeated", "csi.v1.NodeServiceCapability", ""),
    },
    "csi.v1.NodeGetInfoRequest": {},
    "csi.v1.NodeGetInfoResponse": {
        "node_id": ("single", "string", ""),
        "max_volumes_per_node": ("single", "int64", ""),
        "accessible_topology": ("single", "csi.v1.Topology", ""),
    },
    "csi.v1.NodeGetStorageHealthRequest": {
        "secrets": ("map", "string", ""),
    },
    "csi.v1.NodeGetStorageHealthResponse": {
        "backend_health": (
            "repeated",
            "csi.v1.NodeGetStorageHealthResponse.StorageBackendHealth",
            "",
        ),
    },
    "csi.v1.NodeGetStorageHealthResponse.StorageBackendHealth": {
        "status": ("single", "csi.v1.StorageHealthErrorType", ""),
        "reason": ("single", "string", ""),
        "message": ("single", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
    },
    "csi.v1.NodeGetVolumeHealthRequest": {
        "volume_id": ("single", "string", ""),
        "volume_publish_path": ("single", "string", ""),
        "staging_target_path": ("single", "string", ""),
    },
    "csi.v1.NodeGetVolumeHealthResponse": {
        "volume_health": ("single", "csi.v1.VolumeHealth", ""),
    },
    "csi.v1.NodeGetVolumeStatsRequest": {
        "volume_id": ("single", "string", ""),
        "volume_path": ("single", "string", ""),
        "staging_target_path": ("single", "string", ""),
    },
    "csi.v1.NodeGetVolumeStatsResponse": {
        "usage": ("repeated", "csi.v1.VolumeUsage", ""),
        "volume_condition": ("single", "csi.v1.VolumeCondition", ""),
    },
    "csi.v1.NodePublishVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "publish_context": ("map", "string", ""),
        "staging_target_path": ("single", "string", ""),
        "target_path": ("single", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
        "readonly": ("single", "bool", ""),
        "secrets": ("map", "string", ""),
        "volume_context": ("map", "string", ""),
    },
    "csi.v1.NodePublishVolumeResponse": {},
    "csi.v1.NodeServiceCapability": {
        "rpc": ("single", "csi.v1.NodeServiceCapability.RPC", "type"),
    },
    "csi.v1.NodeServiceCapability.RPC": {
        "type": ("single", "csi.v1.NodeServiceCapability.RPC.Type", ""),
    },
    "csi.v1.NodeStageVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "publish_context": ("map", "string", ""),
        "staging_target_path": ("single", "string", ""),
        "volume_capability": ("single", "csi.v1.VolumeCapability", ""),
        "secrets": ("map", "string", ""),
        "volume_context": ("map", "string", ""),
    },
    "csi.v1.NodeStageVolumeResponse": {},
    "csi.v1.NodeUnpublishVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "target_path": ("single", "string", ""),
    },
    "csi.v1.NodeUnpublishVolumeResponse": {},
    "csi.v1.NodeUnstageVolumeRequest": {
        "volume_id": ("single", "string", ""),
        "staging_target_path": ("single", "string", ""),
    },
    "csi.v1.NodeUnstageVolumeResponse": {},
    "csi.v1.PluginCapability": {
        "service": ("single", "csi.v1.PluginCapability.Service", "type"),
        "volume_expansion": ("single", "csi.v1.PluginCapability.VolumeExpansion", "type"),
    },
    "csi.v1.PluginCapability.Service": {
        "type": ("single", "csi.v1.PluginCapability.Service.Type", ""),
    },
    "csi.v1.PluginCapability.VolumeExpansion": {
        "type": ("single", "csi.v1.PluginCapability.VolumeExpansion.Type", ""),
    },
    "csi.v1.ProbeRequest": {},
    "csi.v1.ProbeResponse": {
        "ready": ("single", "google.protobuf.BoolValue", ""),
    },
    "csi.v1.Snapshot": {
        "size_bytes": ("single", "int64", ""),
        "snapshot_id": ("single", "string", ""),
        "source_volume_id": ("single", "string", ""),
        "creation_time": ("single", "google.protobuf.Timestamp", ""),
        "ready_to_use": ("single", "bool", ""),
        "group_snapshot_id": ("single", "string", ""),
        "accessible_topology": ("repeated", "csi.v1.Topology", ""),
    },
    "csi.v1.Topology": {
        "segments": ("map", "string", ""),
    },
    "csi.v1.TopologyRequirement": {
        "requisite": ("repeated", "csi.v1.Topology", ""),
        "preferred": ("repeated", "csi.v1.Topology", ""),
    },
    "csi.v1.ValidateVolumeCapabilitiesRequest": {
        "volume_id": ("single", "string", ""),
        "volume_context": ("map", "string", ""),
        "volume_capabilities": ("repeated", "csi.v1.VolumeCapability", ""),
        "parameters": ("map", "string", ""),
        "secrets": ("map", "string", ""),
        "mutable_parameters": ("map", "string", ""),
    },
    "csi.v1.ValidateVolumeCapabilitiesResponse": {
        "confirmed": ("single", "csi.v1.ValidateVolumeCapabilitiesResponse.Confirmed", ""),
        "message": ("single", "string", ""),
    },
    "csi.v1.ValidateVolumeCapabilitiesResponse.Confirmed": {
        "volume_context": ("map", "string", ""),
        "volume_capabilities": ("repeated", "csi.v1.VolumeCapability", ""),
        "parameters": ("map", "string", ""),
        "mutable_parameters": ("map", "string", ""),
    },
    "csi.v1.Volume": {
        "capacity_bytes": ("single", "int64", ""),
        "volume_id": ("single", "string", ""),
        "volume_context": ("map", "string", ""),
        "content_source": ("single", "csi.v1.VolumeContentSource", ""),
        "accessible_topology": ("repeated", "csi.v1.Topology", ""),
    },
    "csi.v1.VolumeCapability": {
        "block": ("single", "csi.v1.VolumeCapability.BlockVolume", "access_type"),
        "mount": ("single", "csi.v1.VolumeCapability.MountVolume", "access_type"),
        "access_mode": ("single", "csi.v1.VolumeCapability.AccessMode", ""),
    },
    "csi.v1.VolumeCapability.AccessMode": {
        "mode": ("single", "csi.v1.VolumeCapability.AccessMode.Mode", ""),
    },
    "csi.v1.VolumeCapability.BlockVolume": {},
    "csi.v1.VolumeCapability.MountVolume": {
        "fs_type": ("single", "string", ""),
        "mount_flags": ("repeated", "string", ""),
        "volume_mount_group": ("single", "string", ""),
    },
    "csi.v1.VolumeCondition": {
        "abnormal": ("single", "bool", ""),
        "message": ("single", "string", ""),
    },
    "csi.v1.VolumeContentSource": {
        "snapshot": ("single", "csi.v1.VolumeContentSource.SnapshotSource", "type"),
        "volume": ("single", "csi.v1.VolumeContentSource.VolumeSource", "type"),
    },
    "csi.v1.VolumeContentSource.SnapshotSource": {
        "snapshot_id": ("single", "string", ""),
    },
    "csi.v1.VolumeContentSource.VolumeSource": {
        "volume_id": ("single", "string", ""),
    },
    "csi.v1.VolumeHealth": {
        "volume_id": ("single", "string", ""),
        "health_statuses": ("repeated", "csi.v1.VolumeHealth.VolumeHealthEntry", ""),
    },
    "csi.v1.VolumeHealth.VolumeHealthEntry": {
        "status": ("single", "csi.v1.VolumeHealthErrorType", ""),
        "reason": ("single", "string", ""),
        "message": ("single", "string", ""),
    },
    "csi.v1.VolumeUsage": {
        "available": ("single", "int64", ""),
        "total": ("single", "int64", ""),
        "used": ("single", "int64", ""),
        "unit": ("single", "csi.v1.VolumeUsage.Unit", ""),
    },
    "google.protobuf.BoolValue": {
        "value": ("single", "bool", ""),
    },
    "google.protobuf.Int64Value": {
        "value": ("single", "int64", ""),
    },
    "google.protobuf.Timestamp": {
        "seconds": ("single", "int64", ""),
        "nanos": ("single", "int32", ""),
    },
}

# Each enum"s value names, in number order.
ENUMS: dict[str, tuple[str, ...]] = {
    "csi.v1.ControllerServiceCapability.RPC.Type": (
        "UNKNOWN",
        "CREATE_DELETE_VOLUME",
        "PUBLISH_UNPUBLISH_VOLUME",
        "LIST_VOLUMES",
        "GET_CAPACITY",
        "CREATE_DELETE_SNAPSHOT",
        "LIST_SNAPSHOTS",
        "CLONE_VOLUME",
        "PUBLISH_READONLY",
        "EXPAND_VOLUME",
        "LIST_VOLUMES_PUBLISHED_NODES",
        "VOLUME_CONDITION",
        "GET_VOLUME",
        "SINGLE_NODE_MULTI_WRITER",
        "MODIFY_VOLUME",
        "GET_SNAPSHOT",
        "GET_VOLUME_HEALTH",
        "LIST_VOLUME_HEALTH",
    ),
    "csi.v1.NodeServiceCapability.RPC.Type": (
        "UNKNOWN",
        "STAGE_UNSTAGE_VOLUME",
        "GET_VOLUME_STATS",
        "EXPAND_VOLUME",
        "VOLUME_CONDITION",
        "SINGLE_NODE_MULTI_WRITER",
        "VOLUME_MOUNT_GROUP",
        "GET_VOLUME_HEALTH",
        "GET_STORAGE_HEALTH",
    ),
    "csi.v1.PluginCapability.Service.Type": (
        "UNKNOWN",
        "CONTROLLER_SERVICE",
        "VOLUME_ACCESSIBILITY_CONSTRAINTS",
        "GROUP_CONTROLLER_SERVICE",
        "SNAPSHOT_METADATA_SERVICE",
        "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS",
    ),
    "csi.v1.PluginCapability.VolumeExpansion.Type": (
        "UNKNOWN",
        "ONLINE",
        "OFFLINE",
    ),
    "csi.v1.StorageHealthErrorType": (
        "UNKNOWN_STORAGE_HEALTH_ERROR_TYPE",
        "STORAGE_DEGRADED",
        "STORAGE_UNREACHABLE",
    ),
    "csi.v1.VolumeCapability.AccessMode.Mode": (
        "UNKNOWN",
        "SINGLE_NODE_WRITER",
        "SINGLE_NODE_READER_ONLY",
        "MULTI_NODE_READER_ONLY",
        "MULTI_NODE_SINGLE_WRITER",
        "MULTI_NODE_MULTI_WRITER",
        "SINGLE_NODE_SINGLE_WRITER",
        "SINGLE_NODE_MULTI_WRITER",
    ),
    "csi.v1.VolumeHealthErrorType": (
        "UNKNOWN_VOLUME_HEALTH_TYPE",
        "DEGRADED",
        "INACCESSIBLE",
        "DATA_LOSS",
    ),
    "csi.v1.VolumeUsage.Unit": (
        "UNKNOWN",
        "BYTES",
        "INODES",
    ),
}
