"""The CSI methods this driver serves and their response fields, as plain data.

Generated from proto/csi.proto by scripts/gen_proto.py; do not edit. Configuration
validates fault rules with it without importing protobuf.
"""

RESPONSE_FIELDS: dict[str, tuple[str, ...]] = {
    "ControllerExpandVolume": ("capacity_bytes", "node_expansion_required"),
    "ControllerGetCapabilities": ("capabilities",),
    "ControllerGetVolume": ("volume", "status"),
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
    "NodeGetVolumeStats": ("usage", "volume_condition"),
    "NodePublishVolume": (),
    "NodeStageVolume": (),
    "NodeUnpublishVolume": (),
    "NodeUnstageVolume": (),
    "Probe": ("ready",),
    "ValidateVolumeCapabilities": ("confirmed", "message"),
}

# The scalar type of each response field a fault rule"s override can set: a plain
# scalar, or the value of a wrapper message (google.protobuf.Int64Value...).
OVERRIDE_TYPES: dict[str, dict[str, str]] = {
    "ControllerExpandVolume": {
        "capacity_bytes": "int64",
        "node_expansion_required": "bool",
    },
    "ControllerGetCapabilities": {},
    "ControllerGetVolume": {},
    "ControllerModifyVolume": {},
    "ControllerPublishVolume": {},
    "ControllerUnpublishVolume": {},
    "CreateSnapshot": {},
    "CreateVolume": {},
    "DeleteSnapshot": {},
    "DeleteVolume": {},
    "GetCapacity": {
        "available_capacity": "int64",
        "maximum_volume_size": "int64",
        "minimum_volume_size": "int64",
    },
    "GetPluginCapabilities": {},
    "GetPluginInfo": {
        "name": "string",
        "vendor_version": "string",
    },
    "GetSnapshot": {},
    "ListSnapshots": {
        "next_token": "string",
    },
    "ListVolumes": {
        "next_token": "string",
    },
    "NodeExpandVolume": {
        "capacity_bytes": "int64",
    },
    "NodeGetCapabilities": {},
    "NodeGetInfo": {
        "node_id": "string",
        "max_volumes_per_node": "int64",
    },
    "NodeGetVolumeStats": {},
    "NodePublishVolume": {},
    "NodeStageVolume": {},
    "NodeUnpublishVolume": {},
    "NodeUnstageVolume": {},
    "Probe": {
        "ready": "bool",
    },
    "ValidateVolumeCapabilities": {
        "message": "string",
    },
}
