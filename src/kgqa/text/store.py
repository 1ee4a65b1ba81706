"""Persistent embeddings: each distinct text is embedded once per embedder and kept in SQLite under the cache dir.

Used for a KG's relation names and entity labels, which every question of a run (and every later run) scores again.
Safe with several processes, like the LLM cache (both are a :class:`kgqa.localdb.LocalSQLite`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kgqa.kg.schema import relation_words
from kgqa.llm.settings import cache_dir
from kgqa.localdb import LocalSQLite
from kgqa.text.base import Embedder, check_texts

_CHUNK = 500  # SQLite's bound-parameter limit is well above this
_SAFE_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def relation_text(relation: str) -> str:
    """The words of a relation for lexical and embedding matching: :func:`kgqa.kg.schema.relation_words` of its local
    name's last two segments (``people.person.place_of_birth`` -> ``person place of birth``)."""
    return relation_words(relation, last=2)


class EmbeddingStore:
    """``store.embed(texts)``: cached rows where present, the embedder for the rest (then stored)."""

    def __init__(self, embedder: Embedder, path: str | os.PathLike[str] | None = None) -> None:
        self.embedder = embedder
        file_name = f"{_SAFE_RE.sub('_', embedder.name)}-{embedder.dim}.sqlite3"
        self._db = LocalSQLite(path, cache_dir() / "embeddings", file_name,
                               "CREATE TABLE IF NOT EXISTS vectors (text TEXT PRIMARY KEY, vec BLOB NOT NULL)",
                               "embedding store")
        self.path = self._db.path

    def _fetch(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        conn = self._db.connect()
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(texts))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start:start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for text, blob in conn.execute(f"SELECT text, vec FROM vectors WHERE text IN ({marks})", chunk):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] == self.embedder.dim:
                    found[text] = vec
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = check_texts(texts)
        found = self._fetch(items)
        missing = [t for t in dict.fromkeys(items) if t not in found]
        if missing:
            vectors = np.asarray(self.embedder.embed(missing), dtype=np.float32)
            rows = [(t, vectors[i].tobytes()) for i, t in enumerate(missing)]
            conn = self._db.connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            found.update({t: vectors[i] for i, t in enumerate(missing)})
        out = np.zeros((len(items), self.embedder.dim), dtype=np.float32)
        for i, text in enumerate(items):
            out[i] = found[text]
        return out

    def __len__(self) -> int:
        return int(self._db.connect().execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def embed_relations(kg: Any, store: EmbeddingStore) -> tuple[list[str], np.ndarray]:
    """All relations of ``kg`` (its ``vocabulary()``) and their embeddings (of :func:`relation_text`), persisted."""
    relations = list(kg.vocabulary())
    return relations, store.embed([relation_text(r) for r in relations])


def embed_labels(pairs: Iterable[tuple[str, str]], store: EmbeddingStore, *,
                 batch: int = 4096) -> tuple[list[str], np.ndarray]:
    """Entity ids and embeddings of their labels, from ``(entity, label)`` pairs such as ``kg.iter_names()``."""
    ids: list[str] = []
    blocks: list[np.ndarray] = []
    pending: list[tuple[str, str]] = []
    for pair in pairs:
        pending.append(pair)
        if len(pending) >= batch:
            ids.extend(p[0] for p in pending)
            blocks.append(store.embed([p[1] for p in pending]))
            pending = []
    if pending:
        ids.extend(p[0] for p in pending)
        blocks.append(store.embed([p[1] for p in pending]))
    matrix = np.vstack(blocks) if blocks else np.zeros((0, store.embedder.dim), dtype=np.float32)
    return ids, matrix
