"""BM25 over a fixed list of documents (relation names, labels, passages), backed by ``bm25s``.

Why bm25s: it is maintained, depends only on numpy/scipy, and precomputes a sparse document-term score matrix at
indexing time, so scoring a query is a sparse row lookup rather than a Python loop over documents (rank-bm25's approach,
unmaintained since 2022). Tokens are :func:`kgqa.normalize.normalize_label` words, so ``people.person.place_of_birth``
and "place of birth" share tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kgqa.errors import ConfigError
from kgqa.normalize import normalize_label

_STOPWORD_TEXT = (
    "a an the of in on at to for from by with and or is are was were be been what which who whom whose where when "
    "how does do did has have had that this these those it its as"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))


def tokenize(text: str, *, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Normalised word tokens of ``text`` without English stop words."""
    return [t for t in normalize_label(text).split() if t not in stopwords]


class BM25Index:
    """``BM25Index(docs).scores(query)`` -> one non-negative score per document, in document order."""

    def __init__(self, docs: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
                 stopwords: frozenset[str] = STOPWORDS) -> None:
        if isinstance(docs, str):
            raise ConfigError("BM25Index takes a sequence of documents, not a single string")
        import bm25s

        self.docs = list(docs)
        self._stopwords = stopwords
        self._retriever = None
        self._vocab: frozenset[str] = frozenset()
        corpus = [tokenize(d, stopwords=stopwords) for d in self.docs]
        if any(corpus):
            retriever = bm25s.BM25(k1=k1, b=b)
            retriever.index(corpus, show_progress=False)
            self._retriever = retriever
            self._vocab = frozenset(t for doc in corpus for t in doc)

    def __len__(self) -> int:
        return len(self.docs)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no query word occurs in any document)."""
        out = np.zeros(len(self.docs), dtype=np.float32)
        if self._retriever is None:
            return out
        tokens = [t for t in tokenize(query, stopwords=self._stopwords) if t in self._vocab]
        if not tokens:
            return out
        scores = self._retriever.get_scores(tokens)
        out[:] = np.asarray(scores, dtype=np.float32)[: len(self.docs)]
        return out

    def top(self, query: str, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` best (document index, score) pairs with a positive score, best first."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
