"""Central accounting of model calls: which step asked, tokens, latency, cache hit, retries; summable per question and run.

``with recorder.scope(question_id):`` and ``with recorder.step(name):`` set context variables, so the right question and
step are attached even from threads started with a copied context and from asyncio tasks. A call's own ``step=`` parameter
wins over the enclosing ``recorder.step``.

Counting rule: a cache hit is still a call, with the tokens of the reply it replays (so a method's reported cost does not
depend on whether the cache was warm); ``cache_hits`` says how many calls were replayed, and failed calls count as calls
with no tokens and their retries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from typing import Any

from kgqa.errors import ConfigError
from kgqa.llm.base import Completion, LLMError

_QUESTION: ContextVar[str | None] = ContextVar("kgqa_question", default=None)
_STEP: ContextVar[str | None] = ContextVar("kgqa_step", default=None)
_RECORDER: ContextVar[Recorder | None] = ContextVar("kgqa_recorder", default=None)


def current_question() -> str | None:
    """The question id of the innermost ``recorder.scope`` (``None`` outside any)."""
    return _QUESTION.get()


def current_step() -> str | None:
    """The step label of the innermost ``recorder.step`` (``None`` outside any)."""
    return _STEP.get()


def note_unreadable(step: str | None, error: str) -> None:
    """Count an unreadable reply against the current question of the recorder whose ``scope`` is active (if any)."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.add_unreadable(_QUESTION.get(), step or _STEP.get(), error)


