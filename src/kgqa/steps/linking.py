"""Entity linking for a free question: find the KG entities it mentions (for ``kgqa ask``; benchmarks give topics).

Deterministic and KG-only: a ``[bracketed]`` mention (MetaQA style) is looked up first; otherwise every word n-gram of the
question is looked up as an exact (normalised) label, longest first, keeping non-overlapping matches.
"""

from __future__ import annotations

import re

from kgqa.kg.base import EntityMatch, KnowledgeGraph

_BRACKETS = re.compile(r"\[([^\[\]]+)\]")
_WORD = re.compile(r"[\w'’.-]+", re.UNICODE)
_MAX_NGRAM = 8
_STOP = {"the", "a", "an", "of", "in", "on", "who", "what", "which", "when", "where", "how", "is", "was", "did", "do",
         "does", "and", "by", "for", "to", "with", "film", "films", "movie", "movies"}


def link_entities(kg: KnowledgeGraph, question: str, *, limit: int = 3, fuzzy: bool = True) -> list[EntityMatch]:
    bracketed = _BRACKETS.findall(question)
    if bracketed:
        found = [m for text in bracketed for m in kg.search(text, fuzzy=fuzzy, limit=1)]
        if found:
            return found[:limit]
    words = [m.group(0).strip(".'’-") for m in _WORD.finditer(question)]
    taken = [False] * len(words)
    matches: list[EntityMatch] = []
    for size in range(min(_MAX_NGRAM, len(words)), 0, -1):
        for start in range(0, len(words) - size + 1):
            if any(taken[start:start + size]):
                continue
            span = words[start:start + size]
            if size == 1 and (span[0].lower() in _STOP or len(span[0]) < 3):
                continue
            hits = kg.search(" ".join(span), fuzzy=False, limit=1)
            if hits:
                matches.append(hits[0])
                taken[start:start + size] = [True] * size
    return matches[:limit]
