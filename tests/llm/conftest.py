"""Fixtures for the LLM-layer tests: a private cache dir, a clean environment, the fault-injecting server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_fault_server import FaultServer

from kgqa.llm.openai_compat import forget_endpoints

_CLEARED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KGQA_LLM", "KGQA_LLM_CACHE", "KGQA_LLM_TIMEOUT", "KGQA_LLM_RETRIES",
            "KGQA_LLM_CONCURRENCY", "KGQA_LLM_JSON_MODE", "KGQA_LLM_BACKOFF_BASE", "KGQA_LLM_BACKOFF_MAX",
            "KGQA_LLM_TOKEN_PARAM", "KGQA_LLM_TEMPERATURE_PARAM")


@pytest.fixture(autouse=True)
def _private_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CLEARED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    forget_endpoints()  # what endpoints accept is learned per process: every test starts from nothing


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv
