"""The chat-model seam: ``Usage``, ``Completion``, the ``ChatModel`` protocol and the shared parameter handling.

Backends stay small: they implement ``_complete(messages, params)`` on :class:`BaseChatModel`; accounting
(:mod:`kgqa.llm.accounting`) and caching (:mod:`kgqa.llm.cache`) wrap any backend from the outside.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kgqa import deadline
from kgqa.errors import ConfigError, KGQAError

#: Parameters every backend understands. ``step`` and ``cache`` are consumed by the wrappers, never sent to a backend.
COMMON_PARAMS = frozenset({"temperature", "max_tokens", "seed", "stop", "schema", "step", "cache", "top_p"})
ROLES = frozenset({"system", "user", "assistant"})
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 512


class LLMError(KGQAError):
    """A model call failed for good (after the retry budget, or for a reason retrying cannot fix)."""

    def __init__(self, message: str, *, retries: int = 0, status: int | None = None) -> None:
        super().__init__(message)
        self.retries = retries
        self.status = status


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call, as the backend reported them (the scripted model approximates)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(slots=True)
class Completion:
    """One reply. ``json`` is the parsed reply when a ``schema`` was asked for and the text parsed as JSON."""

    text: str
    usage: Usage = field(default_factory=Usage)
    json: Any | None = None
    model: str = ""
    cached: bool = False
    latency_s: float = 0.0
    #: Retries the backend needed for this reply (429/5xx/timeouts); filled by retrying backends.
    retries: int = 0
    #: What the backend changed in its requests while making this call because the endpoint refused something
    #: (e.g. ``"structured_mode: json_schema -> json_object_schema (HTTP 500)"``). Not retries: no budget was spent.
    negotiations: tuple[str, ...] = ()
    #: Why the reply ended, as the backend said it (OpenAI's ``finish_reason``: ``"stop"``, ``"length"`` when the
    #: token budget cut it off, ...); None when unknown (a reply replayed from the cache). See :func:`cut_by_budget`.
    finish_reason: str | None = None


def cut_by_budget(completion: Completion, max_tokens: int | None = None) -> bool:
    """Whether ``completion`` was cut off by its token budget: the backend said so (``finish_reason == "length"``),
    or, when it did not say why the reply ended, the reply used the whole budget ``max_tokens`` (default 512)."""
    if completion.finish_reason is not None:
        return completion.finish_reason == "length"
    budget = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    return completion.usage.completion_tokens >= budget


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers chat messages. ``step=`` labels the call for accounting and is never sent on."""

    name: str

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Completion: ...

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Completion: ...


def validate_messages(messages: Any) -> list[dict[str, str]]:
    """Check the chat messages' shape; a clear :class:`ConfigError` names the first bad message."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes) or not messages:
        raise ConfigError(f"messages must be a non-empty list of {{'role', 'content'}} dicts, got {messages!r:.80}")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ConfigError(f"message {i} must be a dict with 'role' and 'content', got {message!r:.80}")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ConfigError(f"message {i} has role {role!r}; expected one of {sorted(ROLES)}")
        if not isinstance(content, str):
            raise ConfigError(f"message {i} ({role}) must have string content, got {type(content).__name__}")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


@functools.lru_cache(maxsize=256)
def _model_schema(model: type) -> dict[str, Any]:
    # Building a pydantic JSON schema costs ~0.3 ms; a method asks with the same few models thousands of times.
    return model.model_json_schema()  # type: ignore[attr-defined, no-any-return]


def schema_to_dict(schema: Any) -> dict[str, Any] | None:
    """A JSON schema dict from a pydantic model class or a dict (``None`` stays ``None``)."""
    if schema is None:
        return None
    if isinstance(schema, Mapping):
        return dict(schema)
    if isinstance(schema, type) and callable(getattr(schema, "model_json_schema", None)):
        return dict(_model_schema(schema))
    raise ConfigError(f"schema must be a pydantic model class or a JSON-schema dict, got {schema!r:.80}")


def normalize_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Validated call parameters with defaults filled (temperature 0, max_tokens 512); ``schema`` as a dict."""
    unknown = set(params) - COMMON_PARAMS
    if unknown:
        raise ConfigError(f"unknown chat parameter(s) {sorted(unknown)}; known: {sorted(COMMON_PARAMS)}")
    out = dict(params)
    temperature = out.get("temperature")
    out["temperature"] = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
    if not 0.0 <= out["temperature"] <= 2.0:
        raise ConfigError(f"temperature must be within [0, 2], got {temperature}")
    max_tokens = out.get("max_tokens")
    out["max_tokens"] = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    if out["max_tokens"] < 1:
        raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
    stop = out.get("stop")
    if isinstance(stop, str):
        out["stop"] = [stop]
    elif stop is not None:
        out["stop"] = [str(s) for s in stop]
    if out.get("schema") is not None:
        out["schema"] = schema_to_dict(out["schema"])
    return out


def parse_json_reply(text: str) -> Any | None:
    """The reply parsed as JSON, or ``None`` (the structured-output helper extracts from messier text)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


class BaseChatModel:
    """Shared plumbing: parameter checks, latency, the async twin (a worker thread unless overridden)."""

    name: str = "model"

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        msgs = validate_messages(messages)
        clean = normalize_params(params)
        clean.pop("step", None)
        clean.pop("cache", None)
        # the question's deadline (kgqa.deadline): no call is started past it
        deadline.check(f"before asking {self.name}")
        started = time.perf_counter()
        completion = self._complete(msgs, clean)
        completion.latency_s = time.perf_counter() - started
        if not completion.model:
            completion.model = self.name
        return completion

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        return await asyncio.to_thread(self.chat, messages, **params)

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        raise NotImplementedError

    def cache_identity(self) -> str:
        """What distinguishes this model's replies in the cache (spec plus, where relevant, endpoint or weights)."""
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
