"""The one exception a suite turns into a skip."""

from __future__ import annotations


class Unsupported(Exception):
    """The cluster cannot do what was asked (e.g. restart its scheduler); the message
    says why, and a test that needs it is skipped with that reason."""
