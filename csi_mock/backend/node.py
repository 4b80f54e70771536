"""Node operations: staging, publishing (real bind mounts), stats, expansion."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from csi_mock.backend import published_volumes
from csi_mock.backend.attachments import PUBLISH_CONTEXT_NODE
from csi_mock.backend.node_records import (
    context_size,
    data_name,
    same_file,
    volume_size,
)
from csi_mock.backend.published_volumes import VolumeStats, volume_stats
from csi_mock.config import EPHEMERAL_CONTEXT_KEY, DriverConfig
from csi_mock.host.backing import BackingStore
from csi_mock.host.loop import LoopDeviceError, LoopDevices
from csi_mock.host.mounts import Mounter
from csi_mock.host.paths import (
    EPHEMERAL_PREFIX,
    PathPolicy,
    checked_path,
    is_driver_volume_id,
    make_mount_point,
    opaque_id_component,
    remove_mount_point,
)
from csi_mock.model.errors import (
    AlreadyExistsIncompatible,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from csi_mock.model.quantity import QuantityError, parse_quantity
from csi_mock.model.volume import AccessMode, AccessType, Capability
from csi_mock.store.interface import Publication, Staging, Store

log = logging.getLogger(__name__)
EPHEMERAL_SIZE_KEY = "size"
# Modes under which a volume may have only one publication on a node (CSI NodePublish).
_ONE_PUBLICATION_MODES = frozenset(
    {
        AccessMode.SINGLE_NODE_WRITER,
        AccessMode.SINGLE_NODE_READER_ONLY,
        AccessMode.SINGLE_NODE_SINGLE_WRITER,
    }
)


@dataclass(frozen=True)
class NodeInfo:
    node_id: str
    max_volumes_per_node: int
    segment: Mapping[str, str]


class Node:
    """The node service's behaviour for one node ID."""

    def __init__(
        self,
        config: DriverConfig,
        store: Store,
        backing: BackingStore,
        mounter: Mounter,
        loops: LoopDevices | None = None,
    ) -> None:
        assert config.node.id is not None
        self.config = config
        self.node_id = config.node.id
        self.store = store
        self.backing = backing
        self.mounter = mounter
        self.loops = loops
        """Publishes block volumes as loop device nodes; None: as their backing file."""
        self.max_volumes_per_node = config.node.max_volumes_per_node
        self.ephemeral = BackingStore(config.state_dir / "ephemeral")
        """Inline ephemeral volumes' data, by opaque_id_component of their IDs."""
        self.paths = PathPolicy.of(
            config.node.allowed_roots,
            [str(config.state_dir), str(config.volumes_dir), str(config.snapshots_dir)],
        )
        """Where staging and target paths may be (checked when they are created)."""

    def info(self) -> NodeInfo:
        return NodeInfo(self.node_id, self.max_volumes_per_node, self.config.node_segment())

    def set_max_volumes_per_node(self, limit: int) -> None:
        """NodeGetInfo's max_volumes_per_node from now on (0: no limit reported); the
        kubelet reads it only when the driver registers."""
        if limit < 0:
            raise InvalidArgument(f"max_volumes_per_node {limit} is negative")
        self.max_volumes_per_node = limit

    def reset(self) -> None:
        """NodeGetInfo's limit as configured (``Driver.reset``)."""
        self.max_volumes_per_node = self.config.node.max_volumes_per_node

    def load(self) -> list[str]:
        """Make the host agree with the recorded block publications after a restart.

        Inline ephemeral volumes' data is reconciled with the publications
        (BackingStore.reconcile: a publish or unpublish cut short is finished, data no
        publication explains is moved to lost+found). Loop devices backed by our
        volumes that no publication needs (a publish or unpublish cut short by a crash)
        are torn down; recorded block publications whose device or mount is gone (a
        reboot) are set up again. Returns one line per publication that could not be
        restored; those stay recorded, so the kubelet's NodeUnpublishVolume still finds
        and clears them.
        """
        self._reconcile_ephemeral_data()
        if self.loops is None:
            return []
        block = [
            p for p in self.store.publications() if p.capability.access_type is AccessType.BLOCK
        ]
        needed = {os.path.realpath(p.data_path) for p in block}
        root = os.path.realpath(self.backing.root) + os.sep
        for backing in set(self.loops.attached().values()):
            path = str(backing)
            if path.startswith(root) and path not in needed:
                self._detach(backing)
        problems = []
        for publication in block:
            try:
                self._ensure_published(publication)
            except (OSError, FailedPrecondition) as error:
                problems.append(f"{publication.volume_id} at {publication.target_path}: {error}")
        return problems

    def _reconcile_ephemeral_data(self) -> None:
        recorded = {Path(p.data_path).name for p in self.store.publications() if p.ephemeral}
        self.ephemeral.reconcile(recorded, lambda name: name.startswith(EPHEMERAL_PREFIX))

    # -- staging -----------------------------------------------------------------------

    def stage(
        self,
        volume_id: str,
        staging_path: str,
        capability: Capability | None,
        publish_context: Mapping[str, str],
        volume_context: Mapping[str, str],
    ) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        staging_path = self.paths.check(staging_path, "staging_target_path")
        if capability is None:
            raise InvalidArgument("volume_capability is required")
        self._require_attached(volume_id, publish_context)
        existing = self.store.staging(volume_id)
        if existing is not None:
            if existing.staging_path != staging_path or existing.capability != capability:
                raise AlreadyExistsIncompatible(
                    f"volume {volume_id} is already staged at {existing.staging_path}"
                    " with a different path or capability"
                )
            self._ensure_staged(existing)
            return
        data_path = self._backing_path(volume_id, capability.access_type, volume_context)
        size = self._volume_size(volume_id, volume_context, data_path)
        staging = Staging(volume_id, staging_path, capability, str(data_path), size)
        # Record first, then mount: a crash in between leaves a record without a mount,
        # which the CO's retry completes and NodeUnstage clears; the other order would
        # leave a mount nothing knows of.
        with self.store.transaction():
            self.store.add_staging(staging)
        try:
            self._ensure_staged(staging)
        except BaseException:
            with self.store.transaction():
                self.store.remove_staging(volume_id)
            raise

    def _ensure_staged(self, staging: Staging) -> None:
        self._make_mount_point(staging.staging_path, "staging_target_path", directory=True)
        # Block volumes need no staging mount: publish binds the backing file directly.
        if staging.capability.access_type is AccessType.MOUNT and not self.mounter.is_mounted(
            staging.staging_path
        ):
            self.mounter.bind(staging.data_path, staging.staging_path, readonly=False)

    def unstage(self, volume_id: str, staging_path: str) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        staging_path = checked_path(staging_path, "staging_target_path")
        staging = self.store.staging(volume_id)
        if staging is None:
            return  # Idempotent.
        if staging.staging_path != staging_path:
            return  # Not staged at this path: the spec says OK.
        if self.store.publications_of_volume(volume_id):
            raise FailedPrecondition(f"volume {volume_id} is still published on this node")
        self.mounter.unmount(staging_path)
        with self.store.transaction():
            self.store.remove_staging(volume_id)

    # -- publishing -------------------------------------------------------------------

    def publish(
        self,
        volume_id: str,
        target_path: str,
        staging_path: str,
        capability: Capability | None,
        readonly: bool,
        publish_context: Mapping[str, str],
        volume_context: Mapping[str, str],
    ) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        target_path = self.paths.check(target_path, "target_path")
        if capability is None:
            raise InvalidArgument("volume_capability is required")
        ephemeral = volume_context.get(EPHEMERAL_CONTEXT_KEY) == "true"
        existing = self.store.publication(volume_id, target_path)
        if existing is not None:
            if existing.readonly != readonly or existing.capability != capability:
                raise AlreadyExistsIncompatible(
                    f"volume {volume_id} is already published at {target_path}"
                    " with a different capability or readonly flag"
                )
            self._ensure_published(existing)
            return
        if staging_path:
            staging_path = checked_path(staging_path, "staging_target_path")
        self._check_second_target(volume_id, capability)
        if ephemeral:
            publication = self._ephemeral_publication(
                volume_id, target_path, capability, readonly, volume_context
            )
        else:
            publication = self._persistent_publication(
                volume_id,
                target_path,
                staging_path,
                capability,
                readonly,
                publish_context,
                volume_context,
            )
        if publication.ephemeral:  # Its data before its row; load() discards it.
            self.ephemeral.create(data_name(publication), AccessType.MOUNT, 0, pending=True)
        # Record first, then mount, as for staging.
        with self.store.transaction():
            self.store.add_publication(publication)
        if publication.ephemeral:
            self.ephemeral.promote(data_name(publication))
        try:
            self._ensure_published(publication)
        except BaseException:
            with self.store.transaction():
                self.store.remove_publication(volume_id, target_path)
            raise

    def _check_second_target(self, volume_id: str, capability: Capability) -> None:
        """A volume already published elsewhere on this node may be published again only
        with the same capability and a mode that allows several publications."""
        others = self.store.publications_of_volume(volume_id)
        if not others:
            return
        other = others[0]
        if capability.access_mode in _ONE_PUBLICATION_MODES:
            raise FailedPrecondition(
                f"volume {volume_id} is {capability.access_mode.name} and already published"
                f" at {other.target_path}"
            )
        if other.capability != capability:
            raise FailedPrecondition(
                f"volume {volume_id} is published at {other.target_path} with another"
                " volume_capability"
            )

    def _persistent_publication(
        self,
        volume_id: str,
        target_path: str,
        staging_path: str,
        capability: Capability,
        readonly: bool,
        publish_context: Mapping[str, str],
        volume_context: Mapping[str, str],
    ) -> Publication:
        if self.config.node.stage_unstage:
            if not staging_path:
                raise FailedPrecondition(
                    "staging_target_path is required: this plugin stages volumes"
                    " (STAGE_UNSTAGE_VOLUME)"
                )
            staging_path = checked_path(staging_path, "staging_target_path")
            staging = self.store.staging(volume_id)
            if staging is None or staging.staging_path != staging_path:
                raise FailedPrecondition(f"volume {volume_id} is not staged at {staging_path}")
            data_path, size = staging.data_path, staging.size
        else:
            self._require_attached(volume_id, publish_context)
            backing = self._backing_path(volume_id, capability.access_type, volume_context)
            data_path, size = str(backing), self._volume_size(volume_id, volume_context, backing)
        source = (
            staging_path
            if (self.config.node.stage_unstage and capability.access_type is AccessType.MOUNT)
            else data_path
        )
        return Publication(
            volume_id=volume_id,
            target_path=target_path,
            staging_path=source,
            readonly=readonly,
            capability=capability,
            data_path=data_path,
            size=size,
        )

    def _ephemeral_publication(
        self,
        volume_id: str,
        target_path: str,
        capability: Capability,
        readonly: bool,
        volume_context: Mapping[str, str],
    ) -> Publication:
        if capability.access_type is not AccessType.MOUNT:
            raise InvalidArgument(
                "volume_capability: inline ephemeral volumes must use the mount access type"
            )
        try:
            size = parse_quantity(
                volume_context.get(EPHEMERAL_SIZE_KEY)
                or str(self.config.controller.default_volume_size)
            )
        except QuantityError as error:
            raise InvalidArgument(f"volume_context {EPHEMERAL_SIZE_KEY}: {error}") from None
        data_path = self.ephemeral.path(opaque_id_component(volume_id))
        return Publication(
            volume_id=volume_id,
            target_path=target_path,
            staging_path=str(data_path),
            readonly=readonly,
            capability=capability,
            data_path=str(data_path),
            ephemeral=True,
            size=size,
        )

    def _ensure_published(self, publication: Publication) -> None:
        target = publication.target_path
        source = publication.staging_path
        mounted = self.mounter.is_mounted(target)
        if publication.capability.access_type is AccessType.BLOCK:
            self._make_mount_point(target, "target_path", directory=False)
            if self.loops is not None:
                source = self.loops.attach(Path(publication.data_path))
                if mounted and not same_file(target, source):
                    self.mounter.unmount(target)  # A device of before a crash or reboot.
                    mounted = False
        else:
            self._make_mount_point(target, "target_path", directory=True)
        if not mounted:
            self.mounter.bind(source, target, readonly=publication.readonly)

    async def unpublish(self, volume_id: str, target_path: str) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        target_path = checked_path(target_path, "target_path")
        publication = self.store.publication(volume_id, target_path)
        if publication is None:
            return  # Idempotent: nothing published there by us.
        self.mounter.unmount(target_path)
        # Only the now-empty mount point: anything else there is not the driver's.
        remove_mount_point(target_path)
        # An ephemeral volume's data is moved aside before its row goes (a crash
        # between: load() moves it back), and removed after, off the loop.
        retired = self.ephemeral.retire(data_name(publication)) if publication.ephemeral else None
        with self.store.transaction():
            self.store.remove_publication(volume_id, target_path)
        if retired is not None:
            await asyncio.to_thread(self.ephemeral.discard, retired)
        # After the commit: a crash before this leaves a device that load() tears down.
        if (
            self.loops is not None
            and publication.capability.access_type is AccessType.BLOCK
            and not self.store.publications_of_volume(volume_id)
        ):
            self._detach(Path(publication.data_path))

    # -- stats and expansion ------------------------------------------------------------

    async def stats(self, volume_id: str, volume_path: str) -> VolumeStats:
        """Usage of a published or staged volume (``published_volumes.volume_stats``)."""
        return await volume_stats(
            self.store,
            volume_id,
            volume_path,
            default_size=self.config.controller.default_volume_size,
        )

    def expand(self, volume_id: str, volume_path: str, required: int, limit: int) -> int:
        return published_volumes.expand(
            self.store,
            self.loops,
            volume_id,
            volume_path,
            required,
            limit,
            max_expansion_size=self.config.node.max_expansion_size,
            default_size=self.config.controller.default_volume_size,
        )

    def apply_mount_group(self, volume_id: str, path: str, group: int) -> bool:
        """Give the data of the volume at ``path`` to ``group``
        (``published_volumes.apply_mount_group``)."""
        return published_volumes.apply_mount_group(self.store, volume_id, path, group)

    # -- helpers -------------------------------------------------------------------------

    def _make_mount_point(self, path: str, field: str, *, directory: bool) -> None:
        root = self.paths.root_of(path)
        if root is None:  # Recorded under an older node.allowed_roots.
            raise FailedPrecondition(f"{field} {path!r} is outside the allowed roots")
        make_mount_point(path, field, directory=directory, root=root)

    def _detach(self, backing: Path) -> None:
        """Free a block volume's loop device, unless a mount still shows it (the
        kubelet's own bind mount of our node, say): then it stays until the volume is
        deleted or the driver restarts, and its number is not handed to another volume."""
        assert self.loops is not None
        try:
            self.loops.detach(backing)
        except LoopDeviceError as error:
            log.warning("loop device kept: %s", error)

    def _require_attached(self, volume_id: str, publish_context: Mapping[str, str]) -> None:
        if not self.config.attach_required:
            return
        attached_to = publish_context.get(PUBLISH_CONTEXT_NODE)
        if attached_to != self.node_id:
            raise FailedPrecondition(
                f"volume {volume_id} was not published to node {self.node_id} by"
                " ControllerPublishVolume (publish_context lacks the attachment)"
            )

    def _backing_path(
        self, volume_id: str, access_type: AccessType, volume_context: Mapping[str, str]
    ) -> Path:
        if not is_driver_volume_id(volume_id):
            raise NotFound(f"volume {volume_id!r} does not exist")
        if self.backing.exists(volume_id):
            path = self.backing.path(volume_id)
            actual = AccessType.BLOCK if path.is_file() else AccessType.MOUNT
            if actual is not access_type:
                raise FailedPrecondition(
                    f"volume {volume_id} is a {actual.value} volume, not {access_type.value}"
                )
            return path
        if not self.config.node.materialize_missing_volumes:
            raise NotFound(f"volume {volume_id!r} does not exist in {self.backing.root}")
        return self.backing.create(volume_id, access_type, context_size(volume_context) or 0)

    def _volume_size(
        self, volume_id: str, volume_context: Mapping[str, str], data_path: Path
    ) -> int:
        return volume_size(self.store, volume_id, volume_context, data_path)
