"""Fixtures for the artifact tests: every test gets its own cache directory (so its own artifact store)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KGQA_CACHE_DIR", str(cache))
    return cache
