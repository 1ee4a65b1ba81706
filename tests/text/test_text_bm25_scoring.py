"""BM25 and the hybrid scorer (lexical part with the hashing embedder: no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from kgqa.errors import ConfigError
from kgqa.text import BM25Index, HashingEmbedder, HybridScorer, relation_text
from kgqa.text.bm25 import tokenize

RELATIONS = [
    "people.person.place_of_birth",
    "people.person.spouse_s",
    "film.film.directed_by",
    "film.director.film",
    "location.location.containedby",
]


def test_tokenize_uses_the_shared_normalisation() -> None:
    assert tokenize("Where was Amélie Poulain BORN?") == ["amelie", "poulain", "born"]
    assert tokenize("people.person.place_of_birth") == ["people", "person", "place", "birth"]


def test_bm25_ranks_matching_documents_first() -> None:
    index = BM25Index(RELATIONS)
    scores = index.scores("place of birth of a person")
    assert scores.shape == (5,) and scores.dtype == np.float32
    assert int(np.argmax(scores)) == 0
    assert scores[2] == 0.0 and scores[4] == 0.0
    assert index.top("film directed by", k=2)[0][0] == 2
    assert len(index) == 5


def test_bm25_edge_cases() -> None:
    assert BM25Index([]).scores("anything").shape == (0,)
    assert BM25Index(["", "the of"]).scores("the").tolist() == [0.0, 0.0]
    index = BM25Index(RELATIONS)
    assert not index.scores("zzz qqq").any()
    assert not index.scores("").any()
    with pytest.raises(ConfigError, match="not a single string"):
        BM25Index("people.person.spouse_s")


def test_relation_text() -> None:
    assert relation_text("people.person.place_of_birth") == "person place of birth"
    assert relation_text("http://rdf.freebase.com/ns/film.film.directed_by") == "film directed by"
    assert relation_text("ns:location.location.containedby") == "location containedby"
    assert relation_text("http://www.wikidata.org/prop/direct/P19") == "p19"
    assert relation_text("spouse") == "spouse"


def test_hybrid_lexical_only_needs_no_embedder() -> None:
    scorer = HybridScorer(None, alpha=0.0)
    scores = scorer.score("who directed the film", RELATIONS)
    assert scores.max() == pytest.approx(1.0) and scores.min() >= 0.0
    assert scorer.rank("who directed the film", RELATIONS, k=1)[0][0] == "film.film.directed_by"
    assert scorer.score("q", []).shape == (0,)
    with pytest.raises(ConfigError, match="needs an embedder"):
        HybridScorer(None, alpha=0.5)
    with pytest.raises(ConfigError, match="alpha"):
        HybridScorer(None, alpha=1.5)


def test_hybrid_with_hashing_embedder_is_in_unit_range() -> None:
    scorer = HybridScorer(HashingEmbedder(128), alpha=0.6)
    scores = scorer.score("birth place", RELATIONS)
    assert ((scores >= 0.0) & (scores <= 1.0)).all()
    assert int(np.argmax(scores)) == 0
    dense = scorer.dense("birth place", RELATIONS)
    lexical = scorer.lexical("birth place", RELATIONS)
    assert np.allclose(scores, np.clip(0.6 * dense + 0.4 * lexical, 0, 1), atol=1e-6)


def test_hashing_embedder_is_normalised_and_deterministic() -> None:
    emb = HashingEmbedder(64)
    a = emb.embed(["place of birth", "place of birth", ""])
    assert a.shape == (3, 64) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0) and not a[2].any()
    assert np.array_equal(a[0], HashingEmbedder(64).embed(["Place of Birth"])[0])
    with pytest.raises(ConfigError, match="not a single string"):
        emb.embed("oops")
