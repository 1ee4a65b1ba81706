"""The LLM layer: one ``load(spec)`` for every backend, plus accounting, a request cache and structured output.

Specs: ``openai:MODEL`` / ``openai:MODEL@http://HOST:PORT/v1`` (any OpenAI-compatible server), ``local:smollm2`` /
``local:gemma3-270m`` (offline llama.cpp), ``scripted:FILE.jsonl`` (deterministic replies). See docs/llm.md.
"""

from __future__ import annotations

import os
from typing import Any

from kgqa.errors import ConfigError
from kgqa.llm.accounting import CallRecord, RecordedModel, Recorder, UsageTotals
from kgqa.llm.base import ChatModel, Completion, LLMError, Usage
from kgqa.llm.cache import CachedModel, SQLiteCache
from kgqa.llm.settings import setting

__all__ = [
    "BACKENDS",
    "CachedModel",
    "CallRecord",
    "ChatModel",
    "Completion",
    "LLMError",
    "RecordedModel",
    "Recorder",
    "SQLiteCache",
    "Usage",
    "UsageTotals",
    "load",
]

BACKENDS = ("openai", "local", "scripted")


def _backend(kind: str, rest: str, options: dict[str, Any]) -> Any:
    if kind == "openai":
        from kgqa.llm.openai_compat import OpenAIChatModel, parse_openai_spec

        model, url = parse_openai_spec(rest)
        if url is not None:
            options.setdefault("base_url", url)
        return OpenAIChatModel(model, **options)
    if kind == "local":
        from kgqa.llm.local import LocalChatModel

        return LocalChatModel(rest or "smollm2", **options)
    from kgqa.llm.scripted import ScriptedModel

    if options:
        raise ConfigError(f"scripted models take no options, got {sorted(options)}")
    if not rest:
        raise ConfigError("scripted model spec needs a file: scripted:FILE.jsonl")
    return ScriptedModel.from_file(rest)


def load(spec: str | None = None, *, recorder: Recorder | None = None,
         cache: bool | str | os.PathLike[str] | SQLiteCache | None = None, **options: Any) -> ChatModel:
    """A chat model from a spec string (default: ``KGQA_LLM``/config ``llm``, else ``local:smollm2``).

    ``recorder`` records every call; ``cache`` is True/False, a cache path or a :class:`SQLiteCache` (default: on for
    remote and local models, via ``KGQA_LLM_CACHE``; off for scripted ones). Other options go to the backend
    (``base_url``, ``api_key``, ``timeout``, ``max_retries``, ``max_concurrency``, ``n_threads``, ``n_ctx``...).
    """
    spec = setting("llm", spec, default="local:smollm2")
    assert spec is not None
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in BACKENDS:
        raise ConfigError(f"model spec {spec!r} is not understood; expected one of "
                          "openai:MODEL[@URL], local:smollm2, local:gemma3-270m, scripted:FILE.jsonl")
    try:
        model: Any = _backend(kind, rest, dict(options))
    except TypeError as exc:  # an option the backend does not take
        raise ConfigError(f"bad option for {spec!r}: {exc}") from None
    if cache is None:
        cache = False if kind == "scripted" else setting("llm_cache", None, kind=bool, default=True)
    if cache is not False:
        store = cache if isinstance(cache, SQLiteCache) else SQLiteCache(None if cache is True else cache)
        model = CachedModel(model, store)
    if recorder is not None:
        model = RecordedModel(model, recorder)
    return model
