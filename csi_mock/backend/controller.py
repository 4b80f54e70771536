"""Controller operations: volumes, attachments and capacity."""

from __future__ import annotations

import asyncio
import copy
import fnmatch
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from csi_mock.backend.in_flight import (
    Claim,
    InFlight,
    run_to_completion,
    snapshot_key,
    volume_key,
    volume_name_key,
)
from csi_mock.backend.inventory import page_after, token_after
from csi_mock.backend.names import NAME_MAX_BYTES, check_name
from csi_mock.backend.parameters import resolve_kind, significant
from csi_mock.backend.snapshots import Snapshots
from csi_mock.config import DriverConfig
from csi_mock.host.backing import BackingStore
from csi_mock.host.copying import copy_data
from csi_mock.host.paths import is_driver_volume_id
from csi_mock.model.capacity import CapacityReport, capacity_at
from csi_mock.model.errors import (
    Aborted,
    AlreadyExistsIncompatible,
    CapacityExhausted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    Unimplemented,
)
from csi_mock.model.kind import VolumeKind
from csi_mock.model.mutable_parameters import MutableParameterRules, modified_parameters, satisfies
from csi_mock.model.placement import (
    Placement,
    PlacementRequest,
    place_volume,
    range_for_source,
    validate_range,
)
from csi_mock.model.pool import Pool, PoolSpec
from csi_mock.model.topology import Segment, reachable_from_any
from csi_mock.model.volume import AccessType, Capability, ContentSource, SourceType, Volume
from csi_mock.store.sqlite import Attachment, StateStore

log = logging.getLogger(__name__)
__all__ = ["NAME_MAX_BYTES", "Controller", "CreateRequest", "VolumeStatus", "check_name"]
PUBLISH_CONTEXT_NODE = "csi-mock/attached-node"
PUBLISH_CONTEXT_DEVICE = "csi-mock/device"
VOLUME_CONTEXT_SIZE = "csi-mock/size"
VOLUME_CONTEXT_POOL = "csi-mock/pool"
VOLUME_CONTEXT_KIND = "csi-mock/kind"
VOLUME_CONTEXT_ACCESS_TYPE = "csi-mock/access-type"


@dataclass(frozen=True)
class CreateRequest:
    name: str
    capabilities: Sequence[Capability]
    required_bytes: int = 0
    limit_bytes: int = 0
    parameters: Mapping[str, str] | None = None
    requisite: Sequence[Segment] = ()
    preferred: Sequence[Segment] = ()
    mutable_parameters: Mapping[str, str] | None = None
    content_source: ContentSource | None = None


@dataclass(frozen=True)
class SourceData:
    """The data a new volume is created with: a snapshot's or a volume's."""

    source: ContentSource
    path: Path
    size: int
    segment: Segment
    access_type: AccessType
    key: str
    """The InFlight key the copy holds (shared) while it reads."""


@dataclass(frozen=True)
class VolumeStatus:
    volume: Volume
    published_nodes: tuple[str, ...]


