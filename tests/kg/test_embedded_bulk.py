"""The embedded store's bulk import: column batches, arrow input, batch unification, the table hash and its directory,
fuzzy label blocks, and the batch text normalisation they rely on."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import OSA

from kgqa.errors import DataError, ImportAborted, KGError
from kgqa.kg.base import make_literal
from kgqa.kg.embedded import (
    META_FILE,
    EmbeddedKG,
    EmbeddedKGBuilder,
    _hash_packed,
    _key_hash,
    _packed,
    _unify,
)
from kgqa.kg.embedded import builder as embedded_builder
from kgqa.kg.embedded.arrays import STATEMENT_COUNTS_FILE
from kgqa.kg.label_index import BLOCK_SIZE
from kgqa.normalize import normalize_label, normalize_labels

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sta", "bor", "vel", "dra", "quin", "tor", "zel", "é", "ß"]


def random_kg(seed: int, triples: int = 3000) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """Triples with repeated ids, literals and non-ASCII ids, plus names (some entities named twice)."""
    rng = random.Random(seed)
    entities = [f"m.{rng.choice(SYLLABLES)}{i}" for i in range(400)]
    relations = [f"dom.type.prop{i}" for i in range(12)]
    literals = [make_literal(str(1900 + i), datatype="http://www.w3.org/2001/XMLSchema#gYear") for i in range(30)]
    rows = []
    for _ in range(triples):
        head = entities[min(int(rng.paretovariate(1.2)) - 1, len(entities) - 1)] if rng.random() < 0.5 \
            else rng.choice(entities)
        tail = rng.choice(literals) if rng.random() < 0.2 else rng.choice(entities)
        rows.append((head, rng.choice(relations), tail))
    names = [(e, " ".join(rng.choice(SYLLABLES).title() for _ in range(rng.randint(1, 3))))
             for e in rng.sample(entities, 300)]
    names += [(names[i][0], "Second Name") for i in range(0, 40, 4)]  # the first name given must win
    return rows, names


def build_per_row(rows: list[tuple[str, str, str]], names: list[tuple[str, str]], out: Path) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triples(rows)
    for entity, name in names:
        builder.add_name(entity, name)
    return builder.build(out)


def snapshot(kg: EmbeddedKG) -> dict:
    stats = kg.stats()
    return {
        "triples": sorted(kg.iter_triples()),
        "names": sorted(kg.iter_names()),
        "stats": (stats.triples, stats.entities, stats.literals, stats.names, stats.relations),
    }


def test_columns_lists_arrow_and_rows_build_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, names = random_kg(0)
    # Small batches so the import goes through many batches, the worker thread and the batch unification.
    monkeypatch.setattr(EmbeddedKGBuilder, "_CHUNK", 257)
    reference = snapshot(build_per_row(rows, names, tmp_path / "rows"))
    assert reference["stats"][0] == len(set(rows))
    first_name: dict[str, str] = {}
    for entity, name in names:
        first_name.setdefault(entity, name)
    assert dict(reference["names"]) == first_name

    for kind in ("lists", "arrow"):
        builder = EmbeddedKGBuilder(schema="freebase")
        for start in range(0, len(rows), 700):
            heads, rels, tails = (list(col) for col in zip(*rows[start:start + 700], strict=True))
            if kind == "arrow":
                heads, rels, tails = (pa.array(c) for c in (heads, rels, tails))  # pa.string, not large_string
            assert builder.add_triple_columns(heads, rels, tails) == len(heads)
        entities, values = (list(col) for col in zip(*names, strict=True))
        builder.add_names(entities[:100], values[:100])
        for entity, name in zip(entities[100:], values[100:], strict=True):  # mixing both ways in keeps the order
            builder.add_name(entity, name)
        assert builder.triple_count == len(rows)
        assert snapshot(builder.build(tmp_path / kind)) == reference, kind


def test_queries_on_a_bulk_built_store_agree_with_a_row_built_one(tmp_path: Path) -> None:
    rows, names = random_kg(1)
    by_rows = build_per_row(rows, names, tmp_path / "rows")
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triple_columns(*(list(c) for c in zip(*rows, strict=True)))
    builder.add_names(*(list(c) for c in zip(*names, strict=True)))
    by_columns = builder.build(tmp_path / "columns")
    for entity in sorted({h for h, _, _ in rows})[:60]:
        for direction in ("out", "in"):
            assert by_columns.relations(entity, direction) == by_rows.relations(entity, direction)
            for relation in by_rows.relations(entity, direction):
                assert sorted(by_columns.neighbors(entity, relation, direction, limit=1000)) == \
                    sorted(by_rows.neighbors(entity, relation, direction, limit=1000))
    for _, name in names[:50]:
        assert {m.id for m in by_columns.search(name)} == {m.id for m in by_rows.search(name)}


def test_column_errors_name_the_row_and_leave_the_builder_unchanged(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    builder.add_triple_columns(["a"], ["r"], ["b"])
    bad_batches = [
        ((["a", "b"], ["r"], ["c", "d"]), "differ in length"),
        ((["a", ""], ["r", "r"], ["c", "d"]), "head column is empty in row 1"),
        ((["a", "b"], ["r", "r"], ["c", None]), "tail column has no value in row 1"),
        ((["a", '"lit"'], ["r", "r"], ["c", "d"]), r"literal cannot be the head .*row 1"),
        ((["a", 5], ["r", "r"], ["c", "d"]), "head column must be strings"),
        ((pa.array([1, 2]), ["r", "r"], ["c", "d"]), "head column must be strings, not arrow int64"),
    ]
    for (heads, rels, tails), message in bad_batches:
        with pytest.raises(DataError, match=message):
            builder.add_triple_columns(heads, rels, tails)
    with pytest.raises(DataError, match="name columns differ in length"):
        builder.add_names(["a", "b"], ["A"])
    assert builder.triple_count == 1
    kg = builder.build(tmp_path / "kg")
    assert list(kg.iter_triples()) == [("a", "r", "b")]


def test_an_error_on_the_encoding_thread_surfaces_at_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EmbeddedKGBuilder, "MAX_CODES", 5)
    builder = EmbeddedKGBuilder()
    builder.add_triples([(f"h{i}", "r", f"t{i}") for i in range(10)])  # buffered: encoded when flushed
    with pytest.raises(ImportAborted, match="too large for the embedded store"):
        builder.build(tmp_path / "kg")
    assert not (tmp_path / "kg").exists()
    # The builder is spent: building again, or adding more, says so instead of writing a partial store.
    with pytest.raises(ImportAborted, match="failed earlier"):
        builder.build(tmp_path / "kg")
    with pytest.raises(ImportAborted, match="failed earlier"):
        builder.add_triple_columns(["a"], ["r"], ["b"])


def test_a_failed_batch_stops_a_loader_even_with_skip_bad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgqa.kg.loaders import load_into

    monkeypatch.setattr(EmbeddedKGBuilder, "MAX_CODES", 50)
    monkeypatch.setattr(EmbeddedKGBuilder, "_CHUNK", 16)
    source = tmp_path / "kg.tsv"
    source.write_text("".join(f"h{i}\tr\tt{i}\n" for i in range(200)))
    builder = EmbeddedKGBuilder()
    with pytest.raises(ImportAborted):  # not 180 "bad lines"
        load_into(builder, source, "tsv", skip_bad=True)
        builder.build(tmp_path / "kg")


def test_a_builder_builds_once_and_rows_must_be_strings(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    with pytest.raises(DataError, match="must be strings"):
        builder.add_triple("a", 5, "b")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="non-empty entity id"):
        builder.add_name("", "A")
    builder.add_triple("a", "r", "b")
    builder.build(tmp_path / "kg")
    with pytest.raises(ImportAborted, match="already built"):
        builder.build(tmp_path / "again")
    with pytest.raises(ImportAborted, match="already built"):
        builder.add_names(["a"], ["A"])


def test_empty_or_missing_names_name_nothing(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    builder.add_triple("a", "r", "b")
    builder.add_name("a", None)
    builder.add_name("a", "")
    builder.add_names(["b", "b", "c"], [None, "Bee", ""])
    builder.add_name("a", "Real A")
    kg = builder.build(tmp_path / "kg")
    assert kg.names(["a", "b", "c"]) == {"a": "Real A", "b": "Bee", "c": None}
    assert kg.has_entity("c")  # naming makes a node, even with an empty name
    assert sorted(kg.iter_names()) == [("a", "Real A"), ("b", "Bee")]
    with pytest.raises(DataError, match="name column must be strings, not arrow int64"):
        EmbeddedKGBuilder().add_names(["a"], pa.array([5]))


def test_the_lexsort_path_for_very_large_kgs_builds_the_same_store(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rows, names = random_kg(5)
    reference = snapshot(build_per_row(rows, names, tmp_path / "flat"))
    monkeypatch.setattr(embedded_builder, "_FLAT_EDGE_KEY_LIMIT", 0)  # as if (node * R + relation) * N overflowed int64
    fallback = build_per_row(rows, names, tmp_path / "lexsort")
    assert snapshot(fallback) == reference
    entity = rows[0][0]
    assert fallback.relations(entity) == EmbeddedKG.open(tmp_path / "flat").relations(entity)


def test_statement_counts_survive_both_sort_paths_and_cost_nothing_without_repeats(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [("a", "r", "b"), ("a", "r", "b"), ("a", "r", "c"), ("x", "s", "b"), ("a", "r", "b"), ("x", "s", "b")]
    asked = [("a", "r", "b"), ("a", "r", "c"), ("x", "s", "b"), ("a", "s", "b"), ("b", "r", "a"), ("zz", "r", "b"),
             ("a", "unknown", "b")]
    expected = [3, 1, 2, 0, 0, 0, 0]

    def build(where: str) -> EmbeddedKG:
        builder = EmbeddedKGBuilder()
        builder.add_triples(rows)
        return builder.build(tmp_path / where)

    flat = build("flat")
    monkeypatch.setattr(embedded_builder, "_FLAT_EDGE_KEY_LIMIT", 0)
    lexsorted = build("lexsort")
    for kg in (flat, lexsorted):
        assert kg.statement_counts(asked) == expected
        assert kg.stats().triples == 3 and kg.stats().extra["repeated_triples"] == 2
    once = EmbeddedKGBuilder()
    once.add_triples(dict.fromkeys(rows))
    single = once.build(tmp_path / "once")
    assert not (single.directory / STATEMENT_COUNTS_FILE).exists()  # no file when every triple is asserted once
    assert single.statement_counts(asked) == [1, 1, 1, 0, 0, 0, 0]


def test_build_records_its_phases_and_old_formats_are_refused(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    builder.add_triple("a", "r", "b")
    kg = builder.build(tmp_path / "kg")
    meta = json.loads((kg.directory / META_FILE).read_text())
    assert {"unify ids", "order nodes", "exact labels", "fuzzy index"} <= set(meta["build_seconds"])
    meta["format_version"] = 1
    (kg.directory / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(KGError, match=r"format version 1.*re-import"):
        EmbeddedKG.open(kg.directory)


def test_unify_over_the_two_thread_path() -> None:
    rng = random.Random(2)
    strings = [rng.choice(["m.", "g.", "é", "", "x" * 9]) + str(rng.randrange(40_000)) for _ in range(150_000)]
    array = pa.array(["skipped"] * 3 + strings, type=pa.large_string()).slice(3)  # a sliced array: offsets matter
    distinct, index = _unify(array)
    values = distinct.to_pylist()
    assert len(values) == len(set(values)) == len(set(strings))
    assert [values[i] for i in index.tolist()] == strings


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=40))
def test_table_hash_is_the_same_for_a_table_and_for_one_key(strings: list[str]) -> None:
    array = pa.array(["pad", *strings], type=pa.large_string()).slice(1)
    data, offsets = _packed(array)
    assert [int(h) for h in _hash_packed(data, offsets)] == [_key_hash(s.encode("utf-8")) for s in strings]


def test_table_hash_handles_very_long_strings() -> None:
    strings = ["a" * 70_000, "b", ""]
    data, offsets = _packed(pa.array(strings, type=pa.large_string()))
    assert [int(h) for h in _hash_packed(data, offsets)] == [_key_hash(s.encode()) for s in strings]


def test_every_id_is_found_and_absent_ids_are_not(tmp_path: Path) -> None:
    # 20k ids share about 20k buckets, so many buckets hold several ids: every lookup must compare bytes.
    ids = [f"m.{i:05x}" for i in range(20_000)]
    builder = EmbeddedKGBuilder()
    builder.add_triple_columns(ids, ["r"] * len(ids), ids[1:] + ids[:1])
    kg = builder.build(tmp_path / "kg")
    assert all(kg.has_entity(i) for i in ids)
    assert not any(kg.has_entity(i) for i in ["m.fffff", "m.", "", "m.0000", "m.000000"])
    assert kg.neighbors("m.00000", "r") == ["m.00001"]
    assert kg.neighbors("m.00000", "r", "in") == [ids[-1]]


def test_fuzzy_search_across_many_label_blocks(tmp_path: Path) -> None:
    rng = random.Random(3)
    labels = sorted({" ".join(rng.choice(SYLLABLES[:12]).title() + rng.choice(SYLLABLES[:12])
                              for _ in range(rng.randint(2, 3))) for _ in range(3000)})
    assert len(labels) > 50 * BLOCK_SIZE
    builder = EmbeddedKGBuilder()
    for i, label in enumerate(labels):
        builder.add_triple(f"e{i}", "r", "hub")
        builder.add_name(f"e{i}", label)
    kg = builder.build(tmp_path / "kg")
    found = 0
    for i in rng.sample(range(len(labels)), 40):
        word = labels[i].split()[0]
        typo = labels[i].replace(word, word[:-1] + ("x" if word[-1] != "x" else "y"), 1)  # one substitution
        hits = kg.search(typo, fuzzy=True, limit=10)
        assert all(0 < m.score <= 1 for m in hits)
        # Only labels holding a query word (within two edits) come back: a matched block does not pad the results.
        query_words = normalize_label(typo).split()
        assert all(any(OSA.distance(q, w) <= 2 for q in query_words for w in normalize_label(m.name).split())
                   for m in hits)
        found += f"e{i}" in {m.id for m in hits}
    assert found >= 36  # recall@10 of one-typo queries


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("aZ09 _-.,'\"\t\n\x0b\x0c\r\x1c\x1f\x00éÅßİ!")), max_size=14),
                max_size=30))
def test_batch_normalisation_equals_one_by_one(texts: list[str]) -> None:
    assert normalize_labels(texts) == [normalize_label(t) for t in texts]


def test_batch_normalisation_of_many_ascii_names() -> None:
    rng = np.random.default_rng(4)
    words = np.array(["Kal", "Dora", "Ven-ti", "O'Brien", "St.", "  ", "A_B", "x\ty"])
    texts = [" ".join(words[rng.integers(0, len(words), 3)]) for _ in range(5000)]
    assert normalize_labels(texts) == [normalize_label(t) for t in texts]
    texts[17] = "nul\x00inside"  # one text with the batch separator in it takes the one-by-one way alone
    assert normalize_labels(texts) == [normalize_label(t) for t in texts]
