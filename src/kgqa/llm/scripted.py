"""A scripted chat model: deterministic replies for tests and demos.

Rules come from a JSONL file (``scripted:FILE.jsonl``) or a list of dicts, each ``{"match": REGEX, "reply": TEXT}``:
``match`` is searched (``re.search``) in the last user message, the first matching rule wins, and a rule without
``match`` is the default. ``"replies": [...]`` instead of ``reply`` serves its items in turn (the last one repeats), which
scripts a re-ask. A non-string reply is sent as its JSON text. Blank lines and lines starting with ``#`` are skipped.
Alternatively pass a callable ``messages -> str``. Token usage is the approximation of :mod:`kgqa.llm.tokens`.

For tests that script a whole method, :class:`kgqa.testing.PolicyModel` computes each reply from the rendered prompt
(its step, its schema, its re-ask count) and scripts unreadable, truncated and failed replies; it builds its
completions with :func:`scripted_completion`, so both models count calls and tokens alike.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgqa.errors import DataError
from kgqa.llm.base import BaseChatModel, Completion, LLMError, Usage, parse_json_reply
from kgqa.llm.tokens import approx_prompt_tokens, approx_tokens

Responder = Callable[[list[dict[str, str]]], str]


@dataclass
class _Rule:
    pattern: re.Pattern[str] | None
    replies: list[str]
    served: int = field(default=0)

    def next_reply(self) -> str:
        reply = self.replies[min(self.served, len(self.replies) - 1)]
        self.served += 1
        return reply


def reply_text(value: Any) -> str:
    """A scripted reply as the text a model would send: a string as is, anything else as its JSON text."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def scripted_completion(messages: Sequence[dict[str, str]], text: str, params: dict[str, Any], *,
                        model: str) -> Completion:
    """The completion of a scripted reply ``text``: usage by the approximation of :mod:`kgqa.llm.tokens`, and the reply
    parsed as JSON when a ``schema`` was asked for (as a JSON-mode backend would). Shared by every scripted model, so
    their accounting agrees. Its ``finish_reason`` is ``"length"`` when the reply uses the whole ``max_tokens`` budget
    (as a real model cut off there would), else ``"stop"``: a script cuts a reply short by giving it that budget."""
    usage = Usage(approx_prompt_tokens(messages), approx_tokens(text))
    parsed = parse_json_reply(text) if params.get("schema") is not None else None
    budget = params.get("max_tokens")
    finish = "length" if budget is not None and usage.completion_tokens >= int(budget) else "stop"
    return Completion(text=text, usage=usage, json=parsed, model=model, finish_reason=finish)


def _rule_from_dict(raw: Any, where: str) -> _Rule:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a rule must be a JSON object with 'reply' (and optionally 'match'), got {raw!r:.80}")
    unknown = set(raw) - {"match", "reply", "replies"}
    if unknown:
        raise DataError(f"{where}: unknown key(s) {sorted(unknown)}; a rule has 'match' and 'reply' or 'replies'")
    if ("reply" in raw) == ("replies" in raw):
        raise DataError(f"{where}: a rule needs exactly one of 'reply' or 'replies'")
    replies = [raw["reply"]] if "reply" in raw else raw["replies"]
    if not isinstance(replies, list) or not replies:
        raise DataError(f"{where}: 'replies' must be a non-empty list")
    pattern = None
    if raw.get("match") is not None:
        if not isinstance(raw["match"], str):
            raise DataError(f"{where}: 'match' must be a regular-expression string, got {raw['match']!r:.80}")
        try:
            pattern = re.compile(raw["match"])
        except re.error as exc:
            raise DataError(f"{where}: 'match' {raw['match']!r} is not a valid regular expression: {exc}") from None
    return _Rule(pattern, [reply_text(r) for r in replies])


def load_rules(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL script into rule dicts; a malformed line raises :class:`DataError` naming file and line."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"scripted model file {file} does not exist")
    rules: list[dict[str, Any]] = []
    for lineno, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            raw = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise DataError(f"{file}:{lineno}: not valid JSON ({exc.msg})") from None
        _rule_from_dict(raw, f"{file}:{lineno}")  # validate early, with the line number
        rules.append(raw)
    if not rules:
        raise DataError(f"scripted model file {file} has no rules")
    return rules


def last_user_message(messages: Sequence[dict[str, str]]) -> str:
    """Content of the last ``user`` message ('' if there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return ""


class ScriptedModel(BaseChatModel):
    """Replies chosen by rules or a callable; the last ``HISTORY`` received conversations are kept in ``history`` (a
    long-running service or benchmark must not grow without bound)."""

    HISTORY = 10_000

    def __init__(self, rules: list[dict[str, Any]] | Responder, *, name: str = "scripted") -> None:
        self.name = name
        self.history: list[list[dict[str, str]]] = []
        self._lock = threading.Lock()
        self._responder: Responder | None = None
        self._rules: list[_Rule] = []
        if callable(rules):
            self._responder = rules
        else:
            self._rules = [_rule_from_dict(r, f"rule {i}") for i, r in enumerate(rules)]
            if not self._rules:
                raise DataError("a scripted model needs at least one rule")

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        return cls(load_rules(path), name=f"scripted:{path}")

    def _reply(self, messages: list[dict[str, str]]) -> str:
        if self._responder is not None:
            reply = self._responder(messages)
            if not isinstance(reply, str):
                raise LLMError(f"{self.name}: the scripted callable returned {type(reply).__name__}, not str")
            return reply
        query = last_user_message(messages)
        default: _Rule | None = None
        for rule in self._rules:
            if rule.pattern is None:
                default = default or rule
            elif rule.pattern.search(query):
                return rule.next_reply()
        if default is None:
            raise LLMError(f"{self.name}: no rule matches the last user message {query[:120]!r} and there is no default")
        return default.next_reply()

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        with self._lock:  # rules with 'replies' are stateful
            self.history.append(messages)
            if len(self.history) > self.HISTORY:
                del self.history[: len(self.history) - self.HISTORY]
            text = self._reply(messages)
        return scripted_completion(messages, text, params, model=self.name)
