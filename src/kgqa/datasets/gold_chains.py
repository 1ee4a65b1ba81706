"""Gold relation chains of benchmark questions: the supervision of methods that train (``kgqa train``), and the
gold constraints on them.

Where a question's chain comes from, first found first: MetaQA's question type (``qtype`` ->
:data:`kgqa.datasets.metaqa_chains.QTYPE_CHAINS`); a ``chain`` written in the question's metadata (the demo questions);
WebQSP's inferential chain (``inferential_chain``, outgoing relations from the topic entity); the question's
``sparql`` (CWQ, and the WebQSP parses without an inferential chain), read by
:mod:`kgqa.datasets.sparql_chains`. A question with none of these, or without topic or answers, is left out and
counted; answers given by name only are matched as ids (MetaQA's ids are its labels), and a question whose chain
reaches none of them gives no training triples (a trainer counts it as unreached).

:func:`gold_chain_topic` is the topic entity the chain starts from and :func:`gold_constraints` what restricts the
chain's nodes (:class:`GoldConstraint`), from the same source as the chain: WebQSP's ``Constraints`` and ``Order``, or
the SPARQL's side patterns. MetaQA and the demo questions have none.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kgqa.core import Question
from kgqa.datasets.metaqa_chains import QTYPE_CHAINS
from kgqa.datasets.registry import load_dataset
from kgqa.datasets.sparql_chains import GoldConstraint, read_sparql_chain
from kgqa.errors import ConfigError, KGQAError
from kgqa.kg.base import Chain, Direction, Hop, make_literal, parse_chain

__all__ = [
    "GoldConstraint",
    "TrainingQuestion",
    "TrainingSet",
    "answer_keys",
    "gold_chain",
    "gold_chain_topic",
    "gold_constraints",
    "training_questions",
]


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
    reading = _gold_reading(question)
    return reading.chain if reading is not None else None


def gold_chain_topic(question: Question) -> str | None:
    """The topic entity the gold chain starts from: the one the SPARQL reading started from, else the question's first
    topic (WebQSP's first topic is its parse's ``TopicEntityMid`` in all 1,000 GoG records); None without a chain."""
    reading = _gold_reading(question)
    return reading.topic if reading is not None else None


def gold_constraints(question: Question) -> tuple[GoldConstraint, ...]:
    """The constraints on the gold chain's nodes, from the chain's own source (see the module docstring); empty when
    the question has no gold chain or its source has no constraints."""
    reading = _gold_reading(question)
    return reading.constraints if reading is not None else ()


@dataclass(frozen=True)
class _GoldReading:
    chain: Chain
    topic: str | None
    constraints: tuple[GoldConstraint, ...] = ()


def _gold_reading(question: Question) -> _GoldReading | None:
    """The chain, its start and its constraints, all from the first source the question has."""
    meta = question.metadata
    first_topic = question.topic_ids[0] if question.topic_ids else None
    qtype = meta.get("qtype")
    if isinstance(qtype, str) and qtype in QTYPE_CHAINS:
        return _GoldReading(QTYPE_CHAINS[qtype], first_topic)
    chain = meta.get("chain")
    if isinstance(chain, str) and chain.strip():
        try:
            return _GoldReading(parse_chain(chain), first_topic)
        except KGQAError:
            return None
    inferential = meta.get("inferential_chain")
    if isinstance(inferential, list) and inferential:
        hops = tuple(Hop(str(r), Direction.OUT) for r in inferential)
        return _GoldReading(hops, first_topic, _webqsp_constraints(meta))
    sparql = meta.get("sparql")
    if isinstance(sparql, str) and sparql.strip():
        read = read_sparql_chain(sparql, question.topic_ids)
        if read is not None:
            return _GoldReading(read.chain, read.topic, read.constraints)
    return None


def _webqsp_constraints(meta: dict[str, Any]) -> tuple[GoldConstraint, ...]:
    """WebQSP's parse: ``Constraints`` (an entity or a value an edge of a node must reach; a comparison is a range,
    value None) and ``Order`` (the node is ranked by an edge: value None). ``SourceNodeIndex`` counts the chain's nodes
    after the topic, so index k is position k + 1 (checked on the SPARQL of all 1,000 GoG parses). ``Time`` adds
    nothing: its ``AssociatedConstraints`` are entries of ``Constraints``."""
    found: dict[GoldConstraint, None] = {}
    for item in meta.get("constraints") or []:
        if not _names_a_node(item):
            continue
        argument = str(item.get("Argument") or "")
        if item.get("Operator") != "Equal" or not argument:
            value = None
        elif item.get("ArgumentType") == "Entity":
            value = argument
        else:
            value = make_literal(argument)
        found[_webqsp_constraint(item, value)] = None
    order = meta.get("order")
    if _names_a_node(order):
        found[_webqsp_constraint(order, None)] = None
    return tuple(found)


def _names_a_node(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("NodePredicate"), str) \
        and isinstance(item.get("SourceNodeIndex"), int)


def _webqsp_constraint(item: dict[str, Any], value: str | None) -> GoldConstraint:
    return GoldConstraint(item["SourceNodeIndex"] + 1, item["NodePredicate"], Direction.OUT, value)


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
