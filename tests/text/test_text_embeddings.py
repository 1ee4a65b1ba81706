"""MiniLM loaded offline from its PyPI package; persistent embeddings of relation names and labels."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgqa.errors import ConfigError
from kgqa.text import EmbeddingStore, HashingEmbedder, HybridScorer, embed_labels, embed_relations, load_embedder

RELATIONS = ["people.person.place_of_birth", "film.film.directed_by", "location.location.containedby",
             "people.person.spouse_s", "music.artist.genre"]


def test_minilm_shape_norm_and_meaning(minilm: Any) -> None:
    vectors = minilm.embed(["where was she born", "birthplace", "film director", "born in"])
    assert minilm.name == "minilm" and minilm.dim == 384
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors[0]
    assert sims[1] > sims[2] and sims[3] > sims[2]
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_hybrid_ranks_relations_by_meaning(minilm: Any) -> None:
    scorer = HybridScorer(minilm, alpha=1.0)
    ranked = scorer.rank("Who is the husband of Michelle Obama?", RELATIONS)
    assert ranked[0][0] == "people.person.spouse_s"
    assert scorer.rank("In which country is Lyon?", RELATIONS)[0][0] == "location.location.containedby"


def test_minilm_loaded_without_touching_the_network(minilm: Any) -> None:
    assert minilm.network_attempts == []
    assert os.environ.get("HF_HUB_OFFLINE") == "1"


def test_store_embeds_each_text_once_and_persists(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    base = HashingEmbedder(32)

    class Counting:
        name, dim = base.name, base.dim

        def embed(self, texts):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return base.embed(texts)

    store = EmbeddingStore(Counting(), tmp_path)
    first = store.embed(["a b", "c d", "a b"])
    assert calls == [["a b", "c d"]]
    assert np.array_equal(first[0], first[2]) and np.array_equal(first[1], base.embed(["c d"])[0])
    again = EmbeddingStore(Counting(), tmp_path).embed(["c d", "e f"])
    assert calls[-1] == ["e f"] and np.array_equal(again[0], first[1])
    assert len(store) == 3
    assert store.path.name == "hash32-32.sqlite3"


def test_embed_relations_and_labels_of_a_kg(tmp_path: Path) -> None:
    from kgqa.kg.embedded import EmbeddedKGBuilder

    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triple("m.obama", "people.person.spouse_s", "m.michelle")
    builder.add_triple("m.obama", "people.person.place_of_birth", "m.honolulu")
    builder.add_triple("m.honolulu", "location.location.containedby", "m.hawaii")
    for entity, name in [("m.obama", "Barack Obama"), ("m.michelle", "Michelle Obama"), ("m.honolulu", "Honolulu"),
                         ("m.hawaii", "Hawaii")]:
        builder.add_name(entity, name)
    kg = builder.build(tmp_path / "kg")

    store = EmbeddingStore(HashingEmbedder(16), tmp_path / "emb")
    relations, matrix = embed_relations(kg, store)
    assert set(relations) >= {"people.person.spouse_s", "location.location.containedby"}
    assert matrix.shape == (len(relations), 16)
    row = relations.index("people.person.place_of_birth")
    assert np.array_equal(matrix[row], HashingEmbedder(16).embed(["person place of birth"])[0])
    ids, labels = embed_labels(kg.iter_names(), store, batch=3)
    assert sorted(ids) == ["m.hawaii", "m.honolulu", "m.michelle", "m.obama"] and labels.shape == (4, 16)
    stored = len(store)
    embed_relations(kg, store)  # a second run embeds nothing new
    assert len(store) == stored
    assert embed_labels(iter(()), store)[1].shape == (0, 16)


def test_load_embedder_specs() -> None:
    assert load_embedder("hash:64").dim == 64
    assert load_embedder("hash").dim == 256
    with pytest.raises(ConfigError, match="unknown embedder"):
        load_embedder("word2vec")
    with pytest.raises(ConfigError, match="integer"):
        load_embedder("hash:big")
