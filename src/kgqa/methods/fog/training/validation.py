"""What is held out of training and how a trained scorer is judged: templates and fixed folds of the validation split,
and graph-mode answers on the held-out questions."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.errors import ConfigError
from kgqa.kg.base import KnowledgeGraph
from kgqa.methods.fog.reading import READING, GraphReading
from kgqa.methods.fog.training.settings import TrainSettings
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors


def question_template(question: TrainingQuestion) -> str:
    """The question's wording with its topic mentions abstracted ("who directed {}"), lower-cased."""
    text = question.text
    for mention in sorted(question.mentions, key=len, reverse=True):
        if mention:
            text = text.replace(mention, "{}")
    return " ".join(text.lower().split())


def validation_folds(share: float) -> int:
    """How many fixed validation folds a validation share makes (0.1 -> 10)."""
    return max(2, round(1 / share))


def check_validation_fold(fold: int, share: float, *, name: str = "validation fold") -> int:
    """The number of folds for ``share``; a ConfigError naming ``name`` when ``fold`` is not one of them."""
    if share <= 0:
        raise ConfigError(f"{name} needs a validation share above 0 (it sets the number of folds)")
    folds = validation_folds(share)
    if not 0 <= fold < folds:
        raise ConfigError(f"{name} must be in [0, {folds}) with validation share {share} ({folds} folds), got {fold}")
    return folds


def fold_of(key: str, folds: int) -> int:
    """The fixed fold of a template or question id: a hash of its text, the same in every process and for every
    seed (Python's ``hash`` of a str is salted per process)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % folds


def split_validation(questions: Sequence[TrainingQuestion], settings: TrainSettings,
                     rng: random.Random) -> tuple[set[int], list[int]]:
    """(validation ids, training ids): a seeded ``validation_share`` of the questions, or of their templates when
    ``validation_by`` is "template" (every question of a held-out template is held out). With ``validation_fold`` k,
    the questions (or templates) of fold k of :func:`validation_folds` fixed folds, whatever the seed."""
    order = list(range(len(questions)))
    rng.shuffle(order)
    if settings.validation_by not in ("question", "template"):
        raise ConfigError(f"validation_by must be 'question' or 'template', got {settings.validation_by!r}")
    if settings.validation_share <= 0 or len(order) < 2:
        return set(), order
    if settings.validation_fold is not None:
        folds = check_validation_fold(settings.validation_fold, settings.validation_share)
        key = question_template if settings.validation_by == "template" else (lambda q: q.source or q.text)
        val = {i for i in order if fold_of(key(questions[i]), folds) == settings.validation_fold}
        if not val or len(val) == len(order):
            raise ConfigError(f"validation fold {settings.validation_fold} of {folds} holds "
                              f"{'no' if not val else 'every'} question of the {len(order)}: too few "
                              f"{settings.validation_by}s for folds")
        return val, [i for i in order if i not in val]
    target = max(1, round(settings.validation_share * len(order)))
    if settings.validation_by == "question":
        return set(order[:target]), order[target:]
    groups: dict[str, list[int]] = {}
    for i in order:
        groups.setdefault(question_template(questions[i]), []).append(i)
    val: set[int] = set()
    for members in groups.values():  # templates in the shuffled order of their first question
        if len(val) >= target or len(val) + len(members) >= len(order):
            break
        val.update(members)
    return val, [i for i in order if i not in val]


def answer_set_metrics(predicted: Sequence[str], gold: set[str]) -> dict[str, float]:
    """hit, Hits@1 and F1 of a ranked prediction against a gold set (validation during development)."""
    if not predicted:
        return {"hit": 0.0, "hits1": 0.0, "f1": 0.0}
    pset = set(predicted)
    inter = len(pset & gold)
    precision, recall = inter / len(pset), inter / max(len(gold), 1)
    f1 = 0.0 if inter == 0 else 2 * precision * recall / (precision + recall)
    return {"hit": float(inter > 0), "hits1": float(predicted[0] in gold), "f1": f1}


def validate_answers(kg: KnowledgeGraph, scorer: ForesightScorer, labels: LabelVectors, ids: Sequence[int],
                     questions: Sequence[TrainingQuestion], *, limit: int = 300,
                     reading: GraphReading | None = None) -> dict[str, Any]:
    """Graph-mode answers for (at most ``limit`` of) the held-out questions, read as FoG's graph mode reads them
    (``reading``, default :data:`~kgqa.steps.foresight.graph.READING`, FoG's defaults): hit, Hits@1, F1 in percent."""
    from kgqa.steps.answers import presentable

    reading = reading or READING

    chosen = list(ids)
    if len(chosen) > limit:  # a seeded sample: the ids are sorted, and the first ones are all of one dataset
        chosen = sorted(random.Random(0).sample(chosen, limit))
    totals = {"hit": 0.0, "hits1": 0.0, "f1": 0.0}
    started = time.perf_counter()
    for i in chosen:
        q = questions[i]
        graph = reading.expand(kg, q.topics, scorer.scorer_for(labels, scorer.questions(labels, [q.text])))
        scorer.propagate(graph)
        # without the KG's statement counts: they order answers of merged records, not what an epoch learned, and
        # leaving them out keeps the epoch choice (so the models) of every scorer trained before they existed
        ranked, _ = reading.rank(graph, answerable=lambda ids: set(presentable(kg, ids)))
        for key, value in answer_set_metrics([a.entity for a in ranked], set(q.answers)).items():
            totals[key] += value
    n = max(len(chosen), 1)
    return {**{k: 100 * v / n for k, v in totals.items()}, "questions": len(chosen),
            "seconds_per_question": (time.perf_counter() - started) / n}
