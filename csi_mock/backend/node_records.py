"""What a node recorded of a volume (its staging and its publications), found by the
path a CO names, and the volume's size."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from csi_mock.backend.controller import VOLUME_CONTEXT_SIZE
from csi_mock.model.errors import InvalidArgument, NotFound
from csi_mock.model.volume import AccessType
from csi_mock.store.interface import Publication, Staging, Store


def record_at(store: Store, volume_id: str, path: str) -> Staging | Publication:
    """The staging or publication of ``volume_id`` at ``path``; NotFound naming what
    this node has of the volume otherwise."""
    publication = store.publication(volume_id, path)
    if publication is not None:
        return publication
    staging = store.staging(volume_id)
    if staging is not None and staging.staging_path == path:
        return staging
    # The kubelet asks for a block volume's stats at its own bind mount of our
    # published node (<global map path>/<pod UID>): the same device, another path.
    for other in store.publications_of_volume(volume_id):
        if other.capability.access_type is AccessType.BLOCK and same_file(path, other.target_path):
            return other
    if store.publications_of_volume(volume_id) or staging is not None:
        raise NotFound(f"volume {volume_id} is not published or staged at {path}")
    raise NotFound(f"volume {volume_id!r} is not staged or published on this node")


def volume_size(
    store: Store, volume_id: str, volume_context: Mapping[str, str], data_path: Path
) -> int:
    """The volume's capacity: from the controller's volume_context, the controller's
    own record (combined mode) or the backing file; 0 when nothing tells."""
    given = context_size(volume_context)
    if given is not None:
        return given
    volume = store.volume_by_id(volume_id)
    if volume is not None:
        return volume.size
    return data_path.stat().st_size if data_path.is_file() else 0


def size_of(record: Staging | Publication, default_size: int) -> int:
    """The size of the volume ``record`` holds (``default_size`` when nothing tells)."""
    path = Path(record.data_path)
    if path.is_file():
        return path.stat().st_size  # A block volume's size is its backing file's.
    if record.size:
        return record.size
    return default_size


def data_name(publication: Publication) -> str:
    """The name of an ephemeral publication's data in Node.ephemeral."""
    return Path(publication.data_path).name


def context_size(volume_context: Mapping[str, str]) -> int | None:
    """The volume size the controller recorded in the volume context, if well formed."""
    given = volume_context.get(VOLUME_CONTEXT_SIZE, "")
    return int(given) if given.isascii() and given.isdigit() else None


def lookup_path(path: str) -> str:
    """A path used only to find a record: anything we did not record is NOT_FOUND."""
    if not path:
        raise InvalidArgument("volume_path is required")
    if "\x00" in path:
        raise InvalidArgument("volume_path contains a NUL byte")
    return os.path.normpath(path) if os.path.isabs(path) else path


def recorded_path(record: Staging | Publication) -> str:
    return record.target_path if isinstance(record, Publication) else record.staging_path


def same_file(a: str, b: str) -> bool:
    """Whether two paths show the same device node, or the same file."""
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    if stat.S_ISBLK(first.st_mode) or stat.S_ISBLK(second.st_mode):
        return (
            stat.S_ISBLK(first.st_mode)
            and stat.S_ISBLK(second.st_mode)
            and (first.st_rdev == second.st_rdev)
        )
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)
