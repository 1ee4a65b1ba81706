"""The oracle reasoner (``--llm oracle``, ``--llm oracle:ACC``): a chat model that answers every step of every method as
a perfect reasoner would, so a run measures a method's machinery apart from the model's limits.

It knows what the harness knows of the question being answered (:class:`~kgqa.core.GoldReasoning`: the gold relation
chains and constraints, the gold answers, the nodes on the gold walks, set for each question by the evaluation runner
with :func:`oracle_question`) and it reads the ask itself: which declared step is asked and the inputs its prompt was
filled with (:data:`kgqa.llm.prompts.ASKING`). Each step's :class:`~kgqa.llm.prompts.Signature` declares its oracle rule
beside its prompt and reply model; the rule replies from the gold and from nothing the prompt does not show: it picks only
options the prompt offers, says the evidence is not enough when no gold answer is in it, and never names an answer the
evidence shown does not hold. A step without a rule, or a call outside a declared step, fails loudly (an LLMError), and a
call with no gold (``kgqa ask``, ``kgqa serve``) is refused.

With ``oracle:ACC`` (0 <= ACC <= 1) every decision a rule makes (a choice among options, a verdict) is right with
probability ACC and otherwise a wrong one drawn from a generator seeded by the run's seed and the question's id, so a
run repeats.

Usage is counted as the scripted model counts it (:mod:`kgqa.llm.tokens`): the prompt the method built and the reply.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kgqa.core import GoldReasoning
from kgqa.errors import ConfigError
from kgqa.llm.base import BaseChatModel, Completion, LLMError
from kgqa.llm.prompts import ASKING, Signature
from kgqa.llm.scripted import scripted_completion
from kgqa.normalize import normalize_label

__all__ = ["ORACLE_QUESTION", "OracleAsk", "OracleModel", "OracleQuestion", "open_oracle", "oracle_question"]

T = TypeVar("T")
#: How prompts show a nameless mediator (:func:`kgqa.steps.walks.node_label`).
_MEDIATOR_RE = re.compile(r"\[mediator [^\]]*\]")
#: A numbered line of a prompt's list: ``3. Christopher Nolan``.
_NUMBERED_RE = re.compile(r"^\s*(\d+)\.\s+(.*\S)\s*$")


@dataclass
class OracleQuestion:
    """The gold of the question being answered and the generator of its seeded wrong decisions."""

    gold: GoldReasoning
    rng: random.Random


#: The question the oracle answers for, in this context (set by the evaluation runner; None elsewhere).
ORACLE_QUESTION: ContextVar[OracleQuestion | None] = ContextVar("kgqa_oracle_question", default=None)


@contextmanager
def oracle_question(gold: GoldReasoning, *, seed: int, question_id: str) -> Iterator[None]:
    """While a question is answered, the gold the oracle answers from, with its own seeded generator (the same seed
    and question give the same decisions, whatever else runs)."""
    token = ORACLE_QUESTION.set(OracleQuestion(gold, random.Random(f"oracle:{seed}:{question_id}")))
    try:
        yield
    finally:
        ORACLE_QUESTION.reset(token)


@dataclass
class OracleAsk:
    """One ask as an oracle rule sees it: the signature, the inputs its prompt was filled with, the question's gold,
    and the decisions the rule makes (each right with probability ``accuracy``)."""

    signature: Signature
    inputs: dict[str, Any]
    gold: GoldReasoning
    accuracy: float
    rng: random.Random
    decisions: int = field(default=0)

    # -- reading the prompt ------------------------------------------------------------------------------------------

    def text(self, *names: str) -> str:
        """The text of the inputs ``names`` (all but the question when none is named), one after the other."""
        keys = names or tuple(k for k in self.inputs if k != "question")
        return "\n".join(str(self.inputs.get(k, "")) for k in keys)

    def numbered(self, name: str) -> list[tuple[int, str]]:
        """The numbered lines (``3. text``) of input ``name``: (number, text)."""
        out = []
        for line in str(self.inputs.get(name, "")).splitlines():
            found = _NUMBERED_RE.match(line)
            if found:
                out.append((int(found.group(1)), found.group(2)))
        return out

    def shows(self, text: str, names: frozenset[str], *, mediators: bool = True) -> list[str]:
        """The normalised ``names`` that ``text`` shows, each as a whole run of words; with ``mediators=False`` a
        nameless mediator written ``[mediator m.x]`` shows nothing (whatever words a KG's ids spell: an answer is never
        read out of one)."""
        padded = f" {normalize_label(text if mediators else _MEDIATOR_RE.sub(' ', text))} "
        return sorted(n for n in names if n and f" {n} " in padded)

    def answers_in(self, text: str) -> list[str]:
        """The gold answers ``text`` shows, written as it shows them (for a reply to name)."""
        return [surface(text, name) for name in self.shows(text, self.gold.answer_names, mediators=False)]

    def path_in(self, text: str) -> list[str]:
        """The other nodes of the gold walks ``text`` shows (not answers), written as it shows them."""
        return [surface(text, name) for name in self.shows(text, self.gold.path_names - self.gold.answer_names,
                                                            mediators=False)]

    def on_path(self, text: str) -> bool:
        """Whether ``text`` names a node on a gold walk (a gold answer included)."""
        return bool(self.shows(text, self.gold.path_names | self.gold.answer_names))

    # -- deciding ----------------------------------------------------------------------------------------------------

    def _right(self) -> bool:
        self.decisions += 1
        return self.accuracy >= 1.0 or self.rng.random() < self.accuracy

    def choose(self, options: Sequence[T], correct: Sequence[T], *, most: int | None = None) -> list[T]:
        """The correct options (at most ``most``), or, with probability 1 - accuracy, as many drawn from the others."""
        right = list(correct)[:most] if most is not None else list(correct)
        if self._right():
            return right
        others = [o for o in options if o not in correct]
        if not others:
            return right
        return self.rng.sample(others, min(len(others), max(len(right), 1)))

    def judge(self, verdict: bool) -> bool:
        """A yes/no decision: ``verdict``, or, with probability 1 - accuracy, the other one."""
        return verdict if self._right() else not verdict


def surface(text: str, name: str) -> str:
    """``name`` (normalised) as ``text`` writes it: the first run of its words, punctuation between them as written;
    the normalised name where the text writes it otherwise (accents)."""
    words = name.split()
    found = re.search(r"(?<![0-9A-Za-z])" + r"[\W_]+".join(map(re.escape, words)) + r"(?![0-9A-Za-z])", text, re.I)
    return found.group(0) if found else name


class OracleModel(BaseChatModel):
    """The oracle reasoner as a chat model (see the module docstring)."""

    def __init__(self, accuracy: float = 1.0) -> None:
        if not 0.0 <= accuracy <= 1.0:
            raise ConfigError(f"oracle accuracy must be between 0 and 1 (oracle:0.8), got {accuracy}")
        self.accuracy = accuracy
        self.name = "oracle" if accuracy == 1.0 else f"oracle:{accuracy:g}"

    def _complete(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        question = ORACLE_QUESTION.get()
        if question is None:
            raise LLMError("the oracle answers from the question's gold, and this call has none: only `kgqa eval` knows "
                           "a question's gold")
        asking = ASKING.get()
        if asking is None:
            raise LLMError("the oracle was called outside a declared step (a Signature): it cannot tell what is asked")
        signature, inputs = asking
        if signature.oracle is None:
            raise LLMError(f"step {signature.step!r} (prompt {signature.prompt!r}) declares no oracle rule, so it cannot "
                           "run under the oracle")
        reply = signature.oracle(OracleAsk(signature, inputs, question.gold, self.accuracy, question.rng))
        return scripted_completion(messages, json.dumps(reply, ensure_ascii=False), params, model=self.name)


def open_oracle(rest: str, options: dict[str, Any]) -> OracleModel:
    """The backend of ``oracle`` and ``oracle:ACC``."""
    if options:
        raise ConfigError(f"the oracle takes no options, got {sorted(options)}")
    if not rest.strip():
        return OracleModel()
    try:
        accuracy = float(rest)
    except ValueError:
        raise ConfigError(f"oracle:{rest}: the accuracy must be a number between 0 and 1 (oracle:0.8)") from None
    return OracleModel(accuracy)


def is_oracle_spec(spec: str | None) -> bool:
    """Whether a model spec names the oracle (``oracle`` or ``oracle:ACC``)."""
    return bool(spec) and str(spec).strip().lower().partition(":")[0] == "oracle"
