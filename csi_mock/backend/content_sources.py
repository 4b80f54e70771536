"""A new volume's data from a content source: a snapshot to restore or a volume to
clone, and the copy that fills the new volume before it is committed."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from csi_mock.backend.in_flight import Claim, snapshot_key, volume_key
from csi_mock.backend.inventory import find_volume
from csi_mock.backend.snapshots import Snapshots
from csi_mock.host.backing import BackingStore
from csi_mock.host.copying import copy_data
from csi_mock.model.errors import Aborted, InvalidArgument, NotFound
from csi_mock.model.placement import Placement
from csi_mock.model.topology import Segment
from csi_mock.model.volume import AccessType, ContentSource, SourceType, Volume
from csi_mock.store.interface import Store


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


class ContentSources:
    """The snapshots and volumes a CreateVolume can copy data from."""

    def __init__(
        self, store: Store, backing: BackingStore, snapshots: Snapshots, clones: bool
    ) -> None:
        self._store = store
        self._backing = backing
        self._snapshots = snapshots
        self._clones = clones
        """Whether volumes may be cloned (controller.clones)."""

    def data_of(self, source: ContentSource) -> SourceData:
        """Where the data of `source` is, or why it cannot be used (NotFound, or Aborted
        for a snapshot that is not ready yet)."""
        if source.type is SourceType.SNAPSHOT:
            snapshots = self._snapshots
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
        if not self._clones:
            raise InvalidArgument("volume_content_source: cloning volumes is not supported")
        volume = find_volume(self._store, source.id)
        if volume is None:
            raise NotFound(f"volume_content_source: volume {source.id!r} does not exist")
        return SourceData(
            source,
            self._backing.path(volume.id),
            volume.size,
            volume.segment,
            volume.access_type,
            volume_key(volume.id),
        )

    async def populate(
        self, volume: Volume, placement: Placement, data: SourceData, claim: Claim
    ) -> Volume:
        """Copy the source's data into `volume` (in a worker thread), then commit it;
        on any failure the placement is given back and the copy discarded."""
        with claim:
            try:
                # The copy first, as pending: a crash now leaves an entry load() discards.
                await asyncio.to_thread(
                    copy_data,
                    data.path,
                    self._backing.pending_path(volume.id),
                    volume.access_type,
                    volume.size,
                )
                with self._store.transaction():
                    volume = self._store.insert_volume(volume)
            except BaseException:
                placement.pool.release(placement.offset, placement.allocation)
                # On the loop: a failed copy must go now.
                self._backing.discard(self._backing.pending_path(volume.id))
                raise
            self._backing.promote(volume.id)
        return volume
