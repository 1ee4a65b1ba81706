"""The JSON-reply step every method uses: render a prompt of the method's book, ask, validate, re-ask once, and say how it
went in a :class:`StepResult` instead of raising or inventing a default.

A step's caller decides what a failure means (backtrack, fall back, skip); the step only says that it failed and why, so
no method ever goes on with a silent default it did not choose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.prompts import Signature

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StepResult(Generic[T]):
    """What a step produced: ``value`` when ``ok``; otherwise ``failure`` says why (and ``value`` may hold what the
    step fell back to, which the caller must treat as such; ``replaced_by`` then names what produced it, e.g. the
    ``embedding`` scorer standing in for an unreadable LLM reply)."""

    value: T | None
    ok: bool = True
    failure: str | None = None
    replaced_by: str | None = None

    @classmethod
    def success(cls, value: T) -> StepResult[T]:
        return cls(value, True, None)

    @classmethod
    def failed(cls, reason: str, fallback: T | None = None, *, replaced_by: str | None = None) -> StepResult[T]:
        return cls(fallback, False, reason, replaced_by)

    def unwrap(self) -> T:
        """The value of a successful step; a failed one raises ValueError with its reason."""
        if not self.ok or self.value is None:
            raise ValueError(f"step failed: {self.failure}")
        return self.value


def ask_reply(llm: ChatModel, signature: Signature, *, max_tokens: int | None = None, temperature: float | None = None,
              seed: int | None = None, salvage: bool = True, **inputs: Any) -> StepResult[Any]:
    """Render ``signature``'s prompt with ``inputs``, ask ``llm`` for JSON matching its reply model (one re-ask),
    accounted under its step.

    ``max_tokens`` is the reply budget of this step (the first ask and the re-ask); ``None`` leaves the backend's
    default (512). Budget what the schema needs, so a small model that rambles is stopped early: a list of k relation
    names about 16 + 24k tokens, a judgement with a one-sentence reason under 100, a chain of thought a few hundred.
    ``temperature`` and ``seed`` are passed on when given (ToG explores at 0.4, seeded); ``None`` keeps the backend's
    defaults (temperature 0).

    ``salvage`` (on by default: every method's steps) reads a reply cut off by its budget as far as it got before
    re-asking (see :func:`~kgqa.llm.structured.ask_json`): a small model that loops on a list fills any budget, and
    its re-ask, at temperature 0, loops the same way (PoG with the 135M model: 7 of 27 calls on 3 MetaQA questions
    were re-asks, all of them after replies cut off mid-list). Only a reply the budget cut off is salvaged (the
    backend's finish reason is ``length``, or, without one, the reply used the whole budget); a reply that ended on its
    own but does not decode is re-asked. Each salvaged reply is counted against the question (``salvaged_replies`` in
    its results.jsonl row, beside ``unreadable_replies``), since what the model had not finished is lost.

    An unreadable reply (no valid JSON after the re-ask) is a failed result whose ``failure`` is the validation error
    (it names the model, the schema and the step); errors of the model backend itself (:class:`~kgqa.llm.base.LLMError`
    other than unreadable output) propagate.
    """
    from kgqa.llm.structured import StructuredOutputError, ask_json

    params: dict[str, Any] = {}
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if temperature is not None:
        params["temperature"] = temperature
    if seed is not None:
        params["seed"] = seed
    try:
        messages = signature.messages(**inputs)
        with signature.asking(inputs):
            return StepResult.success(ask_json(llm, messages, signature.reply, step=signature.step, salvage=salvage,
                                               **params))
    except StructuredOutputError as exc:
        return StepResult.failed(str(exc))


class BudgetedModel:
    """A chat model with a budget of calls for one question: a call past it (a re-ask included) raises
    ``spent(budget)`` instead of reaching the model, so a method's call limit holds whatever the model replies.

    FoG's R + 1 calls and VoG's 60 are such budgets. Everything else is the wrapped model's (name, accounting).
    """

    def __init__(self, model: Any, budget: int, spent: Any) -> None:
        self.model, self.calls, self.budget, self.spent = model, 0, budget, spent
        self.name = getattr(model, "name", "model")

    def chat(self, messages: Any, **params: Any) -> Any:
        if self.calls >= self.budget:
            raise self.spent(self.budget)
        self.calls += 1
        return self.model.chat(messages, **params)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.model, item)
