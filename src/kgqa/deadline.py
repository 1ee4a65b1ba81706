"""One deadline per question, shared by every KG query and every LLM call (and retry) made while answering it.

``with question_deadline(seconds):`` starts the clock of the question being answered (``kgqa ask --timeout``, ``kgqa
eval --timeout``, the service); it travels in a context variable, like the recorder's question scope, so it reaches
whatever answers the question in that thread (and threads started with a copied context). Inside it:

* a SPARQL request (:class:`kgqa.kg.sparql.endpoint.SparqlEndpoint`) waits at most the time left for each attempt, and
  neither backs off nor retries past the deadline;
* an LLM call (:class:`kgqa.llm.base.BaseChatModel`) is not started once the deadline has passed, and an
  OpenAI-compatible endpoint's attempts and back-offs are cut to the time left (an in-process model cannot be stopped
  mid-reply: it is checked before each call);

and when time runs out they raise :class:`DeadlineExceeded`, which says how long the deadline was, where it is set and
what the question was waiting for. It is not a :class:`~kgqa.errors.KGError` or an :class:`~kgqa.llm.base.LLMError`, so
a method that falls back after a failed query or an unreadable reply does not swallow it: the question fails (``kgqa
ask`` prints one line; ``kgqa eval`` records it on the question's row, which ``--resume --retry-errors`` runs again).

The setting is ``question_timeout`` (config file, ``KGQA_QUESTION_TIMEOUT``, ``--timeout``), read by
:func:`question_timeout`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kgqa.errors import ConfigError, KGQAError

__all__ = ["ASK_DEFAULT_TIMEOUT", "Deadline", "DeadlineExceeded", "attempt_timeout", "check", "current",
           "question_deadline", "question_timeout", "sleep"]

#: Seconds a question of ``kgqa ask`` (and of the service) may take when ``question_timeout`` is not set: one person
#: waits for one answer; the default offline ask aims at 15 s a question (issue 52), so two minutes is 8 times that and
#: the same as the service's own ask timeout. ``kgqa eval`` has no deadline unless one is set, so a benchmark's rows
#: never depend on how loaded the machine was.
ASK_DEFAULT_TIMEOUT = 120.0

_CURRENT: ContextVar[Deadline | None] = ContextVar("kgqa_question_deadline", default=None)
#: Where the setting lives, for the messages that tell the user what to change.
_WHERE = "--timeout / KGQA_QUESTION_TIMEOUT / question_timeout"


class DeadlineExceeded(KGQAError):
    """The question ran past its deadline; the message says what it was waiting for."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """``seconds`` given to a question that started at ``started`` (``time.monotonic()``)."""

    seconds: float
    started: float

    @property
    def ends(self) -> float:
        return self.started + self.seconds

    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.ends - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.ends

    def exceeded(self, waiting_for: str) -> DeadlineExceeded:
        """The error to raise: the deadline, where it is set, and what the question was ``waiting_for``."""
        elapsed = time.monotonic() - self.started
        return DeadlineExceeded(f"the question ran out of its {self.seconds:g} s deadline ({elapsed:.1f} s elapsed) "
                                f"{waiting_for}; give it more time with {_WHERE}")


def current() -> Deadline | None:
    """The deadline of the question being answered (None outside any, or when it has none)."""
    return _CURRENT.get()


@contextmanager
def question_deadline(seconds: float | None) -> Iterator[Deadline | None]:
    """Give the question answered inside the block ``seconds`` (None: no deadline of its own; an enclosing one, if
    any, still holds). A nested deadline never extends an enclosing one."""
    if seconds is None:
        yield current()
        return
    deadline = Deadline(float(seconds), time.monotonic())
    outer = current()
    if outer is not None and outer.ends < deadline.ends:
        deadline = outer
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def check(waiting_for: str) -> None:
    """Raise :class:`DeadlineExceeded` when the current question's deadline has passed."""
    deadline = current()
    if deadline is not None and deadline.passed():
        raise deadline.exceeded(waiting_for)


def attempt_timeout(timeout: float, waiting_for: str) -> float:
    """``timeout`` (seconds for one attempt) cut to the time the question has left; raises :class:`DeadlineExceeded`
    when none is left."""
    deadline = current()
    if deadline is None:
        return timeout
    left = deadline.remaining()
    if left <= 0:
        raise deadline.exceeded(waiting_for)
    return min(timeout, left)


def sleep(seconds: float, waiting_for: str) -> None:
    """Wait ``seconds`` before a retry, unless that would pass the deadline: then raise :class:`DeadlineExceeded` at
    once (waiting out the rest of the deadline could not lead to an answer)."""
    deadline = current()
    if deadline is not None and seconds >= deadline.remaining():
        raise deadline.exceeded(waiting_for)
    if seconds > 0:
        time.sleep(seconds)


def question_timeout(flag: float | str | None = None, *, default: float | None = None) -> float | None:
    """The ``question_timeout`` setting in seconds: ``flag`` (``--timeout``), else ``KGQA_QUESTION_TIMEOUT``, else the
    config file, else ``default``. ``0``, ``none`` and ``off`` mean no deadline (None); anything else must be a
    positive number of seconds, or a :class:`~kgqa.errors.ConfigError` names where the bad value came from."""
    from kgqa import config

    raw, origin = config.get_with_origin("question_timeout", flag)
    if origin == "--question-timeout":
        origin = "--timeout"
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    if isinstance(raw, str) and raw.strip().lower() in ("none", "off"):
        return None
    try:
        if isinstance(raw, bool):
            raise ValueError(raw)
        seconds = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"question_timeout from {origin} must be a number of seconds (0 or none: no deadline), "
                          f"got {raw!r}") from None
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise ConfigError(f"question_timeout from {origin} must be a positive number of seconds (0: no deadline), "
                          f"got {raw!r}")
    return seconds or None
