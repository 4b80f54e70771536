"""A package's public names imported when first used (PEP 562's module ``__getattr__``).

A package that re-exports from heavy modules (the admin client brings httpx) would
otherwise make everyone who imports one light submodule of it pay for all of them:
importing ``csi_mock.admin.server`` runs ``csi_mock/admin/__init__.py`` first.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose name N lives in the module
    ``homes[N]``. A name is imported on its first access and then kept in the package,
    so later accesses are plain lookups."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__
