"""Fuzzy label search for entity linking: a tantivy inverted index with Levenshtein term automata, reranked by rapidfuzz.

An index, not a scan: a misspelt token ("nolen") still hits its posting list ("nolan") through the automaton, so the cost grows
with the number of matching terms, not with the number of labels. The candidates are then reranked by a character-level
similarity of the whole label, which is what a user means by "close".

The index holds one document per *block* of ``BLOCK_SIZE`` consecutive labels of the caller's label table, not one per
label. Feeding tantivy from Python costs about 2 µs a document, which was a third of a 10M-triple import; blocks cut the
document count eightfold. A block is a candidate when its labels contain the query's terms (fuzzily); every label of the
best blocks is then scored exactly, so far more labels are reranked than with one document per label, and recall is a
little higher than it was (0.91 against 0.88 at 10M triples; benchmarks/results/kg_bench.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tantivy
from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

from kgqa.normalize import normalize_label

BLOCK_SIZE = 8
_CANDIDATE_BLOCKS = 256  # 2,048 labels rescored; at 10M triples: recall@10 0.91, p50 8 ms (64 blocks: 0.85)
_MAX_TOKENS = 8
_MIN_HEAP = 2 * 16_000_000  # tantivy wants at least 15 MB per indexing thread
_JSON_ESCAPED = re.compile(r"[\"\\\x00-\x1f]")  # what JSON strings must escape


def _edit_distance_for(token: str) -> int:
    # Short tokens with an edit allowed match almost anything; long ones tolerate two typos.
    if len(token) <= 3:
        return 0
    return 1 if len(token) <= 7 else 2


def _holding_query_terms(tokens: list[str], labels: list[str]) -> list[int]:
    """Indices of the labels with a word within a query token's edit distance (transposition counting one, as
    tantivy's fuzzy term query does)."""
    words = sorted({word for label in labels for word in label.split()})
    if not words:
        return []
    distances = process.cdist(tokens, words, scorer=OSA.distance, dtype=np.int32)
    limits = np.array([_edit_distance_for(t) for t in tokens], dtype=np.int32)[:, None]
    matching = {words[j] for j in np.flatnonzero((distances <= limits).any(axis=0)).tolist()}
    return [i for i, label in enumerate(labels) if not matching.isdisjoint(label.split())]


class FuzzyLabelIndex:
    """Fuzzy search over a label table; ``label_at(i)`` returns the normalised label at position ``i`` of that table."""

    def __init__(self, index: tantivy.Index, label_at: Callable[[int], str], size: int) -> None:
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()
        self._label_at = label_at
        self._size = size

    @staticmethod
    def _schema_def() -> tantivy.Schema:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("name", stored=False, index_option="freq")
        builder.add_integer_field("block", stored=True, indexed=False)
        return builder.build()

    @classmethod
    def build(cls, directory: Path, labels: Sequence[str]) -> None:
        """Index ``labels`` (normalize_label keys, in table order) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(cls._schema_def(), path=str(directory), reuse=False)
        # Two indexing threads (3.6 -> 2.8 s at 2.3M labels); the writer's arena sized to the labels (about 50 bytes
        # each) between tantivy's floor and 128 MB, so a small KG does not pay a large KG's import memory.
        heap = min(max(50 * len(labels), _MIN_HEAP), 128_000_000)
        writer = index.writer(heap_size=heap, num_threads=2)
        add, dumps = writer.add_json, json.dumps
        # normalize_label keys hold only word characters and single spaces, so they can be written into JSON as they
        # are, which is several times faster than json.dumps per block; any other text takes the json.dumps path.
        plain = _JSON_ESCAPED.search("".join(labels)) is None
        for block, start in enumerate(range(0, len(labels), BLOCK_SIZE)):
            names = labels[start:start + BLOCK_SIZE]
            add('{"block":' + str(block) + ',"name":["' + '","'.join(names) + '"]}' if plain
                else dumps({"block": block, "name": names}, ensure_ascii=False))
        writer.commit()
        writer.wait_merging_threads()

    @classmethod
    def open(cls, directory: Path, label_at: Callable[[int], str], size: int) -> FuzzyLabelIndex:
        return cls(tantivy.Index.open(str(directory)), label_at, size)

    def search(self, label: str, limit: int = 10) -> list[tuple[int, float]]:
        """Positions of the labels closest to ``label``, best first, with a similarity in [0, 1]."""
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
        hits = self._searcher.search(tantivy.Query.boolean_query(clauses), _CANDIDATE_BLOCKS).hits
        positions: list[int] = []
        for _, address in hits:
            start = int(self._searcher.doc(address)["block"][0]) * BLOCK_SIZE
            positions.extend(range(start, min(start + BLOCK_SIZE, self._size)))
        if not positions:
            return []
        choices = [self._label_at(i) for i in positions]
        # A block is a candidate as a whole; keep only its labels that hold a query term themselves (what one document
        # per label would have matched), so an unrelated label never pads the results.
        kept = _holding_query_terms(tokens, choices)
        if not kept:
            return []
        positions, choices = [positions[i] for i in kept], [choices[i] for i in kept]
        # Both scorers over all candidates in C (cdist), then the better of the two per label.
        scores = np.maximum(process.cdist([key], choices, scorer=fuzz.ratio)[0],
                            process.cdist([key], choices, scorer=fuzz.token_sort_ratio)[0])
        best = np.argsort(-scores, kind="stable")[:max(limit, 0)]
        return [(positions[i], float(scores[i]) / 100.0) for i in best.tolist()]
