"""Gold relation chains of benchmark questions: the supervision of methods that train (``kgqa train``).

Where a question's chain comes from: MetaQA's question type (``qtype`` -> :data:`kgqa.datasets.metaqa_chains.QTYPE_CHAINS`);
a ``chain`` written in the question's metadata (the demo questions); WebQSP's inferential chain (``inferential_chain``,
outgoing relations from the topic entity). A question with none of these, or without topic or answers, is left out
and counted; answers given by name only are matched as ids (MetaQA's ids are its labels), and a question whose chain
reaches none of them gives no training triples (a trainer counts it as unreached).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kgqa.core import Question
from kgqa.datasets.metaqa_chains import QTYPE_CHAINS
from kgqa.datasets.registry import load_dataset
from kgqa.errors import ConfigError, KGQAError
from kgqa.kg.base import Chain, Direction, Hop, parse_chain

__all__ = ["TrainingQuestion", "TrainingSet", "answer_keys", "gold_chain", "training_questions"]


@dataclass(frozen=True)
class TrainingQuestion:
    """One supervised question: text, topic entity ids, gold relation chain, gold answer ids."""

    text: str
    topics: tuple[str, ...]
    chain: Chain
    answers: frozenset[str]
    source: str = ""
    mentions: tuple[str, ...] = ()  # the topics' surface forms in ``text`` (kept by word dropout, abstracted in templates)


def gold_chain(question: Question) -> Chain | None:
    """The question's gold relation chain, when its dataset gives one (see the module docstring)."""
    meta = question.metadata
    qtype = meta.get("qtype")
    if isinstance(qtype, str) and qtype in QTYPE_CHAINS:
        return QTYPE_CHAINS[qtype]
    chain = meta.get("chain")
    if isinstance(chain, str) and chain.strip():
        try:
            return parse_chain(chain)
        except KGQAError:
            return None
    inferential = meta.get("inferential_chain")
    if isinstance(inferential, list) and inferential:
        return tuple(Hop(str(r), Direction.OUT) for r in inferential)
    return None


def answer_keys(question: Question) -> dict[str, str]:
    """The question's gold answers as KG ids -> names (an answer given by name only is taken as an id: MetaQA's ids
    are its labels)."""
    return {a.id or a.name: a.name for a in question.answers}


@dataclass
class TrainingSet:
    questions: list[TrainingQuestion] = field(default_factory=list)
    per_dataset: dict[str, int] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    def describe(self) -> dict[str, Any]:
        return {"questions": len(self.questions), "per_dataset": dict(self.per_dataset), "skipped": dict(self.skipped)}


def training_questions(datasets: list[str], split: str, *, data_dir: str | None = None, limit: int | None = None,
                       seed: int = 0) -> TrainingSet:
    """The questions of ``datasets`` / ``split`` that have a gold chain, as :class:`TrainingQuestion`; with ``limit``,
    a seeded random sample of that many per dataset (not the first ones: MetaQA's files are grouped by template)."""
    out = TrainingSet()
    for name in datasets:
        count = 0
        questions = load_dataset(name, split=split, data_dir=data_dir)
        if limit is not None and limit < len(questions):
            questions = random.Random(f"{seed}:{name}").sample(questions, limit)
        for question in questions:
            chain = gold_chain(question)
            if chain is None:
                out.skipped["no gold chain"] += 1
                continue
            answers = frozenset(answer_keys(question))
            topics = tuple(question.topic_ids)
            if not topics or not answers:
                out.skipped["no topic or no answers"] += 1
                continue
            mentions = tuple(t.name for t in question.topic_entities if t.name)
            out.questions.append(TrainingQuestion(question.text, topics, chain, answers, source=question.id,
                                                  mentions=mentions))
            count += 1
        out.per_dataset[name] = count
        if count == 0:
            raise ConfigError(f"dataset {name!r} ({split}) has no question with a gold relation chain kgqa can read "
                              "(MetaQA question types, a 'chain' in the question, or WebQSP's inferential chain)")
    return out
