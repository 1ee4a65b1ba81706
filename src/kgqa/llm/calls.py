"""Every LLM call of one question, with its prompt, reply and tokens (kgqa serve's asks; ``kgqa eval --record-calls``).

:class:`CapturingModel` wraps a model once; a question (an ask of the service, a question of a run) sets :data:`CALLS`
to its own :class:`CallLog` in the thread that answers it, so concurrent questions never see each other's calls
(threads a method starts with a copied context log into the same question). The recorder (:mod:`kgqa.llm.accounting`)
still does the accounting; this only keeps the text.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from kgqa.llm.accounting import current_step

#: Per message and per reply, the characters kept (a long prompt is cut, saying how much was left out).
MAX_TEXT = 20_000
#: Calls kept per ask (a runaway method cannot fill the server's memory).
MAX_CALLS = 200


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters not kept)"


class CallLog:
    """The calls of one ask, in the order they finished."""

    def __init__(self, on_add: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.dropped = 0
        self.on_add = on_add
        self._lock = threading.Lock()

    def add(self, messages: list[dict[str, str]], params: dict[str, Any], completion: Any, error: BaseException | None,
            latency_s: float) -> None:
        usage = getattr(completion, "usage", None)
        record = {
            "step": params.get("step") or current_step(),
            "messages": [{"role": str(m.get("role", "")), "content": _cut(str(m.get("content", "")))} for m in messages],
            "reply": None if completion is None else _cut(str(getattr(completion, "text", ""))),
            "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
            "latency_s": round(latency_s, 6),
            "cached": bool(getattr(completion, "cached", False)),
            "error": None if error is None else f"{type(error).__name__}: {error}",
        }
        with self._lock:
            if len(self.calls) >= MAX_CALLS:
                self.dropped += 1
                return
            self.calls.append(record)
            index = len(self.calls) - 1
        if self.on_add is not None:
            with contextlib.suppress(Exception):  # a streamed ask whose reader went away goes on
                self.on_add(index, record)


CALLS: ContextVar[CallLog | None] = ContextVar("kgqa_llm_calls", default=None)


class CapturingModel:
    """A chat model that logs each call into the current ask's :class:`CallLog` (and otherwise is the inner model)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Any:
        log = CALLS.get()
        if log is None:
            return self.inner.chat(messages, **params)
        t0 = time.perf_counter()
        try:
            completion = self.inner.chat(messages, **params)
        except Exception as exc:
            log.add(messages, params, None, exc, time.perf_counter() - t0)
            raise
        log.add(messages, params, completion, None, time.perf_counter() - t0)
        return completion

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Any:
        log = CALLS.get()
        if log is None:
            return await self.inner.achat(messages, **params)
        t0 = time.perf_counter()
        try:
            completion = await self.inner.achat(messages, **params)
        except Exception as exc:
            log.add(messages, params, None, exc, time.perf_counter() - t0)
            raise
        log.add(messages, params, completion, None, time.perf_counter() - t0)
        return completion

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)
