"""The repository's scripts (scripts/*.py), loaded as modules for their tests: they are
programs, not a package, and some have names no import statement can spell."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(filename: str) -> ModuleType:
    """Execute ``scripts/<filename>`` as a fresh module named after it (``-`` as ``_``),
    registered in ``sys.modules`` because dataclasses look their module up there."""
    path = SCRIPTS / filename
    name = path.stem.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
