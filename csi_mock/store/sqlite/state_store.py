"""The state store: volumes, pool usage, attachments, stagings and publications.

One SQLite database in WAL mode. Every operation touches only the rows it concerns
(indexed), so the cost of a call does not grow with the number of volumes, and every
change that must be atomic (a volume row and its pool's usage) commits in one
transaction: a kill -9 at any point leaves either the old or the new state.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import Capability, Volume
from csi_mock.store.interface import Attachment, PoolUsage, Publication, Staging
from csi_mock.store.sqlite.checkpoints import (
    BACKSTOP_CHECKPOINT_PAGES,
    CHECKPOINT_EVERY_COMMITS,
    Checkpointer,
)
from csi_mock.store.sqlite.rows import (
    attachment_from_row,
    dumps_mapping,
    publication_from_row,
    snapshot_from_row,
    volume_from_row,
)
from csi_mock.store.sqlite.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION, VOLUME_TABLES


class StateStore:
    """Typed access to the driver's SQLite state (a `Store`). Not thread-safe: one owner."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL survives a process crash (kill -9) without losing commits; only an
        # OS crash or power loss can drop the last transactions.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        # A checkpoint fsyncs the WAL and the database (tens of ms on a busy disk); SQLite
        # would run it inside the COMMIT that crosses the threshold, stalling the event
        # loop. The checkpointer runs it on its own connection in a thread instead, at
        # the same cadence, so the same commits are synced to disk as before.
        self._db.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
        self._depth = 0
        self._commits = 0
        self._checkpointer = Checkpointer(path)
        with self.transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO meta(key, value) VALUES('schema', ?)", (str(SCHEMA_VERSION),)
                )
            else:
                self._migrate(int(row["value"]))

    def _migrate(self, version: int) -> None:
        """Bring a database written by an older csi-mock to SCHEMA_VERSION (in the
        caller's transaction: a crash leaves the old schema, which the next start
        migrates again)."""
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path}: state schema {version} is newer than the supported {SCHEMA_VERSION}"
            )
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                self._db.execute(statement)
        if version != SCHEMA_VERSION:
            self._db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        self._checkpointer.stop()
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes atomically; nested uses join the outer transaction."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")
            self._commits += 1
            if self._commits >= CHECKPOINT_EVERY_COMMITS:
                self._commits = 0
                self._checkpointer.request()
        finally:
            self._depth = 0

    # -- volumes -----------------------------------------------------------------

    def insert_volume(self, volume: Volume) -> Volume:
        cursor = self._db.execute(
            "INSERT INTO volumes(id, name, pool, kind, size, allocation, extent_offset,"
            " access_type, segment, parameters, capabilities, created_at, mutable_parameters,"
            " content_source) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                volume.id,
                volume.name,
                volume.pool,
                volume.kind,
                volume.size,
                volume.allocation,
                volume.offset,
                volume.access_type.value,
                dumps_mapping(volume.segment),
                dumps_mapping(volume.parameters),
                json.dumps([c.to_json() for c in volume.capabilities]),
                volume.created_at,
                dumps_mapping(volume.mutable_parameters),
                dumps_mapping(volume.content_source.to_json() if volume.content_source else {}),
            ),
        )
        self._add_pool_usage(volume.pool, volume.allocation)
        seq = cursor.lastrowid
        assert seq is not None
        return _replace_seq(volume, seq)

    def delete_volume(self, volume: Volume) -> None:
        self._db.execute("DELETE FROM volumes WHERE id=?", (volume.id,))
        self._add_pool_usage(volume.pool, -volume.allocation)

    def resize_volume(self, volume: Volume, size: int, allocation: int, offset: int) -> None:
        self._db.execute(
            "UPDATE volumes SET size=?, allocation=?, extent_offset=? WHERE id=?",
            (size, allocation, offset, volume.id),
        )
        self._add_pool_usage(volume.pool, allocation - volume.allocation)

    def set_mutable_parameters(self, volume_id: str, parameters: Mapping[str, str]) -> None:
        self._db.execute(
            "UPDATE volumes SET mutable_parameters=? WHERE id=?",
            (dumps_mapping(parameters), volume_id),
        )

    def volume_by_id(self, volume_id: str) -> Volume | None:
        row = self._db.execute("SELECT * FROM volumes WHERE id=?", (volume_id,)).fetchone()
        return volume_from_row(row) if row else None

    def volume_by_name(self, name: str) -> Volume | None:
        row = self._db.execute("SELECT * FROM volumes WHERE name=?", (name,)).fetchone()
        return volume_from_row(row) if row else None

    def volumes_after(self, seq: int, limit: int | None) -> list[Volume]:
        """Volumes in creation order with seq > `seq` (keyset pagination)."""
        query = "SELECT * FROM volumes WHERE seq>? ORDER BY seq"
        args: tuple[int, ...] = (seq,)
        if limit:
            query += " LIMIT ?"
            args = (seq, limit)
        return [volume_from_row(row) for row in self._db.execute(query, args)]

    def max_volume_seq(self) -> int:
        """The highest seq ever given to a volume (AUTOINCREMENT never reuses one), so
        a ListVolumes token stays valid when the newest volumes are deleted."""
        row = self._db.execute(
            "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='volumes'), 0),"
            " COALESCE((SELECT MAX(seq) FROM volumes), 0)) AS m"
        ).fetchone()
        return int(row["m"])

    def allocations(self) -> dict[str, list[tuple[int, int]]]:
        """(offset, allocation) of every volume and (offset, charge) of every snapshot,
        by pool. Read once at start-up."""
        result: dict[str, list[tuple[int, int]]] = {}
        rows = self._db.execute(
            "SELECT pool, extent_offset, allocation FROM volumes"
            " UNION ALL SELECT pool, extent_offset, charge FROM snapshots"
        )
        for row in rows:
            result.setdefault(row["pool"], []).append((row["extent_offset"], row["allocation"]))
        return result

    def leftovers(self) -> dict[str, int]:
        counts = {
            table: self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in VOLUME_TABLES
        }
        return {table: count for table, count in counts.items() if count}

    def all_volume_ids(self) -> set[str]:
        return {row["id"] for row in self._db.execute("SELECT id FROM volumes")}

    # -- snapshots ---------------------------------------------------------------

    def insert_snapshot(self, snapshot: Snapshot) -> Snapshot:
        """Record a cut snapshot and add its charge to its pool's usage."""
        cursor = self._db.execute(
            "INSERT INTO snapshots(id, name, source_volume_id, pool, kind, size, charge,"
            " extent_offset, access_type, segment, parameters, created_at, ready_at)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                snapshot.id,
                snapshot.name,
                snapshot.source_volume_id,
                snapshot.pool,
                snapshot.kind,
                snapshot.size,
                snapshot.charge,
                snapshot.offset,
                snapshot.access_type.value,
                dumps_mapping(snapshot.segment),
                dumps_mapping(snapshot.parameters),
                snapshot.created_at,
                snapshot.ready_at,
            ),
        )
        self._add_pool_usage(snapshot.pool, snapshot.charge)
        seq = cursor.lastrowid
        assert seq is not None
        return replace(snapshot, seq=seq)

    def delete_snapshot(self, snapshot: Snapshot) -> None:
        self._db.execute("DELETE FROM snapshots WHERE id=?", (snapshot.id,))
        self._add_pool_usage(snapshot.pool, -snapshot.charge)

    def snapshot_by_id(self, snapshot_id: str) -> Snapshot | None:
        row = self._db.execute("SELECT * FROM snapshots WHERE id=?", (snapshot_id,)).fetchone()
        return snapshot_from_row(row) if row else None

    def snapshot_by_name(self, name: str) -> Snapshot | None:
        row = self._db.execute("SELECT * FROM snapshots WHERE name=?", (name,)).fetchone()
        return snapshot_from_row(row) if row else None

    def snapshots_after(
        self,
        seq: int,
        limit: int | None,
        *,
        snapshot_id: str | None = None,
        source_volume_id: str | None = None,
    ) -> list[Snapshot]:
        """Snapshots in creation order with seq > `seq` (keyset pagination), only the
        one with `snapshot_id` and only those of `source_volume_id` when given."""
        query = "SELECT * FROM snapshots WHERE seq>?"
        args: list[object] = [seq]
        if snapshot_id is not None:
            query += " AND id=?"
            args.append(snapshot_id)
        if source_volume_id is not None:
            query += " AND source_volume_id=?"
            args.append(source_volume_id)
        query += " ORDER BY seq"
        if limit:
            query += " LIMIT ?"
            args.append(limit)
        return [snapshot_from_row(row) for row in self._db.execute(query, args)]

    def max_snapshot_seq(self) -> int:
        """The highest seq ever given to a snapshot (AUTOINCREMENT never reuses one)."""
        row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name='snapshots'").fetchone()
        return int(row["seq"]) if row else 0

    def all_snapshot_ids(self) -> set[str]:
        return {row["id"] for row in self._db.execute("SELECT id FROM snapshots")}

    # -- pools -------------------------------------------------------------------

    def pool_usage(self) -> dict[str, PoolUsage]:
        return {
            row["name"]: PoolUsage(row["name"], row["total"], row["used"], row["external"])
            for row in self._db.execute("SELECT * FROM pools")
        }

    def set_pool_total(self, name: str, total: int | None) -> None:
        self._ensure_pool(name)
        self._db.execute("UPDATE pools SET total=? WHERE name=?", (total, name))

    def set_pool_external(self, name: str, external: int) -> None:
        self._ensure_pool(name)
        self._db.execute("UPDATE pools SET external=? WHERE name=?", (external, name))

    def set_pool_used(self, name: str, used: int) -> None:
        self._ensure_pool(name)
        self._db.execute("UPDATE pools SET used=? WHERE name=?", (used, name))

    def _add_pool_usage(self, name: str, delta: int) -> None:
        self._db.execute(
            "INSERT INTO pools(name, used) VALUES(?, ?)"
            " ON CONFLICT(name) DO UPDATE SET used=used+excluded.used",
            (name, delta),
        )

    def _ensure_pool(self, name: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO pools(name) VALUES(?)", (name,))

    # -- attachments (controller side) --------------------------------------------

    def add_attachment(self, attachment: Attachment) -> None:
        self._db.execute(
            "INSERT INTO attachments(volume_id, node_id, readonly, capability) VALUES(?,?,?,?)",
            (
                attachment.volume_id,
                attachment.node_id,
                int(attachment.readonly),
                json.dumps(attachment.capability.to_json()),
            ),
        )

    def remove_attachment(self, volume_id: str, node_id: str) -> bool:
        cursor = self._db.execute(
            "DELETE FROM attachments WHERE volume_id=? AND node_id=?", (volume_id, node_id)
        )
        return cursor.rowcount > 0

    def attachments_of_volume(self, volume_id: str) -> list[Attachment]:
        rows = self._db.execute(
            "SELECT * FROM attachments WHERE volume_id=? ORDER BY node_id", (volume_id,)
        )
        return [attachment_from_row(row) for row in rows]

    def attachment_count_on_node(self, node_id: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) AS n FROM attachments WHERE node_id=?", (node_id,)
        ).fetchone()
        return int(row["n"])

    # -- stagings and publications (node side) ----------------------------------------

    def staging(self, volume_id: str) -> Staging | None:
        row = self._db.execute("SELECT * FROM stagings WHERE volume_id=?", (volume_id,)).fetchone()
        if row is None:
            return None
        return Staging(
            row["volume_id"],
            row["staging_path"],
            Capability.from_json(json.loads(row["capability"])),
            row["data_path"],
            row["size"],
        )

    def add_staging(self, staging: Staging) -> None:
        self._db.execute(
            "INSERT INTO stagings(volume_id, staging_path, capability, data_path, size)"
            " VALUES(?,?,?,?,?)",
            (
                staging.volume_id,
                staging.staging_path,
                json.dumps(staging.capability.to_json()),
                staging.data_path,
                staging.size,
            ),
        )

    def set_node_volume_size(self, volume_id: str, size: int) -> None:
        """Record a node-side expansion on the volume's staging and publications."""
        self._db.execute("UPDATE stagings SET size=? WHERE volume_id=?", (size, volume_id))
        self._db.execute("UPDATE publications SET size=? WHERE volume_id=?", (size, volume_id))

    def remove_staging(self, volume_id: str) -> None:
        self._db.execute("DELETE FROM stagings WHERE volume_id=?", (volume_id,))

    def publication(self, volume_id: str, target_path: str) -> Publication | None:
        row = self._db.execute(
            "SELECT * FROM publications WHERE volume_id=? AND target_path=?",
            (volume_id, target_path),
        ).fetchone()
        return publication_from_row(row) if row else None

    def publications_of_volume(self, volume_id: str) -> list[Publication]:
        rows = self._db.execute("SELECT * FROM publications WHERE volume_id=?", (volume_id,))
        return [publication_from_row(row) for row in rows]

    def publications(self) -> list[Publication]:
        """Every publication on this node, in the order they were made."""
        rows = self._db.execute("SELECT * FROM publications ORDER BY rowid")
        return [publication_from_row(row) for row in rows]

    def add_publication(self, publication: Publication) -> None:
        self._db.execute(
            "INSERT INTO publications(volume_id, target_path, staging_path, readonly,"
            " capability, data_path, ephemeral, size) VALUES(?,?,?,?,?,?,?,?)",
            (
                publication.volume_id,
                publication.target_path,
                publication.staging_path,
                int(publication.readonly),
                json.dumps(publication.capability.to_json()),
                publication.data_path,
                int(publication.ephemeral),
                publication.size,
            ),
        )

    def remove_publication(self, volume_id: str, target_path: str) -> None:
        self._db.execute(
            "DELETE FROM publications WHERE volume_id=? AND target_path=?",
            (volume_id, target_path),
        )


def _replace_seq(volume: Volume, seq: int) -> Volume:
    return replace(volume, seq=seq)
