"""Settings precedence (flag > env > default) and the retry policy."""

from __future__ import annotations

import email.utils

import pytest

from kgqa.errors import ConfigError
from kgqa.llm.retry import RetryPolicy, parse_retry_after
from kgqa.llm.settings import cache_dir, choice, default_threads, setting, to_bool


def test_flag_beats_env_beats_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGQA_LLM_RETRIES", raising=False)
    assert setting("llm_retries", None, kind=int, default=4) == 4
    monkeypatch.setenv("KGQA_LLM_RETRIES", "2")
    assert setting("llm_retries", None, kind=int, default=4) == 2
    assert setting("llm_retries", 7, kind=int, default=4) == 7
    monkeypatch.setenv("KGQA_LLM_RETRIES", "two")
    with pytest.raises(ConfigError, match="KGQA_LLM_RETRIES"):
        setting("llm_retries", None, kind=int)


def test_choice_settings_are_checked_and_lower_cased(monkeypatch: pytest.MonkeyPatch) -> None:
    modes = ("auto", "json_schema", "none")
    assert choice("llm_json_mode", None, modes, default="auto") == "auto"
    monkeypatch.setenv("KGQA_LLM_JSON_MODE", "JSON_Schema")
    assert choice("llm_json_mode", None, modes, default="auto") == "json_schema"
    assert choice("llm_json_mode", "none", modes, default="auto") == "none"  # the flag wins
    monkeypatch.setenv("KGQA_LLM_JSON_MODE", "xml")
    with pytest.raises(ConfigError, match=r"KGQA_LLM_JSON_MODE.*auto, json_schema, none"):
        choice("llm_json_mode", None, modes, default="auto")


def test_threads_default_to_one_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGQA_LLM_THREADS", raising=False)
    monkeypatch.setenv("CI", "true")
    assert default_threads() == 1
    monkeypatch.setenv("CI", "false")
    assert default_threads() >= 1
    monkeypatch.setenv("KGQA_LLM_THREADS", "3")
    assert default_threads() == 3
    assert default_threads(2) == 2
    with pytest.raises(ConfigError, match="positive"):
        default_threads(0)


def test_bool_and_cache_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert to_bool("Yes") is True and to_bool("off") is False
    with pytest.raises(ConfigError, match="boolean"):
        to_bool("perhaps")
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "c1"))
    assert cache_dir() == tmp_path / "c1" and (tmp_path / "c1").is_dir()
    assert cache_dir(tmp_path / "c2") == tmp_path / "c2"


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "-5"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=1_000_000) == pytest.approx(30.0)


def test_backoff_is_seeded_bounded_and_exponential() -> None:
    a, b = RetryPolicy(seed=3, base_delay=1.0, max_delay=8.0), RetryPolicy(seed=3, base_delay=1.0, max_delay=8.0)
    delays = [a.backoff(i) for i in range(6)]
    assert delays == [b.backoff(i) for i in range(6)]
    for attempt, delay in enumerate(delays):
        ceiling = min(8.0, 2.0**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert a.delay(0, 4.5) == 4.5  # a server's Retry-After replaces the backoff
    with pytest.raises(ConfigError):
        RetryPolicy(max_retries=-1)
