"""Gold relation chains of benchmark questions, as supervision for trained scorers (``kgqa train``).

Where a question's chain comes from: MetaQA's question type (``qtype`` -> :data:`kgqa.eval.metaqa_chains.QTYPE_CHAINS`);
a ``chain`` written in the question's metadata (the demo questions); WebQSP's inferential chain (``inferential_chain``,
outgoing relations from the topic entity). A question with none of these, or without topic or answers, is left out
and counted; answers given by name only are matched as ids (MetaQA's ids are its labels), and a question whose chain
reaches none of them gives no training triples (training counts it as unreached).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgqa.core import Question
from kgqa.errors import ConfigError, KGError, KGQAError
from kgqa.eval.datasets import load_dataset
from kgqa.eval.metaqa_chains import QTYPE_CHAINS
from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, format_chain, parse_chain
from kgqa.steps.foresight.training import TrainingQuestion
from kgqa.steps.references import MAX_ANSWERS, Reference, normalize_question


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
    import random

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
            answers = frozenset(a.id or a.name for a in question.answers)
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


# ---------------------------------------------------------------------------------------------------------------------
# SRP's reference candidates: questions whose gold chain, run on the KG, reaches a gold answer

#: Why a question is not a reference candidate (the keys of :func:`check_candidates`' counts).
NO_CHAIN = "no gold chain"
NO_TOPIC = "no topic entity"
NO_ANSWER = "no gold answer"
TOPIC_NOT_IN_KG = "topic not in the KG"
RELATION_NOT_IN_KG = "relation of the chain not in the KG"
CHAIN_FAILED = "chain refused by the KG"
CHAIN_TRUNCATED = "chain result truncated before a gold answer"
CHAIN_MISSES = "chain reaches no gold answer"
DUPLICATE = "same text as an earlier question"
#: Cap on the entities one checked chain may return (MetaQA's widest 3-hop chains stay far below it).
CHECK_LIMIT = 100_000


def answer_keys(question: Question) -> dict[str, str]:
    """The question's gold answers as KG ids -> names, matched as :func:`training_questions` matches them (an answer
    given by name only is taken as an id: MetaQA's ids are its labels)."""
    return {a.id or a.name: a.name for a in question.answers}


def check_candidates(questions: Sequence[Question], kg: KnowledgeGraph, *,
                     max_answers: int = MAX_ANSWERS) -> tuple[list[Reference], Counter[str]]:
    """SRP's reference candidates among ``questions``: each question's gold chain (:func:`gold_chain`) is run on ``kg``
    from its topic entities, and the question is kept when the chain reaches at least one of its gold answers. Returns
    the kept ones as :class:`~kgqa.steps.references.Reference` (path in :func:`~kgqa.kg.base.format_chain` form, the
    reached gold answer names, at most ``max_answers``, in gold order) and how many were dropped for each reason (the
    module's constants; a question is counted once, under the first reason that applies, and a repeated question text
    keeps only its first checked occurrence)."""
    kept: list[Reference] = []
    dropped: Counter[str] = Counter()
    known_relations: dict[str, bool] = {}
    texts: set[str] = set()
    for question in questions:
        chain = gold_chain(question)
        if chain is None or not chain:
            dropped[NO_CHAIN] += 1
            continue
        if not question.topic_entities:
            dropped[NO_TOPIC] += 1
            continue
        answers = answer_keys(question)
        if not answers:
            dropped[NO_ANSWER] += 1
            continue
        topics = [t for t in question.topic_entities if kg.has_entity(t.id)]
        if not topics:
            dropped[TOPIC_NOT_IN_KG] += 1
            continue
        for hop in chain:
            if hop.relation not in known_relations:
                known_relations[hop.relation] = kg.has_relation(hop.relation)
        if not all(known_relations[hop.relation] for hop in chain):
            dropped[RELATION_NOT_IN_KG] += 1
            continue
        try:
            result = kg.run_chain([t.id for t in topics], chain, limit=CHECK_LIMIT)
        except KGError:
            dropped[CHAIN_FAILED] += 1
            continue
        reached = set(result.entities)
        names = [name for key, name in answers.items() if key in reached]
        if not names:
            dropped[CHAIN_TRUNCATED if result.truncated else CHAIN_MISSES] += 1
            continue
        key = normalize_question(question.text)
        if key in texts:
            dropped[DUPLICATE] += 1
            continue
        texts.add(key)
        kept.append(Reference(id=question.id, question=question.text, topics=[t.name for t in topics],
                              path=format_chain(chain), answers=list(dict.fromkeys(names))[:max_answers],
                              dataset=str(question.metadata.get("dataset") or "")))
    return kept, dropped
