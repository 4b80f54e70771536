"""Start-up checks before anything serves: the state directory (its mode and its lock),
the database (readable, and not emptied beside the data it describes), and the saved
pools against the configured ones.

Each failure is a StartupError (a ConfigError: exit 2) naming the key, the path and
the fix.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from csi_mock.config import ConfigError, DriverConfig
from csi_mock.host.backing import LOST_DIR, PENDING_DIR, RETIRED_DIR
from csi_mock.host.paths import is_driver_snapshot_id, is_driver_volume_id
from csi_mock.host.state_lock import StateLock, StateLockHeld
from csi_mock.model.quantity import format_quantity
from csi_mock.store.sqlite import StateStore

log = logging.getLogger("csi_mock")
STATE_DIR_MODE = 0o700
"""The state directory holds every volume's data: only the driver's user may enter."""
LOCK_FILE = "lock"
DATABASE_FILE = "state.db"


class StartupError(ConfigError):
    """The driver cannot start here; the message names the key, the path and the fix."""


def claim_state_dir(config: DriverConfig) -> StateLock:
    """Create the state directory (mode 0700 whatever the umask) and lock it for this
    process's life: two drivers on one state would both spend the same pools."""
    state_dir = config.state_dir
    lock = StateLock(state_dir / LOCK_FILE)
    try:
        state_dir.mkdir(mode=STATE_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(state_dir, STATE_DIR_MODE)  # mkdir's mode is masked; it may be older
        lock.acquire()
    except StateLockHeld as held:
        raise StartupError(
            f"state_dir: {state_dir} is in use by another csi-mock ({held}); stop that"
            " driver, or give this one another state directory (--statedir)"
        ) from None
    except OSError as error:
        raise StartupError(
            f"state_dir: cannot use {state_dir}: {error.strerror or error}; run as root,"
            " or give a writable directory (--statedir, or state_dir in the config file)"
        ) from None
    return lock


def open_store(config: DriverConfig) -> StateStore:
    """The state database, <state_dir>/state.db, created when absent. StartupError when
    it cannot be read, or when it is empty beside volume or snapshot data."""
    path = config.state_dir / DATABASE_FILE
    _refuse_an_emptied_database(path, config)
    try:
        return StateStore(path)
    except sqlite3.DatabaseError as error:
        raise unreadable_store(path, error) from None


def _refuse_an_emptied_database(path: Path, config: DriverConfig) -> None:
    """The driver writes its schema as it creates state.db, so an empty (0-byte) file is
    a database that lost its content (truncated, replaced), not a new one. Beside the
    data it described, starting on it would take that data for data without rows and
    move it all to lost+found: refused instead, as an unreadable database is."""
    try:
        if path.stat().st_size != 0:
            return
    except FileNotFoundError:
        return
    held = [
        f"{directory} holds {_count(count, one, many)}"
        for directory, owns, one, many in (
            (config.volumes_dir, is_driver_volume_id, "volume", "volumes"),
            (config.snapshots_dir, is_driver_snapshot_id, "snapshot", "snapshots"),
        )
        if (count := _live_entries(directory, owns))
    ]
    if held:
        raise StartupError(
            f"state_dir: {path} is empty (0 bytes), but {' and '.join(held)}: the database"
            " that described them was lost or truncated. Restore it from a backup; or, to"
            f" start without them, remove the empty {path.name}, and start-up moves their"
            f" data to {LOST_DIR}/ (it never deletes it)"
        )


def _live_entries(directory: Path, owns: Callable[[str], bool]) -> int:
    """How many entries of `directory` are the driver's live volumes or snapshots."""
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except FileNotFoundError:
        return 0
    return sum(
        1 for name in names if name not in (PENDING_DIR, RETIRED_DIR, LOST_DIR) and owns(name)
    )


def unreadable_store(path: Path, error: sqlite3.DatabaseError) -> StartupError:
    return StartupError(
        f"state_dir: {path} cannot be read as the driver's database ({error}); move it"
        " aside to start without volumes, or restore it from a backup"
    )


def check_saved_pools(config: DriverConfig, store: StateStore) -> None:
    """Compare the saved pools with the configured ones before anything serves.

    A pool that still holds volumes or snapshots must stay configured: StartupError
    naming each such pool. A size saved by a pool resize (admin API) wins over the
    configured size, file or flags, as the newer decision; each such override is logged
    at WARNING with both sizes.
    """
    configured = {pool.name: pool.size for pool in config.effective_pools()}
    held = store.allocations()
    orphans = sorted(set(held) - set(configured))
    if orphans:
        described = ", ".join(
            f"{name} ({_count(len(held[name]), 'volume or snapshot', 'volumes or snapshots')})"
            for name in orphans
        )
        raise StartupError(
            f"pools: {store.path} holds volumes in pools that are no longer configured:"
            f" {described}; configure these pools again (pools in the config file, or"
            " --capacity), and delete their volumes before removing a pool"
        )
    for name, usage in sorted(store.pool_usage().items()):
        size = configured.get(name)
        if size is not None and usage.total is not None and usage.total != size:
            log.warning(
                "pool %s: the saved size %s (from a pool resize) overrides the configured"
                " size %s; `csi-mock ctl pool resize %s %s` restores the configured size",
                name,
                format_quantity(usage.total),
                format_quantity(size),
                name,
                format_quantity(size),
            )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
