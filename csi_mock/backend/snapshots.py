"""Snapshots: CreateSnapshot, DeleteSnapshot, ListSnapshots, GetSnapshot, and the
snapshots a restore reads.

A snapshot is a real copy of its source volume's data in a directory of its own
(`<state_dir>/snapshots/<id>`), charged to the source volume's pool as the configured
accounting says. Crash ordering is create_volume's: the copy is made before the row
and the charge commit, in one transaction, and removed after the row is gone; load()
removes copies without a row. A kill -9 at any point leaves no snapshot or a
complete one.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from csi_mock.backend.in_flight import (
    Claim,
    InFlight,
    run_to_completion,
    snapshot_key,
    snapshot_name_key,
    volume_key,
)
from csi_mock.backend.inventory import token_after
from csi_mock.backend.names import check_name
from csi_mock.config import SnapshotConfig
from csi_mock.host.backing import BackingStore, usage_of
from csi_mock.host.copying import copy_data
from csi_mock.host.paths import is_driver_snapshot_id, is_driver_volume_id
from csi_mock.model.errors import (
    AlreadyExistsIncompatible,
    CapacityExhausted,
    InvalidArgument,
    NotFound,
    Unimplemented,
)
from csi_mock.model.kind import VolumeKind
from csi_mock.model.pool import Pool
from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import Volume
from csi_mock.store.interface import Store

log = logging.getLogger("csi_mock")

SNAPSHOT_ID_PREFIX = "snap-"


class Snapshots:
    """The controller's snapshots: their rows, data and pool charges."""

    def __init__(
        self,
        config: SnapshotConfig | None,
        store: Store,
        pools: Mapping[str, Pool],
        kinds: Mapping[str, VolumeKind],
        volumes: BackingStore,
        data: BackingStore | None,
        in_flight: InFlight,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        """None: snapshots are off (the RPCs are UNIMPLEMENTED)."""
        self._store = store
        self._pools = pools
        self._kinds = kinds
        self._volumes = volumes
        self.data = data
        """Where snapshot data lives; None when snapshots are off."""
        self._in_flight = in_flight
        self._clock = clock

    def load(self) -> None:
        """Remove copies without a row (a CreateSnapshot cut short or a DeleteSnapshot
        that committed but did not finish removing). Pool charges are rebuilt with the
        volumes' allocations (Store.allocations)."""
        if self.data is None:
            return
        known = self._store.all_snapshot_ids()
        self.data.reconcile(known, is_driver_snapshot_id)
        for snapshot_id in sorted(known - self.data.ids()):
            log.warning(
                "snapshot %s has no data in %s: restores from it fail", snapshot_id, self.data.root
            )

    # -- RPCs ----------------------------------------------------------------------------

    async def create(
        self,
        name: str,
        source_volume_id: str,
        parameters: Mapping[str, str],
        *,
        accessibility_given: bool = False,
    ) -> Snapshot:
        """Cut a snapshot of `source_volume_id` (CreateSnapshot), or return the one of
        that name when it has the same source. `accessibility_given`: the request has
        CSI v1.13's accessibility_requirements, which the CO SHALL NOT give without the
        plugin capability SNAPSHOT_ACCESSIBILITY_CONSTRAINTS; csi-mock does not
        advertise it (a snapshot lives in its source volume's pool)."""
        config, data = self._require_enabled()
        if not name:
            raise InvalidArgument("name is required")
        check_name(name)
        if not source_volume_id:
            raise InvalidArgument("source_volume_id is required")
        if accessibility_given:
            raise InvalidArgument(
                "accessibility_requirements is given but the plugin does not advertise "
                "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS"
            )
        existing = self._store.snapshot_by_name(name)
        if existing is not None:
            if existing.source_volume_id != source_volume_id:
                raise AlreadyExistsIncompatible(
                    f"snapshot {name!r} already exists with source volume"
                    f" {existing.source_volume_id}, not {source_volume_id}"
                )
            return existing
        volume = (
            self._store.volume_by_id(source_volume_id)
            if is_driver_volume_id(source_volume_id)
            else None
        )
        if volume is None:
            raise NotFound(f"source volume {source_volume_id!r} does not exist")
        # Taken before the first await: a second call with this name, or a DeleteVolume
        # of the source, is refused until the copy is committed or cleaned up.
        claim = self._in_flight.hold(
            f"CreateSnapshot {name!r}",
            exclusive=[snapshot_name_key(name)],
            shared=[volume_key(volume.id)],
        )
        now = self._clock()
        snapshot = Snapshot(
            id=SNAPSHOT_ID_PREFIX + uuid.uuid4().hex,
            name=name,
            source_volume_id=volume.id,
            pool=volume.pool,
            kind=volume.kind,
            size=volume.size,
            charge=0,
            offset=0,
            access_type=volume.access_type,
            segment=dict(volume.segment),
            parameters=dict(parameters),
            created_at=now,
            ready_at=now + config.ready_after,
        )
        return await run_to_completion(self._cut(snapshot, volume, data, claim))

    async def _cut(
        self, snapshot: Snapshot, volume: Volume, data: BackingStore, claim: Claim
    ) -> Snapshot:
        with claim:  # Until the copy is committed or cleaned up, whoever waits for it.
            return await self._copy_and_commit(snapshot, volume, data)

    async def _copy_and_commit(
        self, snapshot: Snapshot, volume: Volume, data: BackingStore
    ) -> Snapshot:
        assert self.config is not None
        accounting = self.config.accounting
        used = 0
        if accounting.needs_usage:
            usage = await asyncio.to_thread(usage_of, self._volumes.path(volume.id))
            used = usage.used_bytes
        charge = accounting.charge(volume.allocation, used, self._kinds[volume.kind])
        pool = self._pools[volume.pool]
        offset = pool.reserve(charge)
        if offset is None:
            raise CapacityExhausted(
                f"pool {pool.name} has no room for a snapshot of {volume.id}: it takes"
                f" {charge} bytes ({accounting.value} accounting), the pool can take"
                f" {pool.largest_free_extent()}"
            )
        snapshot = replace(snapshot, charge=charge, offset=offset)
        try:
            # The copy first, as pending: a crash now leaves a copy that load() discards.
            await asyncio.to_thread(
                copy_data,
                self._volumes.path(volume.id),
                data.pending_path(snapshot.id),
                volume.access_type,
            )
            with self._store.transaction():
                snapshot = self._store.insert_snapshot(snapshot)
        except BaseException:
            pool.release(offset, charge)
            # On the loop: a failed copy is rare, and must go now.
            data.discard(data.pending_path(snapshot.id))
            raise
        data.promote(snapshot.id)
        return snapshot

    async def delete(self, snapshot_id: str) -> None:
        """Forget the snapshot and give its charge back, then remove its data off the
        event loop (DeleteSnapshot; an unknown ID is already deleted)."""
        _, data = self._require_enabled()
        if not snapshot_id:
            raise InvalidArgument("snapshot_id is required")
        if not is_driver_snapshot_id(snapshot_id):
            return
        self._in_flight.check(snapshot_key(snapshot_id))
        snapshot = self._store.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return
        retired = data.retire(snapshot.id)  # A crash before the commit: load() restores it.
        try:
            with self._store.transaction():
                self._store.delete_snapshot(snapshot)
        except BaseException:
            if retired is not None:
                data.unretire(snapshot.id)
            raise
        self._pools[snapshot.pool].release(snapshot.offset, snapshot.charge)
        if retired is not None:
            await asyncio.to_thread(data.discard, retired)

    def get(self, snapshot_id: str) -> Snapshot:
        self._require_enabled()
        if not snapshot_id:
            raise InvalidArgument("snapshot_id is required")
        snapshot = self.find(snapshot_id)
        if snapshot is None:
            raise NotFound(f"snapshot {snapshot_id!r} does not exist")
        return snapshot

    def list(
        self, max_entries: int, starting_token: str, snapshot_id: str, source_volume_id: str
    ) -> tuple[list[Snapshot], str]:
        """A page of snapshots in creation order (ListSnapshots), and the next token.

        Filters that match nothing (an unknown snapshot or volume) give an empty list.
        """
        self._require_enabled()
        if max_entries < 0:
            raise InvalidArgument("max_entries must not be negative")
        after = token_after(starting_token, self._store.max_snapshot_seq())
        if snapshot_id and not is_driver_snapshot_id(snapshot_id):
            return [], ""
        page = self._store.snapshots_after(
            after,
            max_entries + 1 if max_entries else None,
            snapshot_id=snapshot_id or None,
            source_volume_id=source_volume_id or None,
        )
        if max_entries and len(page) > max_entries:
            page = page[:max_entries]
            return page, str(page[-1].seq)
        return page, ""

    # -- for restores -----------------------------------------------------------------

    def find(self, snapshot_id: str) -> Snapshot | None:
        if not is_driver_snapshot_id(snapshot_id):
            return None
        return self._store.snapshot_by_id(snapshot_id)

    def ready_to_use(self, snapshot: Snapshot) -> bool:
        return snapshot.ready_to_use(self._clock())

    def _require_enabled(self) -> tuple[SnapshotConfig, BackingStore]:
        if self.config is None or self.data is None:
            raise Unimplemented("snapshots are not supported (controller.snapshots is not set)")
        return self.config, self.data
