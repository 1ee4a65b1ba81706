"""A policy-driven scripted chat model: each reply is computed by a Python function from the prompt kgqa rendered.

``PolicyModel(policy)`` calls ``policy(prompt)`` once per chat call. :class:`Prompt` shows the whole call: the messages,
the system text, the last user text (``user``) and the original request (``request``, the same but for a re-ask), its
numbered options, the ``step=`` label, the JSON schema asked for, and how many times this conversation was already
answered (``attempt``: 0 for a first ask, 1 for the re-ask of :func:`kgqa.llm.structured.ask_json`).

What the policy returns is the reply:

* a ``str`` is sent as is; a ``dict``, ``list``, number or pydantic model as its JSON text;
* an exception instance is raised, as from a backend; :func:`fail` makes the :class:`~kgqa.llm.LLMError` a
  dead backend raises after its retries;
* :func:`unreadable` is a reply with no JSON in it, :func:`truncated` a JSON reply cut mid-way (as ``max_tokens`` cuts
  one: answered with ``finish_reason`` ``"length"``, which is what lets ``ask_json(salvage=True)`` read it; so is any text
  marked with :func:`budget_cut`), :func:`fenced` good JSON wrapped in prose and a Markdown fence, as small models write
  it;
* :func:`in_turn` gives one reply per attempt (the first ask, the re-ask, ...), so a re-ask is scripted in place.

:func:`script` (replies call by call, ignoring the prompt) and :func:`by_step` (a reply or sub-policy per step label)
build whole policies. A policy that returns nothing usable, or a script that runs out, raises :class:`PolicyError` (an
``AssertionError``, so it is not mistaken for a backend failure) and also lands in ``model.policy_errors``, so a test
sees it even when the method under test swallows exceptions. So does a failed ``assert`` inside the policy.

Completions are built like :class:`~kgqa.llm.scripted.ScriptedModel`'s (approximate token usage, JSON parsed when a
schema was asked for), so wrapped in a :class:`~kgqa.llm.RecordedModel` the calls and tokens per step are counted like
any backend's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import BaseModel

from kgqa.llm.accounting import current_step
from kgqa.llm.base import BaseChatModel, Completion, LLMError
from kgqa.llm.scripted import last_user_message, reply_text, scripted_completion

__all__ = [
    "InTurn", "Policy", "PolicyError", "PolicyModel", "Prompt", "Reply", "budget_cut", "by_step", "fail", "fenced",
    "in_turn", "script", "truncated", "unreadable",
]

#: What a policy may return (see the module docstring).
Reply: TypeAlias = Any
Policy: TypeAlias = Callable[["Prompt"], Reply]

_CALL_STEP: ContextVar[str | None] = ContextVar("kgqa_policy_step", default=None)
_OPTION_RE = re.compile(r"^\s*(\d+)[.)]\s+(.+?)\s*$", re.M)


def _json_text(reply: Reply) -> str:
    """A string as is; a pydantic model, dict, list or number as its JSON text (one rendering for every helper)."""
    return reply_text(reply.model_dump(mode="json") if isinstance(reply, BaseModel) else reply)


class PolicyError(AssertionError):
    """The test's policy gave no usable reply (returned None or an unknown type, or its script ran out)."""


