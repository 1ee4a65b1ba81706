"""Rewording machine-made training questions by a model (``kgqa train fog --synthetic --paraphrase-llm SPEC``): each
question of a :class:`~kgqa.datasets.synthetic.SyntheticSet` is rewritten in one prompt (``paraphrase`` in
paraphrase.toml, next to this module). A reply is kept only when it is one line, names the topic character for
character and no answer, and is not too long (:func:`paraphrase_check`); otherwise the question keeps its wording,
and the failure is counted by reason. A step (not part of :mod:`kgqa.datasets`) because it asks a model."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.datasets.synthetic import SyntheticSet
from kgqa.kg.base import KnowledgeGraph
from kgqa.steps.reply import ask_reply

__all__ = ["PROMPTS_FILE", "answer_names_from", "paraphrase_all", "paraphrase_check"]

#: The prompt file of the paraphrase step, next to this module.
PROMPTS_FILE = Path(__file__).with_name("paraphrase.toml")


def answer_names_from(kg: KnowledgeGraph) -> Callable[[TrainingQuestion], list[str]]:
    """The names of a question's answers in ``kg`` (an id where it has none): what a paraphrase must not name."""
    def answer_names(question: TrainingQuestion) -> list[str]:
        names = kg.names(sorted(question.answers))
        return [names.get(a) or a for a in sorted(question.answers)]

    return answer_names


def _signature() -> Any:
    from kgqa.llm.prompts import PromptBook, Signature
    from kgqa.llm.structured import Reply

    class ParaphraseReply(Reply):
        question: str

    return Signature(PromptBook.from_file(PROMPTS_FILE), "paraphrase", ParaphraseReply, "synthetic.paraphrase")


def paraphrase_check(original: TrainingQuestion, text: str, answer_names: Sequence[str], *,
                     max_chars: int = 300) -> str | None:
    """Why a reworded question cannot replace ``original`` (None: it can): one line, the topic named exactly, at least
    three words besides it, no label of the prompt echoed, no answer named, not empty and not too long."""
    text = text.strip()
    if not text:
        return "empty"
    if "\n" in text:
        return "more than one line"
    if len(text) > min(max_chars, 4 * max(len(original.text), 20)):
        return "too long"
    if not all(m in text for m in original.mentions):
        return "topic not named exactly"
    rest = text
    for mention in original.mentions:
        rest = rest.replace(mention, " ")
    if len(re.findall(r"\w+", rest)) < 3:  # "The Ron Clark Story": the topic alone says nothing of the chain
        return "too short"
    if re.match(r"\s*(question|entity name|relations)\b", text, re.IGNORECASE):
        return "echoes the prompt"
    for name in answer_names:  # more often than the question did (an answer may be part of the topic's name)
        if name and len(name) > 2:
            pattern = re.compile(rf"(?<!\w){re.escape(name.lower())}(?!\w)")
            if len(pattern.findall(text.lower())) > len(pattern.findall(original.text.lower())):
                return "names an answer"
    return None


def paraphrase_all(llm: Any, stats: SyntheticSet, *, progress: Callable[[str], None] | None = None,
                   answer_names: Callable[[TrainingQuestion], Sequence[str]] | None = None) -> None:
    """Reword every question of ``stats`` by ``llm`` (one prompt each), in place; a reply that fails
    :func:`paraphrase_check` (or an unreadable one) keeps the question as it was, counted by reason."""
    signature = _signature()
    say = progress or (lambda _message: None)
    for i, question in enumerate(stats.questions):
        relations = " -> ".join(str(h) for h in question.chain)
        result = ask_reply(llm, signature, max_tokens=120, question=question.text, topic=question.mentions[0],
                           relations=relations)
        if not result.ok or result.value is None:
            stats.paraphrase_failed["unreadable reply"] += 1
            continue
        names = answer_names(question) if answer_names is not None else sorted(question.answers)
        why = paraphrase_check(question, result.value.question, names)
        if why is not None:
            stats.paraphrase_failed[why] += 1
            continue
        stats.questions[i] = TrainingQuestion(" ".join(result.value.question.split()), question.topics, question.chain,
                                              question.answers, source=question.source, mentions=question.mentions)
        stats.paraphrased += 1
        if (i + 1) % 500 == 0:
            say(f"paraphrased {i + 1} of {len(stats.questions)} questions")
