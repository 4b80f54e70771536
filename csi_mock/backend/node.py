"""Node operations: staging, publishing (real bind mounts), stats, expansion."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from csi_mock.backend.attachments import PUBLISH_CONTEXT_NODE
from csi_mock.backend.controller import VOLUME_CONTEXT_SIZE
from csi_mock.config import EPHEMERAL_CONTEXT_KEY, DriverConfig
from csi_mock.host.backing import BackingStore, Usage, usage_of
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
    OutOfRange,
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


@dataclass(frozen=True)
class VolumeStats:
    total_bytes: int
    used_bytes: int
    available_bytes: int
    used_inodes: int
    total_inodes: int
    abnormal: str | None
    """Why the volume is unhealthy, or None."""
    block: bool = False
    """A raw block volume: inode counts mean nothing for it."""


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
                if mounted and not _same_file(target, source):
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
        """Usage of a published or staged volume; the walk of its tree runs off the loop.

        A mount volume is a directory of a shared backend filesystem, so statvfs cannot
        tell its usage: its bytes and inodes are counted. A block volume reports the
        blocks its file has allocated.
        """
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        record = self._record_at(volume_id, _lookup_path(volume_path))
        if not os.path.exists(_recorded_path(record)):
            raise NotFound(f"volume_path {volume_path} does not exist")
        total = self._size_of(record)
        block = record.capability.access_type is AccessType.BLOCK
        measured = await asyncio.to_thread(_measure, Path(record.data_path))
        if measured is None:
            missing = f"backing data {record.data_path} is missing"
            return VolumeStats(total, 0, total, 0, 0, missing, block=block)
        usage, total_inodes = measured
        return VolumeStats(
            total_bytes=total,
            used_bytes=usage.used_bytes,
            available_bytes=max(0, total - usage.used_bytes),
            used_inodes=usage.used_inodes,
            total_inodes=total_inodes,
            abnormal=None,
            block=block,
        )

    def expand(self, volume_id: str, volume_path: str, required: int, limit: int) -> int:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        volume_path = _lookup_path(volume_path)
        if required < 0 or limit < 0:
            raise InvalidArgument("capacity_range must not be negative")
        if limit and required > limit:
            raise OutOfRange(f"required_bytes {required} exceeds limit_bytes {limit}")
        cap = self.config.node.max_expansion_size
        if cap is not None and required > cap:
            raise OutOfRange(
                f"capacity_range.required_bytes {required} exceeds node.max_expansion_size {cap}"
            )
        record = self._record_at(volume_id, volume_path)
        if not required:
            return self._size_of(record)
        if record.capability.access_type is AccessType.BLOCK:
            path = Path(record.data_path)
            if path.is_file() and path.stat().st_size < required:
                try:
                    os.truncate(path, required)
                except OSError as error:  # EFBIG: beyond the host filesystem's file size
                    raise OutOfRange(
                        f"capacity_range.required_bytes {required}: {error.strerror}"
                    ) from None
                if self.loops is not None:
                    self.loops.refresh_size(path)
        if required > self._size_of(record):
            with self.store.transaction():
                self.store.set_node_volume_size(volume_id, required)
        return max(required, self._size_of(record))

    def apply_mount_group(self, volume_id: str, path: str, group: int) -> bool:
        """Make the data of the volume staged or published at path the group's
        (VOLUME_MOUNT_GROUP): its group, group read-write, and setgid so that new entries
        inherit the group. A bind mount takes no gid= option, so the data itself carries
        it. False when the host refuses (a driver without the privilege to chown)."""
        record = self._record_at(volume_id, _lookup_path(path))
        data = Path(record.data_path)
        if record.capability.access_type is AccessType.BLOCK or not data.is_dir():
            return False
        try:
            os.chown(data, -1, group)
            mode = data.stat().st_mode
            data.chmod(stat.S_IMODE(mode) | stat.S_IRWXG | stat.S_ISGID)
        except PermissionError as error:
            log.info("volume %s: mount group %d not applied: %s", volume_id, group, error)
            return False
        return True

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
        return self.backing.create(volume_id, access_type, _context_size(volume_context) or 0)

    def _record_at(self, volume_id: str, path: str) -> Staging | Publication:
        publication = self.store.publication(volume_id, path)
        if publication is not None:
            return publication
        staging = self.store.staging(volume_id)
        if staging is not None and staging.staging_path == path:
            return staging
        # The kubelet asks for a block volume's stats at its own bind mount of our
        # published node (<global map path>/<pod UID>): the same device, another path.
        for other in self.store.publications_of_volume(volume_id):
            if other.capability.access_type is AccessType.BLOCK and _same_file(
                path, other.target_path
            ):
                return other
        if self.store.publications_of_volume(volume_id) or staging is not None:
            raise NotFound(f"volume {volume_id} is not published or staged at {path}")
        raise NotFound(f"volume {volume_id!r} is not staged or published on this node")

    def _volume_size(
        self, volume_id: str, volume_context: Mapping[str, str], data_path: Path
    ) -> int:
        """The volume's capacity: from the controller's volume_context, the controller's
        own record (combined mode) or the backing file; 0 when nothing tells."""
        given = _context_size(volume_context)
        if given is not None:
            return given
        volume = self.store.volume_by_id(volume_id)
        if volume is not None:
            return volume.size
        return data_path.stat().st_size if data_path.is_file() else 0

    def _size_of(self, record: Staging | Publication) -> int:
        path = Path(record.data_path)
        if path.is_file():
            return path.stat().st_size  # A block volume's size is its backing file's.
        if record.size:
            return record.size
        return self.config.controller.default_volume_size


def data_name(publication: Publication) -> str:
    """The name of an ephemeral publication's data in Node.ephemeral."""
    return Path(publication.data_path).name


def _measure(data_path: Path) -> tuple[Usage, int] | None:
    """A volume's usage and its filesystem's inode count; None when the data is gone."""
    try:
        return usage_of(data_path), os.statvfs(data_path).f_files
    except FileNotFoundError:
        return None


def _context_size(volume_context: Mapping[str, str]) -> int | None:
    """The volume size the controller recorded in the volume context, if well formed."""
    given = volume_context.get(VOLUME_CONTEXT_SIZE, "")
    return int(given) if given.isascii() and given.isdigit() else None


def _lookup_path(path: str) -> str:
    """A path used only to find a record: anything we did not record is NOT_FOUND."""
    if not path:
        raise InvalidArgument("volume_path is required")
    if "\x00" in path:
        raise InvalidArgument("volume_path contains a NUL byte")
    return os.path.normpath(path) if os.path.isabs(path) else path


def _recorded_path(record: Staging | Publication) -> str:
    return record.target_path if isinstance(record, Publication) else record.staging_path


def _same_file(a: str, b: str) -> bool:
    """Whether two paths show the same device node, or the same file."""
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    if stat.S_ISBLK(first.st_mode) or stat.S_ISBLK(second.st_mode):
        return (
            stat.S_ISBLK(first.st_mode)
            and stat.S_ISBLK(second.st_mode)
            and (first.st_rdev == second.st_rdev)
        )
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
