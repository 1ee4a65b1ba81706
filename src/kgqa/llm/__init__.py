"""The LLM layer: one ``load(spec)`` for every backend, plus accounting, a request cache and structured output.

Specs: ``openai:MODEL`` / ``openai:MODEL@http://HOST:PORT/v1`` (any OpenAI-compatible server), ``local:smollm2`` /
``local:gemma3-270m`` (offline llama.cpp), ``scripted:FILE.jsonl`` (deterministic replies). See docs/llm.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kgqa.errors import ConfigError
from kgqa.llm.accounting import CallRecord, RecordedModel, Recorder, UsageTotals
from kgqa.llm.base import ChatModel, Completion, LLMError, Usage
from kgqa.llm.cache import CachedModel, SQLiteCache
from kgqa.llm.settings import setting, to_bool
from kgqa.registry import Registry, registry_key

__all__ = [
    "BACKENDS",
    "LLM_BACKENDS",
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
    "cache_mode",
    "is_local_spec",
    "load",
]

def _open_openai(rest: str, options: dict[str, Any]) -> ChatModel:
    from kgqa.llm.openai_compat import OpenAIChatModel, parse_openai_spec

    model, url = parse_openai_spec(rest)
    if url is not None:
        options.setdefault("base_url", url)
    return OpenAIChatModel(model, **options)


def _open_local(rest: str, options: dict[str, Any]) -> ChatModel:
    from kgqa.llm.local import LocalChatModel

    return LocalChatModel(rest or "smollm2", **options)


def _open_scripted(rest: str, options: dict[str, Any]) -> ChatModel:
    from kgqa.llm.scripted import ScriptedModel

    if options:
        raise ConfigError(f"scripted models take no options, got {sorted(options)}")
    if not rest:
        raise ConfigError("scripted model spec needs a file: scripted:FILE.jsonl")
    return ScriptedModel.from_file(rest)


def _open_oracle(rest: str, options: dict[str, Any]) -> ChatModel:
    from kgqa.llm.oracle import open_oracle

    return open_oracle(rest, options)


#: LLM backends by the prefix of a spec (``openai:...``): each opens a model from the rest of the spec and the options.
#: A third-party backend registers here or by the entry-point group ``kgqa.llm_backends``.
LLM_BACKENDS: Registry[Callable[[str, dict[str, Any]], ChatModel]] = Registry("llm backend", group="llm_backends",
                                                                             noun="LLM backend")
LLM_BACKENDS.add("openai", _open_openai)
LLM_BACKENDS.add("local", _open_local)
LLM_BACKENDS.add("scripted", _open_scripted)
LLM_BACKENDS.add("oracle", _open_oracle)
#: The built-in backend names (kept for callers that list them).
BACKENDS = ("openai", "local", "scripted", "oracle")
#: Backends a spec may name alone, without a colon.
BARE_SPECS = ("oracle",)


def is_local_spec(spec: str | None) -> bool:
    """Whether a model spec (or a model's ``name``, which is its spec) runs an offline local model (``local:...``).

    Methods use it to pick defaults that suit tiny CPU models (e.g. embedding rather than LLM relation pruning).
    """
    if not spec:
        return False
    backend, sep, _ = str(spec).partition(":")
    return bool(sep) and registry_key(backend) == "local"  # the same key the backend lookup uses


def cache_mode(flag: bool | str | None = None) -> str:
    """The LLM cache mode: ``on``, ``off`` or ``refresh`` (write, never read); flag > ``KGQA_LLM_CACHE`` > config > on."""
    if isinstance(flag, bool):
        return "on" if flag else "off"
    value = setting("llm_cache", flag, default="on")
    text = str(value).strip().lower()
    if text == "refresh":
        return text
    try:
        return "on" if to_bool(text, name="llm_cache") else "off"
    except ConfigError:
        raise ConfigError(f"setting llm_cache (env KGQA_LLM_CACHE) must be on, off or refresh; got {value!r}") from None


def load(spec: str | None = None, *, recorder: Recorder | None = None,
         cache: bool | str | os.PathLike[str] | SQLiteCache | None = None, **options: Any) -> ChatModel:
    """A chat model from a spec string (default: ``KGQA_LLM``/config ``llm``, else ``local:smollm2``).

    ``recorder`` records every call; ``cache`` is True/False, ``"refresh"`` (write, never read), a cache path or a
    :class:`SQLiteCache` (default: ``KGQA_LLM_CACHE`` on/off/refresh, on for remote and local models; off for scripted
    ones). Other options go to the backend
    (``base_url``, ``api_key``, ``timeout``, ``max_retries``, ``max_concurrency``, ``n_threads``, ``n_ctx``...).
    """
    if spec is not None and not str(spec).strip():
        raise ConfigError("the model spec is empty; give one such as local:smollm2 or openai:MODEL[@URL], or leave "
                          "--llm out to use the configured default")
    spec = setting("llm", spec, default="local:smollm2")
    assert spec is not None
    kind, sep, rest = spec.partition(":")
    if not sep and registry_key(kind) in BARE_SPECS:  # a backend that needs nothing after its name: `oracle`
        sep = ":"
    backend = LLM_BACKENDS.find(kind) if sep else None
    if backend is None:  # unknown, or a plugin that failed to load: get() says which
        others = ", ".join(f"{n}:..." for n in LLM_BACKENDS.names() if n not in BACKENDS)
        backend = LLM_BACKENDS.get(kind if sep else "", unknown=(
            f"model spec {spec!r} is not understood; expected one of openai:MODEL[@URL], local:smollm2, "
            "local:gemma3-270m, scripted:FILE.jsonl, oracle[:ACC]" + (f", {others}" if others else "")))
    try:
        model: Any = backend(rest, dict(options))
    except TypeError as exc:  # an option the backend does not take
        raise ConfigError(f"bad option for {spec!r}: {exc}") from None
    refresh = False
    if cache is None or cache is True or cache is False or cache == "refresh":
        # scripted and oracle replies are computed, not paid for: nothing to cache
        mode = "off" if cache is None and kind in ("scripted", "oracle") else cache_mode(cache)
        refresh = mode == "refresh"
        cache = mode != "off"
    if cache is not False:
        store = cache if isinstance(cache, SQLiteCache) else SQLiteCache(None if cache is True else cache)
        model = CachedModel(model, store, refresh=refresh)
    if recorder is not None:
        model = RecordedModel(model, recorder)
    return model