def note_salvaged(step: str | None, detail: str) -> None:
    """Count a reply cut off by its token budget and read as far as it got (``ask_json(salvage=True)``) against the
    current question of the recorder whose ``scope`` is active (if any)."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder.add_salvaged(_QUESTION.get(), step or _STEP.get(), detail)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call as the recorder saw it."""

    question_id: str | None
    step: str | None
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    retries: int
    error: str | None = None
    started_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Sums over a set of calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    retries: int = 0
    #: Replies that stayed unreadable (no valid JSON of the asked shape) after the re-ask.
    unreadable_replies: int = 0
    #: Replies cut off by their token budget whose completed part was read instead (what they had not finished is
    #: lost: an answer list may be shorter than the model meant).
    salvaged_replies: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sum(records: list[CallRecord]) -> UsageTotals:
    return UsageTotals(
        calls=len(records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        latency_s=sum(r.latency_s for r in records),
        cache_hits=sum(1 for r in records if r.cached),
        retries=sum(r.retries for r in records),
    )


class Recorder:
    """Thread-safe collector of :class:`CallRecord`; the runner keeps one per run."""

    def __init__(self) -> None:
        self._records: list[CallRecord] = []
        # Per-question index, so a question's totals cost its own calls, not a scan of the whole run.
        self._by_question: dict[str | None, list[CallRecord]] = {}
        # Unreadable replies per question: (step, validation error), noted by structured output after its re-ask.
        self._unreadable: dict[str | None, list[tuple[str | None, str]]] = {}
        # Replies cut off by their budget and salvaged, per question: (step, what was kept).
        self._salvaged: dict[str | None, list[tuple[str | None, str]]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def scope(self, question_id: str) -> Iterator[None]:
        """Attribute every call inside the block (and every unreadable reply) to ``question_id``."""
        token = _QUESTION.set(str(question_id))
        recorder_token = _RECORDER.set(self)
        try:
            yield
        finally:
            _RECORDER.reset(recorder_token)
            _QUESTION.reset(token)

    def add_unreadable(self, question_id: str | None, step: str | None, error: str) -> None:
        """Count a reply that failed validation even after its re-ask."""
        with self._lock:
            self._unreadable.setdefault(question_id, []).append((step, error))

    def unreadable(self, question_id: str | None = None) -> list[tuple[str | None, str]]:
        """(step, error) of the unreadable replies: of one question, or of the whole run when ``question_id`` is None."""
        with self._lock:
            if question_id is None:
                return [item for items in self._unreadable.values() for item in items]
            return list(self._unreadable.get(question_id, ()))

    def add_salvaged(self, question_id: str | None, step: str | None, detail: str) -> None:
        """Count a reply cut off by its token budget that was read as far as it got."""
        with self._lock:
            self._salvaged.setdefault(question_id, []).append((step, detail))

    def salvaged(self, question_id: str | None = None) -> list[tuple[str | None, str]]:
        """(step, what was kept) of the salvaged replies: of one question, or of the whole run when ``question_id`` is
        None."""
        with self._lock:
            if question_id is None:
                return [item for items in self._salvaged.values() for item in items]
            return list(self._salvaged.get(question_id, ()))

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Label every call inside the block with the step ``name`` (unless a call passes its own ``step=``)."""
        token = _STEP.set(name)
        try:
            yield
        finally:
            _STEP.reset(token)

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)
            self._by_question.setdefault(record.question_id, []).append(record)

    def record(self, model: str, completion: Completion | None, *, step: str | None, latency_s: float,
               started_at: float, error: BaseException | None = None) -> CallRecord:
        """Build and store the record of one finished (or failed) call."""
        if completion is not None:
            rec = CallRecord(_QUESTION.get(), step or _STEP.get(), model, completion.usage.prompt_tokens,
                             completion.usage.completion_tokens, latency_s, completion.cached, completion.retries,
                             None, started_at)
        else:
            retries = error.retries if isinstance(error, LLMError) else 0
            rec = CallRecord(_QUESTION.get(), step or _STEP.get(), model, 0, 0, latency_s, False, retries,
                             f"{type(error).__name__}: {error}", started_at)
        self.add(rec)
        return rec

    def calls(self, question_id: str | None = None) -> list[CallRecord]:
        """Records in arrival order: all of them, or those of one question."""
        with self._lock:
            if question_id is None:
                return list(self._records)
            return list(self._by_question.get(question_id, ()))

    def release(self, question_id: str) -> None:
        """Drop the per-question index of a finished question (its records stay in the run's list)."""
        with self._lock:
            self._by_question.pop(question_id, None)

    def totals(self, question_id: str | None = None) -> UsageTotals:
        """Sums for one question, or for the whole run when ``question_id`` is ``None``."""
        return replace(_sum(self.calls(question_id)), unreadable_replies=len(self.unreadable(question_id)),
                       salvaged_replies=len(self.salvaged(question_id)))

    def by_step(self, question_id: str | None = None) -> dict[str, UsageTotals]:
        """Sums per step label (unlabelled calls under ``""``)."""
        groups: dict[str, list[CallRecord]] = {}
        for rec in self.calls(question_id):
            groups.setdefault(rec.step or "", []).append(rec)
        return {step: _sum(recs) for step, recs in groups.items()}

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._by_question.clear()
            self._unreadable.clear()
            self._salvaged.clear()

    def __len__(self) -> int:
        return len(self._records)


class RecordedModel:
    """Wraps any chat model so each call (sync or async, success or failure) lands in a :class:`Recorder`."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.name: str = inner.name

    @contextmanager
    def _recorded(self, step: str | None) -> Iterator[list[Completion]]:
        """Time one call and record it, success or failure; the caller appends the completion it got."""
        started_at = time.time()
        t0 = time.perf_counter()
        got: list[Completion] = []
        try:
            yield got
        except ConfigError:
            raise  # a malformed request never reached the model: not a call
        except Exception as exc:
            self.recorder.record(self.name, None, step=step, latency_s=time.perf_counter() - t0,
                                 started_at=started_at, error=exc)
            raise
        self.recorder.record(self.name, got[0], step=step, latency_s=time.perf_counter() - t0, started_at=started_at)

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        with self._recorded(params.get("step")) as got:
            got.append(self.inner.chat(messages, **params))
        return got[0]

    async def achat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        with self._recorded(params.get("step")) as got:
            got.append(await self.inner.achat(messages, **params))
        return got[0]

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)

    def __repr__(self) -> str:
        return f"RecordedModel({self.inner!r})"
