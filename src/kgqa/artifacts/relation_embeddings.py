"""``relation-embeddings``: one vector per relation of a KG's vocabulary, for a given embedder.

Methods use it to prefilter long relation lists: embed the question once, score every candidate relation by cosine, keep
the best few for the LLM. Files: ``vectors.npy`` (float32, one L2-normalised row per relation) and ``relations.json``
(the relations in row order, the text each was embedded from, and the embedder).

Parameters: ``kg`` (a spec such as ``demo`` or a KG object; default the configured KG) and ``embedder`` (a spec such as
``minilm``, ``hash`` or ``hash:DIM``, or an embedder object; default ``minilm``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.artifacts.inputs import kg_embedder_inputs, resolve_embedder, resolve_kg
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, register_artifact
from kgqa.errors import ConfigError, KGError
from kgqa.kg.schema import relation_words

NAME = "relation-embeddings"
VECTORS = "vectors.npy"
RELATIONS = "relations.json"
_BATCH = 1024
# Relations whose words stand for the verbaliser in the digest: if it ever words them differently, the digest changes.
_PROBES = ("people.person.place_of_birth", "film.film.directed_by", "wdt:P57", "http://example.org/ns#birthPlace")


def _relation_text(relation: str) -> str:
    """The text a relation is embedded from: its words (``film.film.directed_by`` -> ``film film directed by``)."""
    return relation_words(relation) or relation


class RelationEmbeddings:
    """The loaded artifact: the vector of a relation, and cosine scores of a query vector against relations."""

    def __init__(self, relations: Sequence[str], texts: Sequence[str], matrix: np.ndarray, embedder: str) -> None:
        if matrix.ndim != 2 or matrix.shape[0] != len(relations):
            raise ValueError(f"{len(relations)} relations but a vector matrix of shape {matrix.shape}")
        self.relations = list(relations)
        self.texts = list(texts)
        self.matrix = matrix
        self.embedder = embedder
        self.dim = int(matrix.shape[1])
        self._row = {r: i for i, r in enumerate(self.relations)}

    def __len__(self) -> int:
        return len(self.relations)

    def __contains__(self, relation: object) -> bool:
        return relation in self._row

    def __repr__(self) -> str:
        return f"RelationEmbeddings({len(self)} relations, {self.embedder}, dim {self.dim})"

    def vector(self, relation: str) -> np.ndarray:
        """The unit vector of ``relation``; a relation outside the vocabulary is a KGError."""
        row = self._row.get(relation)
        if row is None:
            raise KGError(f"relation {relation!r} is not in the vocabulary these relation embeddings were built from")
        return np.asarray(self.matrix[row], dtype=np.float32)

    def check_embedder(self, embedder: Any) -> None:
        """Raise a ConfigError unless ``embedder`` (an embedder or its name) is the one these vectors came from."""
        name = embedder if isinstance(embedder, str) else getattr(embedder, "name", None)
        if name != self.embedder:
            raise ConfigError(f"these relation embeddings were made with embedder {self.embedder!r}, not {name!r}; "
                              "score with query vectors of the same embedder")

    def scores(self, query: np.ndarray, relations: Sequence[str] | None = None, *,
               missing: float | None = None) -> np.ndarray:
        """Cosine similarity of ``query`` (one vector of this embedder) with each of ``relations`` (default: all).

        A relation outside the vocabulary is a KGError, or scores ``missing`` when that is given.
        """
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ConfigError(f"query vector has {q.shape[0]} dimensions; these relation embeddings have {self.dim} "
                              f"(embedder {self.embedder})")
        norm = float(np.linalg.norm(q))
        if relations is None:
            rows = np.arange(len(self.relations))
            known = np.ones(len(rows), dtype=bool)
        else:
            found = [self._row.get(r, -1) for r in relations]
            rows = np.asarray(found, dtype=np.int64)
            known = rows >= 0
            if not known.all() and missing is None:
                first = relations[int(np.flatnonzero(~known)[0])]
                raise KGError(f"relation {first!r} is not in the vocabulary these relation embeddings were built from")
        out = np.full(len(rows), missing if missing is not None else 0.0, dtype=np.float32)
        if norm > 0 and known.any():
            out[known] = np.asarray(self.matrix[rows[known]], dtype=np.float32) @ (q / norm)
        return out

    def top(self, query: np.ndarray, relations: Sequence[str] | None = None, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` best relations for ``query`` with their cosine, best first (ties keep the given order); relations
        outside the vocabulary are left out."""
        candidates = list(self.relations if relations is None else relations)
        scores = self.scores(query, candidates, missing=float("-inf"))
        order = np.argsort(-scores, kind="stable")[:k]
        return [(candidates[i], float(scores[i])) for i in order if np.isfinite(scores[i])]


def _resolve(params: dict[str, Any]) -> ArtifactInputs:
    kg = resolve_kg(params.get("kg"))
    try:
        embedder = resolve_embedder(params.get("embedder"))
    except BaseException:
        if kg.closer is not None:
            kg.closer()
        raise
    words = {probe: _relation_text(probe) for probe in _PROBES}
    return kg_embedder_inputs(kg, embedder, relation_words=words)


def _build(inputs: ArtifactInputs, out_dir: Path, progress: Progress) -> dict[str, Any]:
    kg, embedder = inputs.resources["kg"], inputs.resources["embedder"]
    relations = sorted(kg.vocabulary())
    texts = [_relation_text(r) for r in relations]
    progress(f"embedding {len(relations)} relations with {embedder.name}")
    matrix = np.zeros((len(relations), int(embedder.dim)), dtype=np.float32)
    for start in range(0, len(texts), _BATCH):
        block = np.asarray(embedder.embed(texts[start:start + _BATCH]), dtype=np.float32)
        if block.shape != (len(texts[start:start + _BATCH]), matrix.shape[1]):
            raise ValueError(f"embedder {embedder.name} returned vectors of shape {block.shape} for "
                             f"{len(texts[start:start + _BATCH])} texts of dimension {matrix.shape[1]}")
        matrix[start:start + len(block)] = block
        if len(texts) > _BATCH:
            progress(f"embedded {min(start + _BATCH, len(texts))}/{len(texts)} relations")
    np.save(out_dir / VECTORS, matrix)
    payload = {"embedder": str(embedder.name), "dim": int(embedder.dim), "relations": relations, "texts": texts}
    (out_dir / RELATIONS).write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return {"relations": len(relations), "dim": int(embedder.dim)}


def _load(path: Path) -> RelationEmbeddings:
    payload = json.loads((path / RELATIONS).read_text(encoding="utf-8"))
    matrix = np.load(path / VECTORS, mmap_mode="r")
    return RelationEmbeddings(payload["relations"], payload["texts"], matrix, payload["embedder"])


RELATION_EMBEDDINGS = register_artifact(ArtifactKind(
    name=NAME,
    summary="embeddings of a KG's relation vocabulary (for prefiltering relation lists by cosine)",
    version="1",
    params={"kg": "KG spec (demo, a directory, an endpoint URL) or KG object; default: the configured kg",
            "embedder": "embedder spec (minilm, hash, hash:DIM) or embedder object; default: minilm"},
    resolve=_resolve,
    build=_build,
    load=_load,
))
