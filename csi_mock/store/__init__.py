"""Persistence: the driver's state in one transactional SQLite database."""

from csi_mock.store.sqlite import Attachment, Publication, Staging, StateStore

__all__ = ["Attachment", "Publication", "Staging", "StateStore"]
