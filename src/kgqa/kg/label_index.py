"""Fuzzy label search for entity linking: a tantivy inverted index with Levenshtein term automata, reranked by rapidfuzz.

An index, not a scan: a misspelt token ("nolen") still hits its posting list ("nolan") through the automaton, so the cost grows
with the number of matching terms, not with the number of labels. The candidates are then reranked by a character-level
similarity of the whole label, which is what a user means by "close".
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tantivy
from rapidfuzz import fuzz

from kgqa.normalize import normalize_label

_CANDIDATES = 64
_MAX_TOKENS = 8


def _edit_distance_for(token: str) -> int:
    # Short tokens with an edit allowed match almost anything; long ones tolerate two typos.
    if len(token) <= 3:
        return 0
    return 1 if len(token) <= 7 else 2


class FuzzyLabelIndex:
    def __init__(self, index: tantivy.Index) -> None:
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()

    @staticmethod
    def _schema_def() -> tantivy.Schema:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("name", stored=True, index_option="freq")
        builder.add_integer_field("node", stored=True, indexed=False)
        return builder.build()

    @classmethod
    def build(cls, directory: Path, labels: Iterable[tuple[int, str]], *, normalized: bool = False) -> None:
        """Index ``(node, name)`` pairs into ``directory`` (``normalized``: names are already normalize_label keys)."""
        directory.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(cls._schema_def(), path=str(directory), reuse=False)
        writer = index.writer(heap_size=128_000_000, num_threads=1)
        add, document = writer.add_document, tantivy.Document
        for node, name in labels:
            add(document(name=name if normalized else normalize_label(name), node=node))
        writer.commit()
        writer.wait_merging_threads()

    @classmethod
    def open(cls, directory: Path) -> FuzzyLabelIndex:
        return cls(tantivy.Index.open(str(directory)))

    def search(self, label: str, limit: int = 10) -> list[tuple[int, float]]:
        """Nodes whose name is close to ``label``, best first, with a similarity in [0, 1]."""
        key = normalize_label(label)
        tokens = key.split()[:_MAX_TOKENS]
        if not tokens:
            return []
        clauses = []
        for token in tokens:
            distance = _edit_distance_for(token)
            query = (tantivy.Query.fuzzy_term_query(self._schema, "name", token, distance=distance)
                     if distance else tantivy.Query.term_query(self._schema, "name", token))
            clauses.append((tantivy.Occur.Should, query))
        hits = self._searcher.search(tantivy.Query.boolean_query(clauses), max(_CANDIDATES, limit)).hits
        scored: dict[int, float] = {}
        for _, address in hits:
            doc = self._searcher.doc(address)
            node = int(doc["node"][0])
            name = doc["name"][0]
            score = max(fuzz.ratio(key, name), fuzz.token_sort_ratio(key, name)) / 100.0
            if score > scored.get(node, -1.0):
                scored[node] = score
        return sorted(scored.items(), key=lambda kv: -kv[1])[:limit]
