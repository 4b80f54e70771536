"""Where csi-mock caches what it builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from csi_harness._internal.core.cache import user_cache_dir


def test_the_cache_is_under_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir("kind") == tmp_path / "csi-mock" / "kind"


def test_without_xdg_cache_home_the_cache_is_under_the_home_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_cache_dir("images") == tmp_path / ".cache" / "csi-mock" / "images"
