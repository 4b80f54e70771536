"""The state store's schema: databases written by older csi-mock versions still open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import AccessType, ContentSource, SourceType, Volume
from csi_mock.store.sqlite import SCHEMA_VERSION, StateStore

# The meta and volumes tables exactly as schema 1 (csi-mock before mutable parameters)
# wrote them; the store creates the other tables itself when they are missing.
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta(key, value) VALUES('schema', '1');
CREATE TABLE volumes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    pool TEXT NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    allocation INTEGER NOT NULL,
    extent_offset INTEGER NOT NULL,
    access_type TEXT NOT NULL,
    segment TEXT NOT NULL,
    parameters TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    created_at REAL NOT NULL
);
INSERT INTO volumes(id, name, pool, kind, size, allocation, extent_offset, access_type,
    segment, parameters, capabilities, created_at)
VALUES('vol-old', 'pvc-old', 'p', 'default', 1024, 1024, 0, 'mount', '{}',
    '{"kind": "default"}', '[]', 1.5);
"""


def old_database(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_1)
    db.close()
    return path


def schema_of(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0])
    finally:
        db.close()


def test_a_schema_1_database_opens_with_its_volumes_and_no_mutable_parameters(
    tmp_path: Path,
) -> None:
    store = StateStore(old_database(tmp_path / "state.db"))
    try:
        volume = store.volume_by_id("vol-old")
    finally:
        store.close()

    assert volume is not None
    assert (volume.name, volume.size, dict(volume.parameters)) == (
        "pvc-old",
        1024,
        {"kind": "default"},
    )
    assert volume.mutable_parameters == {}
    assert schema_of(tmp_path / "state.db") == str(SCHEMA_VERSION)


def test_a_migrated_volume_takes_mutable_parameters_and_keeps_them_across_opens(
    tmp_path: Path,
) -> None:
    path = old_database(tmp_path / "state.db")
    store = StateStore(path)
    with store.transaction():
        store.set_mutable_parameters("vol-old", {"tier": "gold"})
    store.close()

    reopened = StateStore(path)
    try:
        volume = reopened.volume_by_id("vol-old")
    finally:
        reopened.close()
    assert volume is not None and volume.mutable_parameters == {"tier": "gold"}


def test_a_new_volume_keeps_its_mutable_parameters(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    try:
        with store.transaction():
            store.insert_volume(
                Volume(
                    id="vol-1",
                    name="pvc-1",
                    pool="p",
                    kind="default",
                    size=1,
                    allocation=1,
                    offset=0,
                    access_type=AccessType.MOUNT,
                    mutable_parameters={"iops": "3000"},
                )
            )
        volume = store.volume_by_name("pvc-1")
    finally:
        store.close()
    assert volume is not None and volume.mutable_parameters == {"iops": "3000"}


def test_a_database_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = old_database(tmp_path / "state.db")
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()

    with pytest.raises(RuntimeError, match=f"state schema {SCHEMA_VERSION + 1} is newer"):
        StateStore(path)


# -- schema 3: snapshots and content sources -----------------------------------------------


def snapshot(**fields: object) -> Snapshot:
    values: dict[str, object] = {
        "id": "snap-1",
        "name": "snapshot-1",
        "source_volume_id": "vol-old",
        "pool": "p",
        "kind": "default",
        "size": 1024,
        "charge": 1024,
        "offset": 0,
        "access_type": AccessType.MOUNT,
        "created_at": 2.5,
        "ready_at": 3.5,
    }
    values.update(fields)
    return Snapshot(**values)  # type: ignore[arg-type]


def test_an_old_database_takes_snapshots_and_counts_their_charge_in_its_pool(
    tmp_path: Path,
) -> None:
    store = StateStore(old_database(tmp_path / "state.db"))
    try:
        with store.transaction():
            store.set_pool_used("p", 1024)
            stored = store.insert_snapshot(snapshot(parameters={"a": "b"}))
        assert store.snapshot_by_name("snapshot-1") == stored
        assert stored.seq == 1 and stored.parameters == {"a": "b"}
        assert store.pool_usage()["p"].used == 2048
        assert store.allocations() == {"p": [(0, 1024), (0, 1024)]}
    finally:
        store.close()


def test_a_migrated_volume_has_no_content_source_and_a_new_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    store = StateStore(old_database(tmp_path / "state.db"))
    try:
        restored = Volume(
            id="vol-2",
            name="pvc-2",
            pool="p",
            kind="default",
            size=1024,
            allocation=1024,
            offset=0,
            access_type=AccessType.MOUNT,
            content_source=ContentSource(SourceType.SNAPSHOT, "snap-1"),
        )
        with store.transaction():
            store.insert_volume(restored)
        old, new = store.volume_by_id("vol-old"), store.volume_by_id("vol-2")
    finally:
        store.close()
    assert old is not None and old.content_source is None
    assert new is not None and new.content_source == ContentSource(SourceType.SNAPSHOT, "snap-1")


def test_snapshots_page_in_creation_order_and_filter_by_id_and_source(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    try:
        with store.transaction():
            for n, source in enumerate(["vol-a", "vol-b", "vol-a"], 1):
                store.insert_snapshot(
                    snapshot(id=f"snap-{n}", name=f"s{n}", source_volume_id=source)
                )
            store.delete_snapshot(snapshot(id="snap-3", source_volume_id="vol-a"))
        assert [s.id for s in store.snapshots_after(0, None)] == ["snap-1", "snap-2"]
        assert [s.id for s in store.snapshots_after(1, 1)] == ["snap-2"]
        assert [s.id for s in store.snapshots_after(0, None, source_volume_id="vol-a")] == [
            "snap-1"
        ]
        assert [s.id for s in store.snapshots_after(0, None, snapshot_id="snap-2")] == ["snap-2"]
        # The deleted last snapshot's seq stays a valid page token.
        assert store.max_snapshot_seq() == 3
    finally:
        store.close()
