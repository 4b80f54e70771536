"""What the state store holds about volumes and snapshots, read for the admin API and
ListVolumes."""

from __future__ import annotations

from dataclasses import dataclass

from csi_mock.host.paths import is_driver_volume_id
from csi_mock.model.errors import Aborted, NotFound
from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import Volume
from csi_mock.store.interface import Attachment, Store


@dataclass(frozen=True)
class VolumeUse:
    """A volume with its attachments and this process's node-side use of it."""

    volume: Volume
    attachments: tuple[Attachment, ...]
    staging_path: str | None
    target_paths: tuple[str, ...]


def find_volume(store: Store, volume_id: str) -> Volume | None:
    """The stored volume `volume_id` names; None also for an id this driver never gives."""
    if not is_driver_volume_id(volume_id):
        return None
    return store.volume_by_id(volume_id)


def require_volume(store: Store, volume_id: str) -> Volume:
    """The stored volume `volume_id` names, or NotFound."""
    volume = find_volume(store, volume_id)
    if volume is None:
        raise NotFound(f"volume {volume_id!r} does not exist")
    return volume


TOKEN_MAX_DIGITS = 19
"""A token is a creation sequence number, an SQLite int64: never more digits than this.
Checked before int(), which refuses over 4,300 digits with a ValueError."""


def token_after(starting_token: str, highest_seq: int) -> int:
    """The `after` key of a ListVolumes or ListSnapshots `starting_token`: the creation
    sequence number of the last entry of the page before (0 for no token).

    Valid is any number up to `highest_seq`, the highest sequence number ever handed
    out (AUTOINCREMENT never reuses one): a token stays valid when the entries it
    names, or newer ones, are deleted. Anything else is a token this driver never
    gave, ABORTED as CSI asks for an invalid starting_token.
    """
    if not starting_token:
        return 0
    valid = (
        len(starting_token) <= TOKEN_MAX_DIGITS
        and starting_token.isascii()
        and starting_token.isdigit()
    )
    if not valid or int(starting_token) > highest_seq:
        shown = starting_token if len(starting_token) <= 40 else f"{starting_token[:40]}..."
        raise Aborted(
            f"starting_token {shown!r} is not valid: not a next_token this driver handed out"
        )
    return int(starting_token)


def page_after(store: Store, after: int, limit: int | None) -> tuple[list[Volume], int | None]:
    """At most `limit` volumes with seq > `after` in creation order (keyset pagination),
    and the `after` of the next page (None on the last page)."""
    page = store.volumes_after(after, limit + 1 if limit else None)
    if limit and len(page) > limit:
        page = page[:limit]
        return page, page[-1].seq
    return page, None


class Inventory:
    """Read-only views of the store's volumes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def has_volume(self, volume_id: str) -> bool:
        return find_volume(self._store, volume_id) is not None

    def volume_uses(self, after: int, limit: int) -> tuple[list[VolumeUse], int | None]:
        volumes, next_after = page_after(self._store, after, limit)
        return [self._use(volume) for volume in volumes], next_after

    def snapshots(self, after: int, limit: int) -> tuple[list[Snapshot], int | None]:
        """At most `limit` snapshots with seq > `after` in creation order, and the
        `after` of the next page (None on the last page)."""
        page = self._store.snapshots_after(after, limit + 1)
        if len(page) > limit:
            page = page[:limit]
            return page, page[-1].seq
        return page, None

    def _use(self, volume: Volume) -> VolumeUse:
        staging = self._store.staging(volume.id)
        return VolumeUse(
            volume=volume,
            attachments=tuple(self._store.attachments_of_volume(volume.id)),
            staging_path=staging.staging_path if staging is not None else None,
            target_paths=tuple(
                sorted(p.target_path for p in self._store.publications_of_volume(volume.id))
            ),
        )
