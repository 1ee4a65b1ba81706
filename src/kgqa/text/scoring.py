"""A hybrid lexical + dense scorer for ranking candidates (relations, labels) against a question.

``score = alpha * dense + (1 - alpha) * lexical``, both in [0, 1]: dense is the cosine similarity clipped at 0, lexical
is BM25 over the candidate set divided by its best score. ``alpha=1`` is pure embeddings, ``alpha=0`` pure BM25 (and
needs no embedder).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from kgqa.errors import ConfigError
from kgqa.text.base import Embedder
from kgqa.text.bm25 import BM25Index
from kgqa.text.store import EmbeddingStore, relation_text


class HybridScorer:
    """``HybridScorer(embedder, alpha=0.5).score(query, candidates) -> np.ndarray`` in [0, 1], one per candidate.

    ``text_of`` turns a candidate id into the text that is scored (default :func:`relation_text`). Candidate vectors are
    memoised (``memo_size`` texts) and, with ``store``, kept on disk across runs.
    """

    def __init__(self, embedder: Embedder | None, alpha: float = 0.5, *,
                 text_of: Callable[[str], str] = relation_text, store: EmbeddingStore | None = None,
                 memo_size: int = 50_000) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must be within [0, 1], got {alpha}")
        if embedder is None and alpha > 0:
            raise ConfigError("a HybridScorer with alpha > 0 needs an embedder (or use alpha=0 for BM25 only)")
        if store is not None and embedder is not None and store.embedder is not embedder:
            raise ConfigError("the embedding store must wrap the scorer's embedder")
        self.embedder = embedder
        self.alpha = alpha
        self.text_of = text_of
        self.store = store
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_size = memo_size

    def _vectors(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            source = self.store.embed if self.store is not None else self.embedder.embed
            for text, vec in zip(missing, source(missing), strict=True):
                self._memo[text] = np.asarray(vec, dtype=np.float32)
        out = np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, self.embedder.dim), np.float32)
        for text in texts:
            self._memo.move_to_end(text)
        while len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)
        return out

    def dense(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """Cosine similarity of the query with each candidate's text, clipped to [0, 1]."""
        if self.embedder is None:
            raise ConfigError("dense scores need an embedder")
        texts = [self.text_of(c) for c in candidates]
        if not texts:
            return np.zeros(0, dtype=np.float32)
        q = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
        return np.clip(self._vectors(texts) @ q, 0.0, 1.0).astype(np.float32)

    def lexical(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """BM25 of the query against the candidate set, divided by the best score (all zero when nothing matches)."""
        scores = BM25Index([self.text_of(c) for c in candidates]).scores(query)
        best = float(scores.max()) if scores.size else 0.0
        return (scores / best).astype(np.float32) if best > 0 else scores

    def score(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        candidates = list(candidates)
        if not candidates:
            return np.zeros(0, dtype=np.float32)
        total = np.zeros(len(candidates), dtype=np.float32)
        if self.alpha > 0:
            total += self.alpha * self.dense(query, candidates)
        if self.alpha < 1:
            total += (1.0 - self.alpha) * self.lexical(query, candidates)
        return np.clip(total, 0.0, 1.0)

    def rank(self, query: str, candidates: Sequence[str], k: int | None = None) -> list[tuple[str, float]]:
        """Candidates with their scores, best first (ties keep the input order)."""
        candidates = list(candidates)
        scores = self.score(query, candidates)
        order = np.argsort(-scores, kind="stable")
        ranked = [(candidates[i], float(scores[i])) for i in order]
        return ranked if k is None else ranked[:k]
