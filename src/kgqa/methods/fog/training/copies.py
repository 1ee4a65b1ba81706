"""Other wordings of each training question the scorer also reads: composed from its chain by a phrase table, written
from a template of its chain, with WordNet synonyms swapped in, or with words dropped (see the package docstring)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion


def composed_copies(questions: Sequence[TrainingQuestion], table: str, rng: random.Random) -> list[str]:
    """One question per training question composed from its chain and topic mention by the phrase table ``table``
    (:mod:`kgqa.methods.fog.wordings`); the question as written where the table has no phrase for a hop or the
    question names no topic."""
    from kgqa.methods.fog.wordings import ChainWordings

    return _written_copies(questions, ChainWordings.load(table), rng)


def template_copies(questions: Sequence[TrainingQuestion], templates: str, rng: random.Random) -> list[str]:
    """One question per training question written from a template of its chain (``templates``:
    :class:`~kgqa.methods.fog.wordings.templates.ChainTemplates`); the question as written where its chain has
    no template or the question names no topic."""
    from kgqa.methods.fog.wordings.templates import ChainTemplates

    return _written_copies(questions, ChainTemplates.load(templates), rng)


def _written_copies(questions: Sequence[TrainingQuestion], writer: Any, rng: random.Random) -> list[str]:
    """``writer.compose(chain, mention, rng)`` per question (a phrase table or templates), else the question."""
    out: list[str] = []
    for question in questions:
        mention = next((m for m in question.mentions if m), "")
        written = writer.compose(question.chain, mention, rng) if mention else None
        out.append(written or question.text)
    return out


def synonym_copies(questions: Sequence[TrainingQuestion], composed: Sequence[str], source: str, share: float,
                   rng: random.Random) -> list[str]:
    """One question per training question with words swapped for WordNet synonyms (:func:`swap_synonyms`, each word
    with probability ``share``), from the question as written or, where ``composed`` copies are given, from either
    (a fair coin per question), so the new words meet both MetaQA's structures and the composed ones."""
    from kgqa.methods.fog.wordings.synonyms import WordNet, swap_synonyms

    wordnet = WordNet.load(source)
    out: list[str] = []
    for i, question in enumerate(questions):
        base = composed[i] if composed and rng.random() < 0.5 else question.text
        out.append(swap_synonyms(base, question.mentions, share, wordnet, rng))
    return out


_WORD_RE = re.compile(r"\S+")


def drop_words(text: str, mentions: Sequence[str], p: float, rng: random.Random, mask: str = "[MASK]") -> str:
    """``text`` with each word outside the ``mentions`` deleted (probability p/2) or replaced by ``mask`` (p/2)."""
    protected: list[tuple[int, int]] = []
    for mention in mentions:
        start = text.find(mention) if mention else -1
        while start >= 0:
            protected.append((start, start + len(mention)))
            start = text.find(mention, start + len(mention))
    words: list[str] = []
    for match in _WORD_RE.finditer(text):
        if any(lo < match.end() and match.start() < hi for lo, hi in protected):
            words.append(match.group())
            continue
        draw = rng.random()
        if draw < p / 2:
            continue
        words.append(mask if draw < p else match.group())
    return " ".join(words) if words else text
