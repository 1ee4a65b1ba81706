"""A persistent request cache in SQLite, keyed by model identity + messages + parameters.

The file is a :class:`kgqa.localdb.LocalSQLite`: safe with several writer processes (parallel runs sharing one cache). By
default only deterministic calls (temperature 0) are cached; a call can
force it either way with ``cache=True/False``.

The key covers the model, the messages and every parameter that reaches the model, the schema included, whether it
was given as a pydantic class or as a JSON-schema dict (both as the JSON schema sent): the same messages asked with
another schema, or with none, are another request. A reply asked for against a schema (``schema=``, as
:func:`kgqa.llm.structured.ask_json` asks; a class or a dict) is stored only when it validates, and a stored reply that
no longer validates (an older, laxer schema; a cache filled before this rule) is skipped as a miss: a faulty endpoint
cannot leave damaged replies behind for later runs to replay. One exception: a reply that spent its whole token budget
and whose completed part validates (what ``ask_json(salvage=True)`` reads) is kept, since the same request at
temperature 0 would be cut off the same way. ``refresh=True`` never reads the cache but writes what it gets (``kgqa eval
--refresh-cache``): a clean rerun that replaces old entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from kgqa.llm.base import Completion, Usage, normalize_params, validate_messages
from kgqa.llm.settings import cache_dir
from kgqa.localdb import LocalSQLite

CACHE_FILE = "llm-cache.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    json TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
)
"""


def request_key(model_identity: str, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """A stable digest of what determines a reply (accounting labels such as ``step`` excluded)."""
    sent = {k: v for k, v in params.items() if k not in {"step", "cache"} and v is not None}
    blob = json.dumps({"model": model_identity, "messages": messages, "params": sent}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class SQLiteCache:
    """The cache file itself: ``get`` / ``put`` by key. Safe across threads and processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._db = LocalSQLite(path, cache_dir(), CACHE_FILE, _SCHEMA, "LLM cache")
        self.path = self._db.path

    def get(self, key: str) -> tuple[str, Any | None, Usage, str] | None:
        row = self._db.connect().execute(
            "SELECT text, json, prompt_tokens, completion_tokens, model FROM completions WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        text, raw_json, prompt, completion, model = row
        return text, (json.loads(raw_json) if raw_json is not None else None), Usage(prompt, completion), model

    def put(self, key: str, completion: Completion) -> None:
        raw_json = json.dumps(completion.json) if completion.json is not None else None
        self._db.connect().execute(
            "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, completion.model, completion.text, raw_json, completion.usage.prompt_tokens,
             completion.usage.completion_tokens, time.time()),
        )

    def __len__(self) -> int:
        return int(self._db.connect().execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def clear(self) -> None:
        self._db.connect().execute("DELETE FROM completions")

    def close(self) -> None:
        self._db.close()


def _readable(schema: Any, text: str, parsed: Any, *, budget_spent: bool = False) -> bool:
    """Whether a reply validates against the schema it was asked for (any reply when none was given), or, when it
    spent its whole token budget (``budget_spent``), whether the part it completed does. The schema is a pydantic
    model class or a JSON-schema dict (:mod:`kgqa.llm.schema_check`)."""
    if schema is None or not isinstance(schema, type | Mapping):
        return True
    from kgqa.llm.structured import close_truncated, reply_error

    if reply_error(schema, text, parsed) is None:
        return True
    if not budget_spent or parsed is not None:
        return False
    closed = close_truncated(text)
    return closed is not None and reply_error(schema, "", closed) is None


class CachedModel:
    """Wraps a chat model with a :class:`SQLiteCache`. ``deterministic_only`` caches temperature-0 calls only."""

    def __init__(self, inner: Any, cache: SQLiteCache, *, deterministic_only: bool = True, refresh: bool = False) -> None:
        self.inner = inner
        self.cache = cache
        self.deterministic_only = deterministic_only
        self.refresh = refresh
        self.name: str = inner.name
        identity = getattr(inner, "cache_identity", None)
        self._identity: str = identity() if callable(identity) else inner.name

    def _key(self, messages: list[dict[str, str]], params: dict[str, Any]) -> str | None:
        return self._key_of(messages, normalize_params(params))

    def _key_of(self, messages: list[dict[str, str]], clean: dict[str, Any]) -> str | None:
        """The key of a request whose parameters are already normalised (``clean``), or None when it is not cached."""
        clean = dict(clean)
        wanted = clean.pop("cache", None)
        if wanted is None:
            wanted = not self.deterministic_only or clean["temperature"] == 0.0
        if not wanted:
            return None
        return request_key(self._identity, validate_messages(messages), clean)

    def _hit(self, key: str, started: float, schema: Any, budget: int) -> Completion | None:
        if self.refresh:
            return None
        found = self.cache.get(key)
        if found is None:
            return None
        text, parsed, usage, model = found
        if not _readable(schema, text, parsed, budget_spent=usage.completion_tokens >= budget):
            return None
        return Completion(text=text, usage=usage, json=parsed, model=model or self.name, cached=True,
                          latency_s=time.perf_counter() - started)

    def _store(self, key: str | None, completion: Completion, schema: Any, budget: int) -> None:
        if key is not None and _readable(schema, completion.text, completion.json,
                                         budget_spent=completion.usage.completion_tokens >= budget):
            self.cache.put(key, completion)

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        started = time.perf_counter()
        clean = normalize_params(params)
        key, schema, budget = self._key_of(messages, clean), params.get("schema"), clean["max_tokens"]
        if key is not None:
            hit = self._hit(key, started, schema, budget)
            if hit is not None:
                return hit
        completion = self.inner.chat(messages, **params)
        self._store(key, completion, schema, budget)
        return completion

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        started = time.perf_counter()
        clean = normalize_params(params)
        key, schema, budget = self._key_of(messages, clean), params.get("schema"), clean["max_tokens"]
        if key is not None:
            hit = self._hit(key, started, schema, budget)  # a primary-key lookup: quick enough for the event loop
            if hit is not None:
                return hit
        completion = await self.inner.achat(messages, **params)
        self._store(key, completion, schema, budget)
        return completion

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {str(self.cache.path)!r})"
