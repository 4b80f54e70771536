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
