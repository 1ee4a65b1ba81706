"""Fixtures for the text-layer tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from text_support import network_refused, require_minilm


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def minilm() -> Any:
    """One MiniLM embedder for the session, loaded (and first used) with every socket connection refused."""
    require_minilm()
    from kgqa.text import load_embedder

    with network_refused() as attempts:
        embedder = load_embedder("minilm")
        embedder.embed(["warm up"])
    embedder.network_attempts = list(attempts)
    return embedder
