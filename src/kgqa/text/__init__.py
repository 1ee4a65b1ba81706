"""The text layer: embedders (all-MiniLM-L6-v2 offline, hashing), persistent embeddings, BM25, a hybrid scorer."""

from __future__ import annotations

from kgqa.text.base import Embedder, l2_normalize
from kgqa.text.bm25 import BM25Index
from kgqa.text.embedders import HashingEmbedder, MiniLMEmbedder, load_embedder
from kgqa.text.scoring import HybridScorer
from kgqa.text.store import EmbeddingStore, embed_labels, embed_relations, relation_text

__all__ = [
    "BM25Index",
    "Embedder",
    "EmbeddingStore",
    "HashingEmbedder",
    "HybridScorer",
    "MiniLMEmbedder",
    "embed_labels",
    "embed_relations",
    "l2_normalize",
    "load_embedder",
    "relation_text",
]
