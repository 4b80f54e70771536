"""Controller operations: the volumes, and the one entry point to the pools' accounting
(pool_accounting.py), attachments (attachments.py) and snapshots (snapshots.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from csi_mock.backend.attachments import PUBLISH_CONTEXT_DEVICE, PUBLISH_CONTEXT_NODE, Attachments
from csi_mock.backend.content_sources import ContentSources
from csi_mock.backend.create_request import CreateRequest, ValidCreate, validate_create
from csi_mock.backend.in_flight import (
    InFlight,
    run_to_completion,
    volume_key,
    volume_name_key,
)
from csi_mock.backend.inventory import find_volume, page_after, require_volume, token_after
from csi_mock.backend.names import NAME_MAX_BYTES, check_name
from csi_mock.backend.parameters import resolve_kind, significant
from csi_mock.backend.pool_accounting import Capacity
from csi_mock.backend.snapshots import Snapshots
from csi_mock.config import DriverConfig
from csi_mock.host.backing import BackingStore
from csi_mock.host.paths import is_driver_volume_id
from csi_mock.model.capacity_report import CapacityReport
from csi_mock.model.errors import (
    CapacityExhausted,
    FailedPrecondition,
    InvalidArgument,
    OutOfRange,
    Unimplemented,
)
from csi_mock.model.kind import VolumeKind
from csi_mock.model.mutable_parameters import MutableParameterRules, modified_parameters, satisfies
from csi_mock.model.placement import (
    PlacementRequest,
    place_volume,
    range_for_source,
    validate_range,
)
from csi_mock.model.pool import Pool
from csi_mock.model.topology import Segment
from csi_mock.model.volume import Capability, Volume
from csi_mock.store.interface import Store

log = logging.getLogger(__name__)
__all__ = [
    "NAME_MAX_BYTES",
    "PUBLISH_CONTEXT_DEVICE",
    "PUBLISH_CONTEXT_NODE",
    "Controller",
    "CreateRequest",
    "VolumeStatus",
    "check_name",
]
VOLUME_CONTEXT_SIZE = "csi-mock/size"
VOLUME_CONTEXT_POOL = "csi-mock/pool"
VOLUME_CONTEXT_KIND = "csi-mock/kind"
VOLUME_CONTEXT_ACCESS_TYPE = "csi-mock/access-type"


@dataclass(frozen=True)
class VolumeStatus:
    volume: Volume
    published_nodes: tuple[str, ...]


class Controller:
    """The controller service's operations: volumes here, the pools' accounting in
    `accounting`, attachments in `attachments`, snapshots in `snapshots`; every change
    is persisted before it returns."""

    def __init__(self, config: DriverConfig, store: Store, backing: BackingStore) -> None:
        self.config = config
        self.store = store
        self.backing = backing
        self.kinds = {name: VolumeKind(name, kind.cost) for name, kind in config.kinds.items()}
        self.accounting = Capacity(config, store)
        self.pools = self.accounting.pools
        self._pools = self.accounting.by_name
        self.attachments = Attachments(config, store)
        modify = config.controller.modify  # None: no MODIFY_VOLUME
        self.mutable_rules: MutableParameterRules | None = modify.rules() if modify else None
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
        self.sources = ContentSources(store, backing, self.snapshots, config.controller.clones)

    # -- start-up --------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild accounting from the store and make the backing files agree with it.

        After a crash the store is the truth for what the driver wrote itself: a
        create or delete cut short is finished in the direction the store says
        (BackingStore.reconcile). A live backing entry without a row is moved to
        lost+found, never removed; a row without data gets an empty entry, logged.
        """
        self.accounting.load()
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
        valid = self._validated(request)
        existing = self.store.volume_by_name(request.name)
        if existing is not None:
            valid.check_compatible(existing)
            return existing
        self.in_flight.check(volume_name_key(request.name))

        placement = place_volume(
            PlacementRequest(
                kind=valid.kind,
                required_bytes=request.required_bytes,
                limit_bytes=request.limit_bytes,
                requisite=request.requisite,
                preferred=request.preferred,
                default_size=self.config.controller.default_volume_size,
            ),
            self.pools,
        )
        volume = valid.new_volume(placement)
        try:
            # Backing first, as pending: a crash now leaves an entry that load() discards.
            self.backing.create(volume.id, volume.access_type, volume.size, pending=True)
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
        valid = self._validated(request)
        existing = self.store.volume_by_name(request.name)
        if existing is not None:
            valid.check_compatible(existing)
            return existing
        data = self.sources.data_of(source)
        access_type = valid.access_type
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
                    kind=valid.kind,
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
        volume = valid.new_volume(placement)
        return await run_to_completion(self.sources.populate(volume, placement, data, claim))

    def _validated(self, request: CreateRequest) -> ValidCreate:
        return validate_create(
            request, self.kinds, self.config.effective_default_kind, self.mutable_rules
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
        volume = find_volume(self.store, volume_id)
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
        volume = require_volume(self.store, volume_id)
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
            volume = require_volume(self.store, volume_id)
            merged = modified_parameters(volume.mutable_parameters, mutable_parameters, rules)
            if merged != volume.mutable_parameters:
                self.store.set_mutable_parameters(volume.id, merged)
        return replace(volume, mutable_parameters=merged)

    def get_volume(self, volume_id: str) -> VolumeStatus:
        if not volume_id:
            raise InvalidArgument("volume_id is required")
        volume = require_volume(self.store, volume_id)
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
        volume = require_volume(self.store, volume_id)
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

    # -- capacity (GetCapacity, and the admin API's knobs) -----------------------------

    def capacity(self, location: Segment | None, parameters: Mapping[str, str]) -> CapacityReport:
        kind = resolve_kind(parameters, self.kinds, self.config.effective_default_kind)
        return self.accounting.report(location, kind)

    @property
    def capacity_frozen(self) -> bool:
        return self.accounting.frozen

    def freeze_capacity(self) -> None:
        self.accounting.freeze()

    def unfreeze_capacity(self) -> None:
        self.accounting.unfreeze()

    def pool(self, name: str) -> Pool:
        return self.accounting.pool(name)

    def resize_pool(self, name: str, size: int) -> Pool:
        return self.accounting.resize_pool(name, size)

    def consume_external(self, name: str, amount: int) -> Pool:
        return self.accounting.consume_external(name, amount)

    def release_external(self, name: str, amount: int) -> Pool:
        return self.accounting.release_external(name, amount)

    # -- attachments -----------------------------------------------------------------

    def publish(
        self, volume_id: str, node_id: str, capability: Capability | None, readonly: bool
    ) -> dict[str, str]:
        return self.attachments.publish(volume_id, node_id, capability, readonly)

    def unpublish(self, volume_id: str, node_id: str) -> None:
        self.attachments.unpublish(volume_id, node_id)

    @property
    def attach_limit(self) -> int:
        return self.attachments.limit

    def set_attach_limit(self, limit: int) -> None:
        self.attachments.set_limit(limit)

    def reset(self) -> None:
        """Pools, capacity and the attach limit as configured (``Driver.reset``)."""
        self.accounting.reset()
        self.attachments.set_limit(self.config.controller.attach_limit)

    # -- helpers -----------------------------------------------------------------------

    def _published_nodes(self, volume_id: str) -> tuple[str, ...]:
        return self.attachments.nodes_of(volume_id)
