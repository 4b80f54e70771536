"""What the backend needs of the state store: its records and the Store protocol.

The backend depends on this interface only; `csi_mock.store.sqlite.StateStore` is the
implementation the driver runs with, and a test can hand in another (one that fails a
chosen write, say) without touching the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import Capability, Volume


@dataclass(frozen=True)
class Attachment:
    volume_id: str
    node_id: str
    readonly: bool
    capability: Capability


@dataclass(frozen=True)
class Staging:
    volume_id: str
    staging_path: str
    capability: Capability
    data_path: str
    size: int = 0


@dataclass(frozen=True)
class Publication:
    volume_id: str
    target_path: str
    staging_path: str
    readonly: bool
    capability: Capability
    data_path: str
    ephemeral: bool = False
    size: int = 0


@dataclass(frozen=True)
class PoolUsage:
    name: str
    total: int | None
    used: int
    external: int


class Store(Protocol):
    """The driver's durable state. Writes happen inside `transaction()`, which commits
    them together or not at all; a volume or snapshot write also moves its pool's
    stored usage by its allocation, in the same transaction."""

    def transaction(self) -> AbstractContextManager[None]:
        """Group writes atomically; nested uses join the outer transaction."""
        ...

    def leftovers(self) -> dict[str, int]:
        """What ties the driver to volumes: the rows of each kind it holds (volumes,
        snapshots, attachments, stagings, publications), kinds without rows left out."""
        ...

    # -- volumes
    def insert_volume(self, volume: Volume) -> Volume:
        """Store a new volume; returns it with its creation sequence number."""
        ...

    def delete_volume(self, volume: Volume) -> None: ...
    def resize_volume(self, volume: Volume, size: int, allocation: int, offset: int) -> None: ...
    def set_mutable_parameters(self, volume_id: str, parameters: Mapping[str, str]) -> None: ...
    def volume_by_id(self, volume_id: str) -> Volume | None: ...
    def volume_by_name(self, name: str) -> Volume | None: ...
    def volumes_after(self, seq: int, limit: int | None) -> list[Volume]:
        """Volumes in creation order with seq > `seq` (keyset pagination)."""
        ...

    def max_volume_seq(self) -> int:
        """The highest seq ever given to a volume, deleted ones included."""
        ...

    def allocations(self) -> dict[str, list[tuple[int, int]]]:
        """(offset, allocation) of every volume and (offset, charge) of every snapshot,
        by pool."""
        ...

    def all_volume_ids(self) -> set[str]: ...

    # -- snapshots
    def insert_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """Store a cut snapshot; returns it with its creation sequence number."""
        ...

    def delete_snapshot(self, snapshot: Snapshot) -> None: ...
    def snapshot_by_id(self, snapshot_id: str) -> Snapshot | None: ...
    def snapshot_by_name(self, name: str) -> Snapshot | None: ...
    def snapshots_after(
        self,
        seq: int,
        limit: int | None,
        *,
        snapshot_id: str | None = None,
        source_volume_id: str | None = None,
    ) -> list[Snapshot]:
        """Snapshots in creation order with seq > `seq`, only the one with
        `snapshot_id` and only those of `source_volume_id` when given."""
        ...

    def max_snapshot_seq(self) -> int:
        """The highest seq ever given to a snapshot, deleted ones included."""
        ...

    def all_snapshot_ids(self) -> set[str]: ...

    # -- pools
    def pool_usage(self) -> dict[str, PoolUsage]: ...
    def set_pool_total(self, name: str, total: int | None) -> None: ...
    def set_pool_external(self, name: str, external: int) -> None: ...
    def set_pool_used(self, name: str, used: int) -> None: ...

    # -- attachments (controller side)
    def add_attachment(self, attachment: Attachment) -> None: ...
    def remove_attachment(self, volume_id: str, node_id: str) -> bool:
        """Whether there was such an attachment."""
        ...

    def attachments_of_volume(self, volume_id: str) -> list[Attachment]: ...
    def attachment_count_on_node(self, node_id: str) -> int: ...

    # -- stagings and publications (node side)
    def staging(self, volume_id: str) -> Staging | None: ...
    def add_staging(self, staging: Staging) -> None: ...
    def set_node_volume_size(self, volume_id: str, size: int) -> None:
        """Record a node-side expansion on the volume's staging and publications."""
        ...

    def remove_staging(self, volume_id: str) -> None: ...
    def publication(self, volume_id: str, target_path: str) -> Publication | None: ...
    def publications_of_volume(self, volume_id: str) -> list[Publication]: ...
    def publications(self) -> list[Publication]:
        """Every publication on this node, in the order they were made."""
        ...

    def add_publication(self, publication: Publication) -> None: ...
    def remove_publication(self, volume_id: str, target_path: str) -> None: ...
