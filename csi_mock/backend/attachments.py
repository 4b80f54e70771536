"""ControllerPublishVolume and ControllerUnpublishVolume: which node each volume is
attached to, within each node's attach limit."""

from __future__ import annotations

import fnmatch

from csi_mock.backend.inventory import require_volume
from csi_mock.config import DriverConfig
from csi_mock.model.errors import (
    AlreadyExistsIncompatible,
    CapacityExhausted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from csi_mock.model.volume import Capability
from csi_mock.store.interface import Attachment, Store

PUBLISH_CONTEXT_NODE = "csi-mock/attached-node"
PUBLISH_CONTEXT_DEVICE = "csi-mock/device"


class Attachments:
    """The stored attachments; every change is persisted before it returns."""

    def __init__(self, config: DriverConfig, store: Store) -> None:
        self._config = config
        self._store = store
        self.limit = config.controller.attach_limit
        """Attachments per node (0: no limit)."""

    def set_limit(self, limit: int) -> None:
        """The limit per node from now on (0: none); attachments already made stay,
        even above a lowered limit."""
        if limit < 0:
            raise InvalidArgument(f"attach_limit {limit} is negative")
        self.limit = limit

    def publish(
        self, volume_id: str, node_id: str, capability: Capability | None, readonly: bool
    ) -> dict[str, str]:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        if not node_id:
            raise InvalidArgument("node_id is required")
        if capability is None:
            raise InvalidArgument("volume_capability is required")
        volume = require_volume(self._store, volume_id)
        if not self._node_known(node_id):
            raise NotFound(f"node {node_id!r} is not known to this controller")
        if capability.access_type is not volume.access_type:
            raise InvalidArgument(
                f"volume_capability: volume {volume_id} is a {volume.access_type.value}"
                f" volume, not {capability.access_type.value}"
            )
        context = {PUBLISH_CONTEXT_NODE: node_id, PUBLISH_CONTEXT_DEVICE: f"/dev/mock/{volume_id}"}
        attachments = self._store.attachments_of_volume(volume_id)
        for attachment in attachments:
            if attachment.node_id == node_id:
                if attachment.readonly != readonly or attachment.capability != capability:
                    raise AlreadyExistsIncompatible(
                        f"volume {volume_id} is already published to {node_id}"
                        " with a different capability or readonly flag"
                    )
                return context
        single = [a for a in attachments if a.capability.access_mode.single_node]
        if attachments and (capability.access_mode.single_node or single):
            holder = (single or attachments)[0]
            raise FailedPrecondition(
                f"volume {volume_id} is already published to {holder.node_id}"
                f" ({holder.capability.access_mode.name}); {capability.access_mode.name}"
                " cannot share it with another node"
            )
        limit = self.limit
        if limit and self._store.attachment_count_on_node(node_id) >= limit:
            raise CapacityExhausted(f"node {node_id} reached its attach limit of {limit} volumes")
        with self._store.transaction():
            self._store.add_attachment(Attachment(volume_id, node_id, readonly, capability))
        return context

    def unpublish(self, volume_id: str, node_id: str) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        with self._store.transaction():
            if node_id:
                self._store.remove_attachment(volume_id, node_id)
            else:
                for attachment in self._store.attachments_of_volume(volume_id):
                    self._store.remove_attachment(volume_id, attachment.node_id)

    def nodes_of(self, volume_id: str) -> tuple[str, ...]:
        """The nodes the volume is attached to."""
        return tuple(a.node_id for a in self._store.attachments_of_volume(volume_id))

    def _node_known(self, node_id: str) -> bool:
        patterns = self._config.controller.known_nodes
        if patterns is None:
            if self._config.mode.node and self._config.node.id:
                return node_id == self._config.node.id
            return True
        return any(fnmatch.fnmatchcase(node_id, pattern) for pattern in patterns)
