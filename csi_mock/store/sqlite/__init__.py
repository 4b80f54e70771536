"""The state store in one SQLite database: the implementation of
`csi_mock.store.interface.Store`.

`StateStore` (``state_store.py``) reads and writes the rows; the tables and their
migrations are in ``schema.py``, rows to model values and back in ``rows.py``, and the
WAL checkpoints that run off the event loop in ``checkpoints.py``.
"""

from csi_mock.store.sqlite.schema import SCHEMA_VERSION
from csi_mock.store.sqlite.state_store import StateStore

__all__ = ["SCHEMA_VERSION", "StateStore"]
