"""Persistence: the driver's state in one transactional SQLite database, behind the
`Store` interface the backend depends on."""

from csi_mock.store.interface import Attachment, PoolUsage, Publication, Staging, Store
from csi_mock.store.sqlite import StateStore

__all__ = ["Attachment", "PoolUsage", "Publication", "Staging", "StateStore", "Store"]