@dataclass(frozen=True)
class Prompt:
    """One chat call as the model received it."""

    #: The messages, as sent (after ``ask_json`` appended its schema instruction or its re-ask).
    messages: list[dict[str, str]]
    #: The ``step=`` label of the call (or of the enclosing ``recorder.step``); ``None`` when unlabelled.
    step: str | None
    #: The JSON schema asked for (``schema=``, a pydantic model's schema as a dict), or ``None``.
    schema: dict[str, Any] | None
    #: The other call parameters after normalisation (``temperature``, ``max_tokens``, ...).
    params: dict[str, Any] = field(default_factory=dict)
    #: 0-based number of this call on the model.
    index: int = 0

    @property
    def system(self) -> str:
        """The first system message ('' if none)."""
        return next((m["content"] for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        """The last user message ('' if none)."""
        return last_user_message(self.messages)

    @property
    def request(self) -> str:
        """The user message the conversation asked before any reply: for a re-ask, the original request, not the
        complaint about the bad reply that :attr:`user` shows."""
        first_reply = next((i for i, m in enumerate(self.messages) if m.get("role") == "assistant"), len(self.messages))
        return last_user_message(self.messages[:first_reply])

    @property
    def attempt(self) -> int:
        """How many replies this conversation already holds: 0 for a first ask, 1 for the first re-ask, ..."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def schema_name(self) -> str | None:
        """The title of the schema asked for (a pydantic model's class name), or ``None``."""
        return None if self.schema is None else self.schema.get("title")

    @property
    def text(self) -> str:
        """Every message's content, one after the other."""
        return "\n".join(m.get("content", "") for m in self.messages)

    def options(self) -> dict[int, str]:
        """The numbered lines (``3. film.director.film``) of the :attr:`request`, by number."""
        return {int(number): text for number, text in _OPTION_RE.findall(self.request)}

    def option_number(self, text: str) -> int | None:
        """The number of the numbered line reading ``text`` (``None`` if no line does)."""
        return next((n for n, line in self.options().items() if line == text), None)

    def __contains__(self, text: str) -> bool:
        """``"judge a chain" in prompt``: whether any message contains ``text``."""
        return any(text in m.get("content", "") for m in self.messages)


@dataclass(frozen=True)
class InTurn:
    """One reply per attempt of a conversation (see :func:`in_turn`)."""

    replies: tuple[Reply, ...]

    def pick(self, prompt: Prompt) -> Reply:
        return self.replies[min(prompt.attempt, len(self.replies) - 1)]


def in_turn(first: Reply, *then: Reply) -> InTurn:
    """``first`` for the first ask, the next reply for the first re-ask, and so on (the last one repeats).

    Keyed by the conversation (its assistant turns), not by call order, so concurrent questions do not interfere.
    """
    return InTurn((first, *then))


def unreadable(text: str = "I am not sure; it might be one of the films, but I cannot tell which.") -> str:
    """A reply with no JSON in it (prose, a refusal): what a small model sends when it ignores the format."""
    if "{" in text or "[" in text:
        raise ValueError(f"an unreadable reply must hold no JSON, got {text!r}")
    return text


class _BudgetCut(str):
    """A reply text its token budget cut off: :class:`PolicyModel` answers it with ``finish_reason`` ``"length"``."""

    __slots__ = ()


def budget_cut(text: str) -> str:
    """``text`` as a reply its token budget cut off (``finish_reason`` ``"length"``), whatever the budget asked for."""
    return _BudgetCut(text)


def truncated(reply: Reply, keep: float = 0.5) -> str:
    """The text of ``reply`` (JSON for a non-string) cut after ``keep`` of its characters, as a ``max_tokens`` cut does.

    The cut is strictly inside the text, so a JSON object or array never closes; like a real cut, it may still leave a
    complete inner object that a lenient extractor finds.
    """
    text = _json_text(reply)
    if len(text) < 2:
        raise ValueError(f"cannot truncate a reply of {len(text)} character(s)")
    if not 0.0 < keep < 1.0:
        raise ValueError(f"keep must be a fraction in (0, 1), got {keep}")
    return _BudgetCut(text[:min(len(text) - 1, max(1, int(len(text) * keep)))])


def fenced(reply: Reply, prose: str = "Here is my answer:") -> str:
    """Good JSON inside prose and a Markdown fence, as chatty models write it."""
    body = _json_text(reply)
    return f"{prose}\n```json\n{body}\n```\nI hope this helps."


def fail(error: str | BaseException = "the backend did not answer (connection refused)", *, retries: int = 0,
         status: int | None = None) -> LLMError:
    """The :class:`LLMError` a dead backend raises (return it from a policy to raise it at that call).

    An ``LLMError`` is returned as is; another exception (``ConnectionError`` ...) is wrapped, as the backends wrap
    transport errors, and kept as the cause.
    """
    if isinstance(error, LLMError):
        return error
    if isinstance(error, BaseException):
        wrapped = LLMError(f"{type(error).__name__}: {error}", retries=retries, status=status)
        wrapped.__cause__ = error
        return wrapped
    return LLMError(str(error), retries=retries, status=status)


def script(*replies: Reply, repeat_last: bool = False) -> Policy:
    """A policy that serves ``replies`` in call order, whatever the prompt; past the end it repeats the last reply
    (``repeat_last``) or raises :class:`PolicyError`. Items may be :class:`InTurn` or callables of the prompt."""
    items = list(replies)
    served = [0]
    lock = threading.Lock()

    def policy(prompt: Prompt) -> Reply:
        with lock:
            n = served[0]
            served[0] += 1
        if n >= len(items):
            if not repeat_last or not items:
                raise PolicyError(f"the script has {len(items)} replies; call {n + 1} (step {prompt.step!r}) has none")
            n = len(items) - 1
        return items[n]

    return policy


def by_step(replies: Mapping[str | None, Reply | Policy], default: Reply | Policy | None = None) -> Policy:
    """A policy choosing by the call's step label: ``replies[step]`` (a reply, or a policy called with the prompt).

    An unlisted step gets ``default``; with no default it raises :class:`PolicyError` naming the step.
    """
    table = dict(replies)

    def policy(prompt: Prompt) -> Reply:
        if prompt.step in table:
            return table[prompt.step]
        if default is None:
            raise PolicyError(f"no reply for step {prompt.step!r}; the policy knows {sorted(map(str, table))}")
        return default

    return policy


def _resolve(reply: Reply, prompt: Prompt, depth: int = 0) -> Reply:
    """Follow :class:`InTurn` and callables (sub-policies) down to a concrete reply."""
    if depth > 8:
        raise PolicyError("the policy's replies nest more than 8 levels deep (a policy returning itself?)")
    if isinstance(reply, InTurn):
        return _resolve(reply.pick(prompt), prompt, depth + 1)
    if callable(reply) and not isinstance(reply, BaseModel | type):
        return _resolve(reply(prompt), prompt, depth + 1)
    return reply


def _text(reply: Reply, prompt: Prompt) -> str:
    """The reply as text, or raise the exception it is."""
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, str | BaseModel | dict | list | int | float | bool):
        return _json_text(reply)
    raise PolicyError(f"the policy returned {type(reply).__name__} for step {prompt.step!r} (call {prompt.index + 1}); "
                      "a reply is a str, a dict/list, a pydantic model, an exception or in_turn(...)")


class PolicyModel(BaseChatModel):
    """A chat model whose replies come from ``policy(prompt)``; see the module docstring.

    ``history`` holds every :class:`Prompt` received, ``replies`` what was answered to each (the text, or the exception
    raised), ``policy_errors`` the :class:`PolicyError` s (and failed asserts) the policy raised. A policy that is not
    callable is a constant reply.
    """

    def __init__(self, policy: Policy | Reply, *, name: str = "policy") -> None:
        self.name = name
        self.policy: Policy = policy if callable(policy) and not isinstance(policy, type) else (lambda _p: policy)
        self.history: list[Prompt] = []
        self.replies: list[str | BaseException] = []
        self.policy_errors: list[BaseException] = []
        self._lock = threading.Lock()

    def chat(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        # BaseChatModel drops ``step`` before _complete; keep it for the prompt (the recorder's step when not passed).
        token = _CALL_STEP.set(params.get("step") or current_step())
        try:
            return super().chat(messages, **params)
        finally:
            _CALL_STEP.reset(token)

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        with self._lock:  # policies (and script()) may keep state; calls are answered one at a time
            rest = {k: v for k, v in params.items() if k != "schema"}
            prompt = Prompt([dict(m) for m in messages], _CALL_STEP.get(), params.get("schema"), rest, len(self.history))
            self.history.append(prompt)
            try:
                text = _text(_resolve(self.policy(prompt), prompt), prompt)
            except BaseException as exc:
                self.replies.append(exc)
                if isinstance(exc, AssertionError):  # PolicyError, or an assert inside the policy
                    self.policy_errors.append(exc)
                raise
            self.replies.append(text)
        completion = scripted_completion(messages, text, params, model=self.name)
        if isinstance(text, _BudgetCut):  # scripted as cut off by max_tokens, whatever the budget
            completion.finish_reason = "length"
        return completion

    # -- reading the history -----------------------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        return len(self.history)

    def steps(self) -> list[str | None]:
        """The step label of every call, in order."""
        return [p.step for p in self.history]

    def prompts(self, step: str | None = None) -> list[Prompt]:
        """Every prompt received at ``step`` (all of them when ``step`` is ``None``)."""
        return [p for p in self.history if step is None or p.step == step]
