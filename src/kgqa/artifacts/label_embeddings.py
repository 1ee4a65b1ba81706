"""``label-embeddings``: one vector per named node of a KG (its display name embedded), for a given embedder.

FoG's triple scorer reads the head and tail of every triple it scores as label vectors from a frozen encoder; embedding
them once per KG (MetaQA: 43,234 labels) instead of once per question is what makes graph-side scoring cheap. Files:
``vectors.npy`` (float16, one L2-normalised row per node, in ``ids.json`` order) and ``ids.json`` (the node ids and the
embedder). A node missing from the table (a KG that grew, a nameless node) is embedded on the fly by the reader.

Parameters: ``kg`` (a spec or a KG object; it must list its names, as the embedded store does) and ``embedder``
(``minilm``, ``hash``, ``hash:DIM`` or an embedder object; default ``minilm``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.artifacts.inputs import kg_embedder_inputs, resolve_embedder, resolve_kg
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, register_artifact
from kgqa.errors import ConfigError

NAME = "label-embeddings"
VECTORS = "vectors.npy"
IDS = "ids.json"
_BATCH = 2048


class LabelTable:
    """The loaded artifact: the row of a node id, and the vectors of many ids."""

    def __init__(self, ids: list[str], matrix: np.ndarray, embedder: str) -> None:
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise ValueError(f"{len(ids)} ids but a vector matrix of shape {matrix.shape}")
        self.ids = ids
        self.matrix = matrix
        self.embedder = embedder
        self.dim = int(matrix.shape[1])
        self.row = {node: i for i, node in enumerate(ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"LabelTable({len(self)} labels, {self.embedder}, dim {self.dim})"


def _resolve(params: dict[str, Any]) -> ArtifactInputs:
    kg = resolve_kg(params.get("kg"), counts=True)
    try:
        embedder = resolve_embedder(params.get("embedder"))
        if not hasattr(kg.value, "iter_names"):
            raise ConfigError(f"artifact {NAME}: KG {kg.json!r} cannot list its names (only an embedded KG can); "
                              "FoG then embeds labels on the fly")
    except BaseException:
        if kg.closer is not None:
            kg.closer()
        raise
    return kg_embedder_inputs(kg, embedder)


def _build(inputs: ArtifactInputs, out_dir: Path, progress: Progress) -> dict[str, Any]:
    kg, embedder = inputs.resources["kg"], inputs.resources["embedder"]
    pairs = sorted(kg.iter_names())
    ids = [node for node, _ in pairs]
    texts = [name or node for node, name in pairs]
    progress(f"embedding {len(ids)} labels with {embedder.name}")
    matrix = np.zeros((len(ids), int(embedder.dim)), dtype=np.float16)
    for start in range(0, len(texts), _BATCH):
        block = np.asarray(embedder.embed(texts[start:start + _BATCH]), dtype=np.float32)
        matrix[start:start + len(block)] = block
        progress(f"embedded {min(start + _BATCH, len(texts))}/{len(texts)} labels")
    np.save(out_dir / VECTORS, matrix)
    (out_dir / IDS).write_text(json.dumps({"embedder": str(embedder.name), "dim": int(embedder.dim), "ids": ids},
                                          ensure_ascii=False), encoding="utf-8")
    return {"labels": len(ids), "dim": int(embedder.dim)}


def _load(path: Path) -> LabelTable:
    payload = json.loads((path / IDS).read_text(encoding="utf-8"))
    return LabelTable(payload["ids"], np.load(path / VECTORS, mmap_mode="r"), payload["embedder"])


LABEL_EMBEDDINGS = register_artifact(ArtifactKind(
    name=NAME,
    summary="embeddings of a KG's node names (FoG's triple scorer reads heads and tails from them)",
    version="1",
    params={"kg": "KG spec (demo, a directory) or KG object that lists its names; default: the configured kg",
            "embedder": "embedder spec (minilm, hash, hash:DIM) or embedder object; default: minilm"},
    resolve=_resolve,
    build=_build,
    load=_load,
))
