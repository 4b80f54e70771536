"""The state database's tables, and the migrations that bring a database written by an
older csi-mock to the current schema (``StateStore`` applies them at open)."""

from __future__ import annotations

SCHEMA_VERSION = 3

MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 1 -> 2: a volume's mutable parameters (ControllerModifyVolume).
    1: ("ALTER TABLE volumes ADD COLUMN mutable_parameters TEXT NOT NULL DEFAULT '{}'",),
    # 2 -> 3: the snapshot or volume a volume was created from (the snapshots table
    # itself is created by SCHEMA, which runs first).
    2: ("ALTER TABLE volumes ADD COLUMN content_source TEXT NOT NULL DEFAULT '{}'",),
}
"""Statements that bring a database of schema N to N + 1, applied in order at open."""

VOLUME_TABLES = ("volumes", "snapshots", "attachments", "stagings", "publications")
"""The tables whose rows stand for volumes and their uses (``leftovers``)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS volumes (
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
    created_at REAL NOT NULL,
    mutable_parameters TEXT NOT NULL DEFAULT '{}',
    content_source TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS volumes_by_pool ON volumes(pool);
CREATE TABLE IF NOT EXISTS snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    source_volume_id TEXT NOT NULL,
    pool TEXT NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    charge INTEGER NOT NULL,
    extent_offset INTEGER NOT NULL,
    access_type TEXT NOT NULL,
    segment TEXT NOT NULL,
    parameters TEXT NOT NULL,
    created_at REAL NOT NULL,
    ready_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS snapshots_by_source ON snapshots(source_volume_id);
CREATE TABLE IF NOT EXISTS pools (
    name TEXT PRIMARY KEY,
    total INTEGER,
    used INTEGER NOT NULL DEFAULT 0,
    external INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS attachments (
    volume_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    readonly INTEGER NOT NULL,
    capability TEXT NOT NULL,
    PRIMARY KEY (volume_id, node_id)
);
CREATE INDEX IF NOT EXISTS attachments_by_node ON attachments(node_id);
CREATE TABLE IF NOT EXISTS stagings (
    volume_id TEXT PRIMARY KEY,
    staging_path TEXT NOT NULL,
    capability TEXT NOT NULL,
    data_path TEXT NOT NULL,
    size INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS publications (
    volume_id TEXT NOT NULL,
    target_path TEXT NOT NULL,
    staging_path TEXT NOT NULL,
    readonly INTEGER NOT NULL,
    capability TEXT NOT NULL,
    data_path TEXT NOT NULL,
    ephemeral INTEGER NOT NULL DEFAULT 0,
    size INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (volume_id, target_path)
);
"""