class Controller:
    """Owns the pools' live accounting; every change is persisted before it returns."""

    def __init__(self, config: DriverConfig, store: StateStore, backing: BackingStore) -> None:
        self.config = config
        self.store = store
        self.backing = backing
        self.kinds = {name: VolumeKind(name, kind.cost) for name, kind in config.kinds.items()}
        self.pools = [
            Pool(
                PoolSpec(
                    name=pool.name,
                    size=pool.size,
                    segment=dict(pool.segment),
                    max_volume_size=pool.max_volume_size,
                    min_volume_size=pool.min_volume_size,
                    kinds=frozenset(pool.kinds) if pool.kinds is not None else None,
                    allocation=pool.allocation,
                )
            )
            for pool in config.effective_pools()
        ]
        self._pools = {pool.name: pool for pool in self.pools}
        self.attach_limit = config.controller.attach_limit
        modify = config.controller.modify  # None: no MODIFY_VOLUME
        self.mutable_rules: MutableParameterRules | None = modify.rules() if modify else None
        self._frozen: list[Pool] | None = None
        self.in_flight = InFlight()
        """Keys held by operations that copy data across an await (ABORTED for others)."""
        snapshots = config.controller.snapshots
        self.snapshots = Snapshots(
            snapshots,
            store,
            self._pools,
            self.kinds,
            backing,
            BackingStore(config.snapshots_dir) if snapshots is not None else None,
            self.in_flight,
        )

    # -- start-up --------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild accounting from the store and make the backing files agree with it.

        After a crash the store is the truth for what the driver wrote itself: a
        create or delete cut short is finished in the direction the store says
        (BackingStore.reconcile). A live backing entry without a row is moved to
        lost+found, never removed; a row without data gets an empty entry, logged.
        """
        usage = self.store.pool_usage()
        allocations = self.store.allocations()
        unknown = sorted(set(allocations) - set(self._pools))
        if unknown:
            raise RuntimeError(
                f"the state holds volumes in pools no longer configured: {', '.join(unknown)}"
            )
        with self.store.transaction():
            for pool in self.pools:
                saved = usage.get(pool.name)
                if saved is not None and saved.total is not None:
                    pool.total = saved.total
                pool.load(allocations.get(pool.name, []), saved.external if saved else 0)
                if saved is None or saved.used != pool.used:
                    self.store.set_pool_used(pool.name, pool.used)
        done = self.backing.reconcile(self.store.all_volume_ids(), is_driver_volume_id)
        for volume_id in done.promoted + done.restored:
            log.info("volume %s: a create or delete cut short by a crash, finished", volume_id)
        for volume in self.store.volumes_after(0, None):
            if not self.backing.exists(volume.id):
                log.warning("volume %s had no backing data: created empty", volume.id)
                self.backing.create(volume.id, volume.access_type, volume.size)
        self.snapshots.load()

    # -- volumes ---------------------------------------------------------------------

    def create_volume(self, request: CreateRequest) -> Volume:
        """An empty volume (CreateVolume without a content source)."""
        if request.content_source is not None:
            raise InvalidArgument("volume_content_source: use create_volume_from_source")
        access_type, parameters, kind, mutable = self._validated(request)

        existing = self.store.volume_by_name(request.name)
        if existing is not None:
            self._check_compatible(existing, request, access_type, parameters)
            return existing
        self.in_flight.check(volume_name_key(request.name))

        placement = place_volume(
            PlacementRequest(
                kind=kind,
                required_bytes=request.required_bytes,
                limit_bytes=request.limit_bytes,
                requisite=request.requisite,
                preferred=request.preferred,
                default_size=self.config.controller.default_volume_size,
            ),
            self.pools,
        )
        volume = Volume(
            id=new_volume_id(),
            name=request.name,
            pool=placement.pool.name,
            kind=kind.name,
            size=placement.size,
            allocation=placement.allocation,
            offset=placement.offset,
            access_type=access_type,
            segment=dict(placement.pool.segment),
            parameters=parameters,
            capabilities=tuple(request.capabilities),
            created_at=time.time(),
            mutable_parameters=mutable,
        )
        try:
            # Backing first, as pending: a crash now leaves an entry that load() discards.
            self.backing.create(volume.id, access_type, volume.size, pending=True)
            with self.store.transaction():
                volume = self.store.insert_volume(volume)
        except BaseException:
            placement.pool.release(placement.offset, placement.allocation)
            self.backing.discard(self.backing.pending_path(volume.id))
            raise
        self.backing.promote(volume.id)  # A crash before this: load() promotes it.
        return volume

    async def create_volume_from_source(self, request: CreateRequest) -> Volume:
        """A volume holding a copy of a snapshot's or a volume's data (CreateVolume with
        a content source: a restore or a clone).

        Placed only where the source's data is (model.placement.can_take_data_from), at
        least as large as the source. The copy runs in a worker thread before the
        commit, as create_volume's backing entry does: a crash leaves an orphan that
        load() removes. Meanwhile the name and the source are held (InFlight).
        """
        source = request.content_source
        if source is None:
            raise InvalidArgument("volume_content_source is required")
        access_type, parameters, kind, mutable = self._validated(request)
        existing = self.store.volume_by_name(request.name)
        if existing is not None:
            self._check_compatible(existing, request, access_type, parameters)
            return existing
        data = self._source_data(source)
        if data.access_type is not access_type:
            raise InvalidArgument(
                f"volume_content_source: {source} holds a {data.access_type.value} volume's"
                f" data, not a {access_type.value} volume's"
            )
        required = range_for_source(
            request.required_bytes, request.limit_bytes, data.size, str(source)
        )
        claim = self.in_flight.hold(
            f"CreateVolume {request.name!r} from {source}",
            exclusive=[volume_name_key(request.name)],
            shared=[data.key],
        )
        try:
            placement = place_volume(
                PlacementRequest(
                    kind=kind,
                    required_bytes=required,
                    limit_bytes=request.limit_bytes,
                    requisite=request.requisite,
                    preferred=request.preferred,
                    default_size=data.size,
                    source_segment=data.segment,
                ),
                self.pools,
            )
        except BaseException:
            claim.release()
            raise
        volume = Volume(
            id=new_volume_id(),
            name=request.name,
            pool=placement.pool.name,
            kind=kind.name,
            size=placement.size,
            allocation=placement.allocation,
            offset=placement.offset,
            access_type=access_type,
            segment=dict(placement.pool.segment),
            parameters=parameters,
            capabilities=tuple(request.capabilities),
            created_at=time.time(),
            mutable_parameters=mutable,
            content_source=source,
        )
        return await run_to_completion(self._populate(volume, placement, data, claim))

    async def _populate(
        self, volume: Volume, placement: Placement, data: SourceData, claim: Claim
    ) -> Volume:
        with claim:
            try:
                # The copy first, as pending: a crash now leaves an entry load() discards.
                await asyncio.to_thread(
                    copy_data,
                    data.path,
                    self.backing.pending_path(volume.id),
                    volume.access_type,
                    volume.size,
                )
                with self.store.transaction():
                    volume = self.store.insert_volume(volume)
            except BaseException:
                placement.pool.release(placement.offset, placement.allocation)
                # On the loop: a failed copy must go now.
                self.backing.discard(self.backing.pending_path(volume.id))
                raise
            self.backing.promote(volume.id)
        return volume

    def _source_data(self, source: ContentSource) -> SourceData:
        """Where the data of `source` is, or why it cannot be used (NotFound, or Aborted
        for a snapshot that is not ready yet)."""
        if source.type is SourceType.SNAPSHOT:
            snapshots = self.snapshots
            if snapshots.data is None:
                raise InvalidArgument(
                    "volume_content_source: snapshots are not supported"
                    " (controller.snapshots is not set)"
                )
            snapshot = snapshots.find(source.id)
            if snapshot is None:
                raise NotFound(f"volume_content_source: snapshot {source.id!r} does not exist")
            if not snapshots.ready_to_use(snapshot):
                # CSI: only a snapshot that is ready to use MAY be a content source. It
                # becomes ready by itself, so the CO is told to retry (ABORTED, as for an
                # operation still pending on it), not to change its request.
                raise Aborted(
                    f"volume_content_source: snapshot {source.id} is not ready to use yet"
                    f" (ready in {snapshot.ready_at - time.time():.1f}s)"
                )
            return SourceData(
                source,
                snapshots.data.path(snapshot.id),
                snapshot.size,
                snapshot.segment,
                snapshot.access_type,
                snapshot_key(snapshot.id),
            )
        if not self.config.controller.clones:
            raise InvalidArgument("volume_content_source: cloning volumes is not supported")
        volume = self._find(source.id)
        if volume is None:
            raise NotFound(f"volume_content_source: volume {source.id!r} does not exist")
        return SourceData(
            source,
            self.backing.path(volume.id),
            volume.size,
            volume.segment,
            volume.access_type,
            volume_key(volume.id),
        )

    def _validated(
        self, request: CreateRequest
    ) -> tuple[AccessType, dict[str, str], VolumeKind, dict[str, str]]:
        """CreateVolume's checks of the request itself: its access type, parameters,
        kind and mutable parameters."""
        if not request.name:
            raise InvalidArgument("name is required")
        check_name(request.name)
        if not request.capabilities:
            raise InvalidArgument("volume_capabilities is required")
        access_type = _single_access_type(request.capabilities)
        parameters = dict(request.parameters or {})
        kind = resolve_kind(parameters, self.kinds, self.config.effective_default_kind)
        validate_range(request.required_bytes, request.limit_bytes)
        mutable = dict(request.mutable_parameters or {})
        if mutable:
            if self.mutable_rules is None:
                raise InvalidArgument(
                    "mutable_parameters is not supported (no MODIFY_VOLUME capability)"
                )
            self.mutable_rules.check(mutable)
        return access_type, parameters, kind, mutable

    def _check_compatible(
        self,
        existing: Volume,
        request: CreateRequest,
        access_type: AccessType,
        parameters: Mapping[str, str],
    ) -> None:
        problems = []
        if request.required_bytes and existing.size < request.required_bytes:
            problems.append(f"size {existing.size} < required_bytes {request.required_bytes}")
        if request.limit_bytes and existing.size > request.limit_bytes:
            problems.append(f"size {existing.size} > limit_bytes {request.limit_bytes}")
        if access_type is not existing.access_type:
            problems.append(f"access type {existing.access_type.value}, not {access_type.value}")
        if significant(parameters) != significant(existing.parameters):
            problems.append(f"parameters {dict(significant(existing.parameters))}")
        if request.requisite and not reachable_from_any(existing.segment, request.requisite):
            problems.append(f"it is not reachable from the requisite topology {existing.segment}")
        if not satisfies(existing.mutable_parameters, request.mutable_parameters or {}):
            problems.append(f"mutable_parameters {dict(existing.mutable_parameters)}")
        if request.content_source != existing.content_source:
            problems.append(f"content source {existing.content_source or 'none'}")
        if problems:
            raise AlreadyExistsIncompatible(
                f"volume {existing.name!r} already exists with " + "; ".join(problems)
            )

    async def delete_volume(self, volume_id: str) -> None:
        """Forget the volume, then remove its data off the event loop.

        A volume that is staged or published (on this driver's node, or shown by any
        mount on this host) is refused with FAILED_PRECONDITION, as the CSI spec allows
        for a volume in use: deleting it would give its space back while mounts still
        show its data, and free a block volume's loop device for the next volume.
        The data is moved aside before the row goes, so from the commit on a node
        finds no such volume; its removal, which can take seconds, runs in a worker
        thread so that other calls go on meanwhile.
        """
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        volume = self._find(volume_id)
        if volume is None:
            return  # Idempotent: already gone.
        self.in_flight.check(volume_key(volume_id))  # A snapshot or clone reads it now.
        attached = self.store.attachments_of_volume(volume_id)
        if attached:
            raise FailedPrecondition(
                f"volume {volume_id} is still published to node(s) "
                + ", ".join(a.node_id for a in attached)
            )
        users = self._users_of(volume_id)
        if users:
            raise FailedPrecondition(f"volume {volume_id} is in use: " + "; ".join(users))
        retired = self.backing.retire(volume.id)
        try:
            with self.store.transaction():
                self.store.delete_volume(volume)
        except BaseException:
            if retired is not None:
                self.backing.unretire(volume.id)
            raise
        self._pools[volume.pool].release(volume.offset, volume.allocation)
        if retired is not None:
            await asyncio.to_thread(self.backing.discard, retired)

    def _users_of(self, volume_id: str) -> list[str]:
        """What still uses a volume: its staging and publications recorded by this
        driver's node service, else mounts on this host that show its data (a node
        service in another process)."""
        staging = self.store.staging(volume_id)
        users = [f"staged at {staging.staging_path}"] if staging is not None else []
        users += [
            f"published at {publication.target_path}"
            for publication in self.store.publications_of_volume(volume_id)
        ]
        return users or self.backing.users(volume_id)

    def expand_volume(self, volume_id: str, required: int, limit: int) -> Volume:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        if required < 0 or limit < 0:
            raise InvalidArgument(
                "capacity_range: required_bytes and limit_bytes must not be negative"
            )
        if required == 0:
            raise InvalidArgument("capacity_range.required_bytes is required")
        validate_range(required, limit)
        volume = self._require(volume_id)
        if volume.size >= required:
            return volume  # Idempotent, and shrinking is not a thing in CSI.
        self.in_flight.check(volume_key(volume_id))  # A copy reads it at its current size.
        pool = self._pools[volume.pool]
        if pool.spec.max_volume_size is not None and required > pool.spec.max_volume_size:
            raise OutOfRange(
                f"pool {pool.name} takes volumes up to {pool.spec.max_volume_size} bytes"
            )
        kind = self.kinds[volume.kind]
        allocation = kind.allocation_for(required)
        offset = pool.regrow(volume.offset, volume.allocation, allocation)
        if offset is None:
            raise CapacityExhausted(
                f"pool {pool.name} has no room to grow {volume_id} to {required} bytes"
            )
        try:
            # Backing first, as for create: a crash or a failed commit leaves a file
            # larger than its record, which is harmless (the extra bytes are sparse).
            self.backing.resize(volume.id, required)
            with self.store.transaction():
                self.store.resize_volume(volume, required, allocation, offset)
        except BaseException:
            pool.undo_regrow(offset, allocation, volume.offset, volume.allocation)
            raise
        return replace(volume, size=required, allocation=allocation, offset=offset)

    def modify_volume(self, volume_id: str, mutable_parameters: Mapping[str, str]) -> Volume:
        """Merge `mutable_parameters` into the volume's (ControllerModifyVolume); the
        volume is looked up first, so a missing one is NOT_FOUND whatever is asked."""
        rules = self.mutable_rules
        if rules is None:
            raise Unimplemented("volume modification is not supported")
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        with self.store.transaction():
            volume = self._require(volume_id)
            merged = modified_parameters(volume.mutable_parameters, mutable_parameters, rules)
            if merged != volume.mutable_parameters:
                self.store.set_mutable_parameters(volume.id, merged)
        return replace(volume, mutable_parameters=merged)

    def get_volume(self, volume_id: str) -> VolumeStatus:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        volume = self._require(volume_id)
        return VolumeStatus(volume, self._published_nodes(volume_id))

    def list_volumes(self, max_entries: int, starting_token: str) -> tuple[list[VolumeStatus], str]:
        if max_entries < 0:
            raise InvalidArgument("max_entries must not be negative")
        after = token_after(starting_token, self.store.max_volume_seq())
        page, next_after = page_after(self.store, after, max_entries)
        next_token = str(next_after) if next_after is not None else ""
        return [VolumeStatus(v, self._published_nodes(v.id)) for v in page], next_token

    def validate_capabilities(
        self,
        volume_id: str,
        capabilities: Sequence[Capability],
        parameters: Mapping[str, str],
        mutable_parameters: Mapping[str, str] | None = None,
    ) -> str | None:
        """None when every capability is supported, otherwise why not. Mutable parameters
        are judged only with MODIFY_VOLUME (without it none are confirmed)."""
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        if not capabilities:
            raise InvalidArgument("volume_capabilities is required")
        volume = self._require(volume_id)
        for capability in capabilities:
            if capability.access_type is not volume.access_type:
                return f"volume is a {volume.access_type.value} volume"
        if parameters and significant(parameters) != significant(volume.parameters):
            return "parameters differ from the ones the volume was created with"
        if mutable_parameters and self.mutable_rules is not None:
            try:
                self.mutable_rules.check(mutable_parameters)
            except InvalidArgument as refused:
                return str(refused)
            if not satisfies(volume.mutable_parameters, mutable_parameters):
                return "mutable_parameters differ from the volume's"
        return None

    # -- capacity --------------------------------------------------------------------

    def capacity(self, location: Segment | None, parameters: Mapping[str, str]) -> CapacityReport:
        kind = resolve_kind(parameters, self.kinds, self.config.effective_default_kind)
        return capacity_at(location, kind, self._frozen or self.pools)

    # -- capacity knobs (admin API) -----------------------------------------------------

    @property
    def capacity_frozen(self) -> bool:
        return self._frozen is not None

    def freeze_capacity(self) -> None:
        """Answer GetCapacity from a snapshot of the pools as they are now (stale capacity)."""
        if self._frozen is None:
            self._frozen = [copy.deepcopy(pool) for pool in self.pools]

    def unfreeze_capacity(self) -> None:
        self._frozen = None

    def resize_pool(self, name: str, size: int) -> Pool:
        pool = self.pool(name)
        before = pool.total
        try:
            pool.resize(size)
        except ValueError as error:
            raise FailedPrecondition(str(error)) from None
        try:
            with self.store.transaction():
                self.store.set_pool_total(name, size)
        except BaseException:
            pool.resize(before)  # Always possible: nothing else ran in between.
            raise
        return pool

    def consume_external(self, name: str, amount: int) -> Pool:
        """Take space outside CSI, as another user of the backend would."""
        pool = self.pool(name)
        if amount > pool.free():
            raise CapacityExhausted(
                f"pool {name} has {pool.free()} bytes free, cannot consume {amount}"
            )
        return self._set_external(pool, pool.external + amount)

    def release_external(self, name: str, amount: int) -> Pool:
        pool = self.pool(name)
        if amount > pool.external:
            raise FailedPrecondition(
                f"pool {name} has only {pool.external} externally consumed bytes to release"
            )
        return self._set_external(pool, pool.external - amount)

    def _set_external(self, pool: Pool, external: int) -> Pool:
        with self.store.transaction():
            self.store.set_pool_external(pool.name, external)
        pool.external = external
        return pool

    def pool(self, name: str) -> Pool:
        pool = self._pools.get(name)
        if pool is None:
            raise NotFound(f"no pool named {name!r}")
        return pool

    def set_attach_limit(self, limit: int) -> None:
        """ControllerPublishVolume's limit per node from now on (0: none); attachments
        already made stay, even above a lowered limit."""
        if limit < 0:
            raise InvalidArgument(f"attach_limit {limit} is negative")
        self.attach_limit = limit

    # -- attachments -----------------------------------------------------------------

    def publish(
        self, volume_id: str, node_id: str, capability: Capability | None, readonly: bool
    ) -> dict[str, str]:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        if not node_id:
            raise InvalidArgument("node_id is required")
        if capability is None:
            raise InvalidArgument("volume_capability is required")
        volume = self._require(volume_id)
        if not self._node_known(node_id):
            raise NotFound(f"node {node_id!r} is not known to this controller")
        if capability.access_type is not volume.access_type:
            raise InvalidArgument(
                f"volume_capability: volume {volume_id} is a {volume.access_type.value}"
                f" volume, not {capability.access_type.value}"
            )
        context = {PUBLISH_CONTEXT_NODE: node_id, PUBLISH_CONTEXT_DEVICE: f"/dev/mock/{volume_id}"}
        attachments = self.store.attachments_of_volume(volume_id)
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
        limit = self.attach_limit
        if limit and self.store.attachment_count_on_node(node_id) >= limit:
            raise CapacityExhausted(f"node {node_id} reached its attach limit of {limit} volumes")
        with self.store.transaction():
            self.store.add_attachment(Attachment(volume_id, node_id, readonly, capability))
        return context

    def unpublish(self, volume_id: str, node_id: str) -> None:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        with self.store.transaction():
            if node_id:
                self.store.remove_attachment(volume_id, node_id)
            else:
                for attachment in self.store.attachments_of_volume(volume_id):
                    self.store.remove_attachment(volume_id, attachment.node_id)

    # -- helpers -----------------------------------------------------------------------

    def _find(self, volume_id: str) -> Volume | None:
        if not is_driver_volume_id(volume_id):
            return None
        return self.store.volume_by_id(volume_id)

    def _require(self, volume_id: str) -> Volume:
        volume = self._find(volume_id)
        if volume is None:
            raise NotFound(f"volume {volume_id!r} does not exist")
        return volume

    def _published_nodes(self, volume_id: str) -> tuple[str, ...]:
        return tuple(a.node_id for a in self.store.attachments_of_volume(volume_id))

    def _node_known(self, node_id: str) -> bool:
        patterns = self.config.controller.known_nodes
        if patterns is None:
            if self.config.mode.node and self.config.node.id:
                return node_id == self.config.node.id
            return True
        return any(fnmatch.fnmatchcase(node_id, pattern) for pattern in patterns)


def new_volume_id() -> str:
    return "vol-" + uuid.uuid4().hex


def _single_access_type(capabilities: Sequence[Capability]) -> AccessType:
    types = {c.access_type for c in capabilities}
    if len(types) > 1:
        raise InvalidArgument("volume_capabilities mixes block and mount access types")
    return types.pop()
