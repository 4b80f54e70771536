"""WAL checkpoints off the event loop: a thread of their own, on a connection of
their own, at the cadence SQLite would checkpoint inline."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

CHECKPOINT_EVERY_COMMITS = 150
"""How often the checkpoint thread copies the WAL back into the database: about 800
pages (5-6 per commit), as often as SQLite's own default of 1000 pages would."""
BACKSTOP_CHECKPOINT_PAGES = 4000
"""SQLite checkpoints inline at this WAL size should the checkpoint thread fall behind."""


class Checkpointer:
    """Runs SQLite WAL checkpoints in a thread of its own, on its own connection.

    A PASSIVE checkpoint neither waits for nor blocks the writer, and the sqlite3
    module releases the GIL while it runs, so the owner's thread goes on meanwhile.
    The thread starts with the first request: a short-lived store never needs it.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
            self._thread.start()
        self._due.set()

    def stop(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._due.set()
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None)
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping:
                    return
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error:
                    # The owner's next commit reports a real disk problem; until then
                    # SQLite's own checkpoint at BACKSTOP_CHECKPOINT_PAGES bounds the WAL.
                    continue
        finally:
            db.close()
