"""Where csi-mock keeps what it builds once and reuses (images, kind node images)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/csi-mock/<parts>``, falling back to ``~/.cache/csi-mock/<parts>``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "csi-mock", *parts)
