"""Rows of the state database to model values and back: mappings and lists are
stored as JSON text."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from csi_mock.model.snapshot import Snapshot
from csi_mock.model.volume import AccessType, Capability, ContentSource, Volume
from csi_mock.store.interface import Attachment, Publication


def dumps_mapping(mapping: Mapping[str, str]) -> str:
    return json.dumps(dict(mapping), sort_keys=True)


def volume_from_row(row: sqlite3.Row) -> Volume:
    return Volume(
        id=row["id"],
        name=row["name"],
        pool=row["pool"],
        kind=row["kind"],
        size=row["size"],
        allocation=row["allocation"],
        offset=row["extent_offset"],
        access_type=AccessType(row["access_type"]),
        segment=json.loads(row["segment"]),
        parameters=json.loads(row["parameters"]),
        capabilities=tuple(Capability.from_json(c) for c in json.loads(row["capabilities"])),
        created_at=row["created_at"],
        seq=row["seq"],
        mutable_parameters=json.loads(row["mutable_parameters"]),
        content_source=ContentSource.from_json(json.loads(row["content_source"])),
    )


def snapshot_from_row(row: sqlite3.Row) -> Snapshot:
    return Snapshot(
        id=row["id"],
        name=row["name"],
        source_volume_id=row["source_volume_id"],
        pool=row["pool"],
        kind=row["kind"],
        size=row["size"],
        charge=row["charge"],
        offset=row["extent_offset"],
        access_type=AccessType(row["access_type"]),
        segment=json.loads(row["segment"]),
        parameters=json.loads(row["parameters"]),
        created_at=row["created_at"],
        ready_at=row["ready_at"],
        seq=row["seq"],
    )


def attachment_from_row(row: sqlite3.Row) -> Attachment:
    return Attachment(
        volume_id=row["volume_id"],
        node_id=row["node_id"],
        readonly=bool(row["readonly"]),
        capability=Capability.from_json(json.loads(row["capability"])),
    )


def publication_from_row(row: sqlite3.Row) -> Publication:
    return Publication(
        volume_id=row["volume_id"],
        target_path=row["target_path"],
        staging_path=row["staging_path"],
        readonly=bool(row["readonly"]),
        capability=Capability.from_json(json.loads(row["capability"])),
        data_path=row["data_path"],
        ephemeral=bool(row["ephemeral"]),
        size=row["size"],
    )
