"""Whether the driver has loaded its state and may serve volume RPCs."""

from __future__ import annotations


class Readiness:
    def __init__(self) -> None:
        self.ready = False
        self.failure: str | None = None
