"""The embedded store and SPARQL endpoints (Oxigraph, Virtuoso) answer alike for the same data.

Each server is loaded once per session with the generated KG (conftest.py); hypothesis draws the questions. Order is not
part of the protocol across backends (SPARQL has none), so lists are compared as sets; when a cap cuts a result, both
backends must report ``truncated`` and return the same number of items, all from the full answer.

Every derived operation (chains, chain-end relations, constraint values and filtering, batched neighbours, subgraphs) is
checked in every form against the embedded store's native one (``derived_kg``): each server's native version, and the
generic version of :class:`~kgqa.kg.derived.DerivedOps` run over the primitives of the embedded store and of each server.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgqa.errors import KGError
from kgqa.kg.base import ChainResult, ConstraintChain, Direction, Hop, KnowledgeGraph, Subgraph, make_literal
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.loaders import load_metaqa, load_tsv
from kgqa.kg.servers import OxigraphServer, VirtuosoServer, export_ntriples
from kgqa.kg.sparql import SparqlKG
from kgqa.kg.sparql import subgraph as sparql_subgraph

if TYPE_CHECKING:  # conftest is not importable as a module at run time (tests/ is not a package)
    from conftest import GeneratedKG, PrimitivesOnly

DIRECTIONS = st.sampled_from([Direction.OUT, Direction.IN])
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# Draws are indexes into the generated KG's pools (the KG itself comes from a session fixture).
index = st.integers(0, 1_000_000)
hop_draws = st.tuples(index, DIRECTIONS)
chain_draws = st.lists(hop_draws, min_size=0, max_size=3)
topic_draws = st.lists(index, min_size=1, max_size=3)


def _chain_from_walk(kg: EmbeddedKG, start: str, length: int, choices: Sequence[int]) -> tuple[Hop, ...]:
    """A chain that exists in the KG (random chains are mostly empty): walk from ``start`` picking edges."""
    chain: list[Hop] = []
    current = [start]
    for step in range(length):
        options = [(r, d) for d in (Direction.OUT, Direction.IN) for e in current[:5] for r in kg.relations(e, d)]
        options += [(r, d) for d in (Direction.OUT, Direction.IN) for e in current[:5]
                     for r in kg.vocabulary() if kg.schema.is_noise_relation(r) and kg.neighbors(e, r, d, limit=1)]
        if not options:
            break
        rel, direction = options[choices[step] % len(options)]
        chain.append(Hop(rel, direction))
        current = kg.run_chain(current, (Hop(rel, direction),)).entities
    return tuple(chain)


walks = st.tuples(index, st.integers(0, 3), st.lists(st.integers(0, 10_000), min_size=3, max_size=3))


def _walk(kg: EmbeddedKG, gen: GeneratedKG, draw: tuple[int, int, list[int]]) -> tuple[str, tuple[Hop, ...]]:
    start = gen.pick(gen.topics[:-5], draw[0])
    return start, _chain_from_walk(kg, start, draw[1], draw[2])


def assert_same_result(expected: ChainResult, got: ChainResult, full: set[str] | None = None) -> None:
    if not expected.truncated:
        assert set(got.entities) == set(expected.entities)
        assert len(got.entities) == len(expected.entities)  # distinct on both sides
        assert got.truncated is False
    else:
        assert got.truncated is True
        assert len(got.entities) == len(expected.entities)
        if full is not None:
            assert set(got.entities) <= full


# ---------------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(node=index, direction=DIRECTIONS)
def test_relations_agree(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG, node: int,
                         direction: Direction) -> None:
    entity = generated.pick(generated.nodes, node)
    assert sparql_kg.relations(entity, direction) == embedded_kg.relations(entity, direction)


@SETTINGS
@given(node=index, relation=index, direction=DIRECTIONS, limit=st.sampled_from([1, 2, 5, 100]))
def test_neighbors_agree(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG, node: int,
                         relation: int, direction: Direction, limit: int) -> None:
    entity = generated.pick(generated.nodes, node)
    rel = generated.pick(generated.relations, relation)
    full = set(embedded_kg.neighbors(entity, rel, direction, limit=10_000))
    got = sparql_kg.neighbors(entity, rel, direction, limit=limit)
    assert len(got) == len(set(got)) == min(limit, len(full))
    assert set(got) <= full
    if len(full) <= limit:
        assert set(got) == full


@SETTINGS
@given(topics=topic_draws, walk=walks, bindings=st.booleans())
def test_chains_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG, topics: list[int],
                      walk: tuple[int, int, list[int]], bindings: bool) -> None:
    start, chain = _walk(embedded_kg, generated, walk)
    ids = [start, *(generated.pick(generated.topics, t) for t in topics)]
    expected = embedded_kg.run_chain(ids, chain, bindings=bindings)
    got = derived_kg.run_chain(ids, chain, bindings=bindings)
    assert_same_result(expected, got)
    if bindings:
        assert expected.paths is not None and got.paths is not None
        assert set(got.paths) == set(expected.paths)
        assert len(got.paths) == len(expected.paths)
        assert all(len(p) == len(chain) + 1 for p in got.paths)
    else:
        assert got.paths is None


@SETTINGS
@given(topics=topic_draws, chain=chain_draws)
def test_random_chains_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                             topics: list[int], chain: list[tuple[int, Direction]]) -> None:
    ids = [generated.pick(generated.topics, t) for t in topics]
    hops = tuple(Hop(generated.pick(generated.relations, r), d) for r, d in chain)
    assert_same_result(embedded_kg.run_chain(ids, hops), derived_kg.run_chain(ids, hops))


@SETTINGS
@given(walk=walks, limit=st.sampled_from([1, 3, 10]))
def test_chain_limits_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                            walk: tuple[int, int, list[int]], limit: int) -> None:
    start, chain = _walk(embedded_kg, generated, walk)
    full = set(embedded_kg.run_chain([start], chain).entities)
    expected = embedded_kg.run_chain([start], chain, limit=limit)
    got = derived_kg.run_chain([start], chain, limit=limit)
    assert_same_result(expected, got, full)
    with_paths = derived_kg.run_chain([start], chain, limit=limit, bindings=True)
    assert_same_result(expected, with_paths, full)
    assert with_paths.paths is not None
    assert {p[-1] for p in with_paths.paths} == set(with_paths.entities)


@SETTINGS
@given(topics=topic_draws, walk=walks, direction=DIRECTIONS)
def test_chain_relations_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                               topics: list[int], walk: tuple[int, int, list[int]], direction: Direction) -> None:
    start, chain = _walk(embedded_kg, generated, walk)
    ids = [start, *(generated.pick(generated.topics, t) for t in topics)]
    assert derived_kg.chain_relations(ids, chain, direction) == embedded_kg.chain_relations(ids, chain, direction)


@SETTINGS
@given(walk=walks, source_pick=st.integers(0, 10), constraint_walk=st.lists(st.integers(0, 10_000), min_size=2,
                                                                            max_size=2),
       constraint_length=st.integers(1, 2), target_pick=st.integers(0, 10_000))
def test_constraints_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                           walk: tuple[int, int, list[int]], source_pick: int, constraint_walk: list[int],
                           constraint_length: int, target_pick: int) -> None:
    topic, main = _walk(embedded_kg, generated, walk)
    source = source_pick % (len(main) + 1)
    # A constraint chain that leaves some entity at the source position (so values exist, mostly).
    at_source = embedded_kg.run_chain([topic], main[:source]).entities or [topic]
    constraint_chain = _chain_from_walk(embedded_kg, at_source[target_pick % len(at_source)], constraint_length,
                                        constraint_walk)
    if not constraint_chain:
        constraint_chain = (Hop("test.film.release_year", Direction.OUT),)
    constraint = ConstraintChain(source, constraint_chain)
    expected = embedded_kg.constraint_values([topic], main, constraint)
    got = derived_kg.constraint_values([topic], main, constraint)
    assert_same_result(expected, got)

    values = expected.entities or ["m.unknown"]
    target = values[target_pick % len(values)]
    plain_1967 = make_literal("1967")  # a plain "1967" must match the gYear and integer 1967 too
    for tgt in {target, plain_1967}:
        targeted = ConstraintChain(source, constraint_chain, tgt)
        expected_f = embedded_kg.filter_by_constraint([topic], main, targeted)
        got_f = derived_kg.filter_by_constraint([topic], main, targeted)
        assert_same_result(expected_f, got_f)
        assert set(got_f.entities) <= set(embedded_kg.run_chain([topic], main).entities)


def _is_generic_over(kg: object, inner: object) -> bool:
    return getattr(kg, "inner", None) is inner


@SETTINGS
@given(nodes=st.lists(index, min_size=0, max_size=12), relation=index, direction=DIRECTIONS,
       limit=st.sampled_from([0, 1, 2, 5, 100]))
def test_neighbors_many_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                              nodes: list[int], relation: int, direction: Direction, limit: int) -> None:
    entities = [generated.pick(generated.topics + generated.nodes, i) for i in nodes]
    rel = generated.pick(generated.relations, relation)
    expected = embedded_kg.neighbors_many(entities, rel, direction, limit)
    got = derived_kg.neighbors_many(entities, rel, direction, limit)
    assert list(got) == list(expected) == list(dict.fromkeys(entities))  # every entity asked for, in order
    for entity, found in got.items():
        assert expected[entity] == embedded_kg.neighbors(entity, rel, direction, limit=limit)
        full = set(embedded_kg.neighbors(entity, rel, direction, limit=10_000))
        assert len(found) == len(set(found)) == min(limit, len(full))
        assert set(found) <= full
        if len(full) <= limit:
            assert set(found) == full
    if _is_generic_over(derived_kg, embedded_kg):
        assert got == expected  # same primitives, same order


@SETTINGS
@given(seeds=st.lists(index, min_size=0, max_size=3), depth=st.integers(0, 3),
       max_per_node=st.sampled_from([0, 1, 3, 100]), max_triples=st.sampled_from([0, 5, 40, 10_000]),
       only=st.one_of(st.none(), st.lists(index, min_size=0, max_size=4)))
def test_subgraph_agrees(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG,
                         seeds: list[int], depth: int, max_per_node: int, max_triples: int, only: list[int] | None) -> None:
    seed_ids = [generated.pick(generated.topics, i) for i in seeds]
    pool = [*generated.relations, "test.film.no_such_relation"]  # noise relations included: never followed
    relations = None if only is None else [generated.pick(pool, i) for i in only]
    options = {"depth": depth, "max_per_node": max_per_node, "max_triples": max_triples, "relations": relations}
    expected = embedded_kg.subgraph(seed_ids, **options)
    got = derived_kg.subgraph(seed_ids, **options)
    present = [s for s in dict.fromkeys(seed_ids) if embedded_kg.has_entity(s)]
    for sub in (expected, got):
        assert isinstance(sub, Subgraph)
        assert_valid_subgraph(sub, embedded_kg, generated, present, max_triples, relations)
    if _is_generic_over(derived_kg, embedded_kg):
        assert got == expected  # same primitives: the same triples and nodes in the same order, truncated alike
    assert got.truncated is expected.truncated  # the first cap to cut is met at the same point by every form
    if not expected.truncated:
        assert set(got.triples) == set(expected.triples)
        assert len(got.triples) == len(expected.triples)
        assert set(got.nodes) == set(expected.nodes)


def assert_valid_subgraph(sub: Subgraph, kg: EmbeddedKG, generated: GeneratedKG, seeds: list[str], max_triples: int,
                          relations: list[str] | None) -> None:
    """What holds of any subgraph, cut or not: real triples, distinct, within the caps, noise left out, the seeds
    first, every end of a triple a node."""
    real = set(generated.triples)
    assert len(sub.triples) == len(set(sub.triples)) <= max_triples
    assert set(sub.triples) <= real
    assert not any(kg.schema.is_noise_relation(r) for _, r, _ in sub.triples)
    if relations is not None:
        assert {r for _, r, _ in sub.triples} <= set(relations)
    assert sub.nodes[:len(seeds)] == seeds
    assert len(sub.nodes) == len(set(sub.nodes))
    assert {n for h, _, t in sub.triples for n in (h, t)} <= set(sub.nodes)
    assert set(sub.nodes) - set(seeds) <= {n for h, _, t in sub.triples for n in (h, t)}


def test_neighbors_many_of_a_hub_takes_a_limit_per_entity(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG) -> None:
    """The hub's 79 incoming edges pass the batch's total cap: the endpoint is asked again with a LIMIT per entity."""
    entities = ["m.e000", "m.e001", "m.e002", "m.unknown"]
    relation = "test.place.contained_by"
    for limit in (1, 2, 5):
        sent = sparql_kg.queries_sent
        got = sparql_kg.neighbors_many(entities, relation, Direction.IN, limit)
        assert sparql_kg.queries_sent == sent + 2  # the batch query hit its cap, then one query with a LIMIT each
        expected = embedded_kg.neighbors_many(entities, relation, Direction.IN, limit)
        assert list(got) == entities
        for entity in entities:
            full = set(embedded_kg.neighbors(entity, relation, Direction.IN, limit=1000))
            assert len(got[entity]) == len(expected[entity]) == min(limit, len(full))
            assert set(got[entity]) <= full


@pytest.mark.parametrize("cap", [1, 3, 10])
def test_subgraph_of_a_hub_counts_edges_per_relation(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, cap: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With no slack in a level's first query, a node over its cap is counted per relation, then each kept group is
    fetched (whole, or with a LIMIT of its own): every relation keeps as many edges as in the embedded store."""
    monkeypatch.setattr(sparql_subgraph, "_MIN_LEVEL_ROWS", 0)
    for seed in ("m.e000", "m.e001", "m.cvt01"):
        expected = embedded_kg.subgraph([seed], depth=1, max_per_node=cap)
        got = sparql_kg.subgraph([seed], depth=1, max_per_node=cap)
        assert got.truncated is expected.truncated
        assert len(got.triples) == len(expected.triples) <= cap

        def shares(sub: Subgraph, seed: str = seed) -> Counter[tuple[str, bool]]:
            return Counter((r, h == seed) for h, r, _ in sub.triples)

        assert shares(got) == shares(expected)  # the same fair share of every relation and direction
        assert set(got.triples) <= set(embedded_kg.subgraph([seed], depth=1, max_per_node=10_000).triples)
    deeper = embedded_kg.subgraph(["m.e001", "m.e000"], depth=2, max_per_node=cap, max_triples=60)
    got = sparql_kg.subgraph(["m.e001", "m.e000"], depth=2, max_per_node=cap, max_triples=60)
    assert got.truncated is deeper.truncated is True
    assert got.nodes[:2] == ["m.e001", "m.e000"] and len(got.triples) <= 60


@SETTINGS
@given(ids=st.lists(index, min_size=0, max_size=12))
def test_names_agree(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG, ids: list[int]) -> None:
    picked = [generated.pick(generated.nodes, i) for i in ids]
    assert sparql_kg.names(picked) == embedded_kg.names(picked)


def test_all_names_agree_in_one_call(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG) -> None:
    # More than one VALUES batch (100 ids per query).
    assert len(generated.nodes) > 100
    assert sparql_kg.names(generated.nodes) == embedded_kg.names(generated.nodes)


@SETTINGS
@given(value=st.text(max_size=20))
def test_arbitrary_literal_targets_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, value: str) -> None:
    """Any text as a literal target is escaped, never spliced: the two backends still agree (mostly on 'nothing')."""
    main = (Hop("test.place.contained_by", Direction.IN),)
    constraint = ConstraintChain(1, (Hop("test.film.tagline", Direction.OUT),), make_literal(value))
    expected = embedded_kg.filter_by_constraint(["m.e000"], main, constraint)
    assert derived_kg.filter_by_constraint(["m.e000"], main, constraint).entities == expected.entities


def test_every_literal_round_trips(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG) -> None:
    """Typed, language-tagged and escaped literals come back in exactly the N-Triples form the embedded store holds."""
    for literal in generated.literals:
        assert sparql_kg.relations(literal, Direction.IN) == embedded_kg.relations(literal, Direction.IN), literal
        for relation in embedded_kg.relations(literal, Direction.IN):
            heads = sparql_kg.neighbors(literal, relation, Direction.IN, limit=1000)
            assert set(heads) == set(embedded_kg.neighbors(literal, relation, Direction.IN, limit=1000))
            assert literal in sparql_kg.run_chain(heads, (Hop(relation, Direction.OUT),)).entities


def test_batches_of_literals_agree(embedded_kg: EmbeddedKG, derived_kg: KnowledgeGraph, generated: GeneratedKG) -> None:
    """Literals of every kind (language-tagged ones too) in one batch with entities: Virtuoso matches nothing for a
    multi-row, multi-variable VALUES that holds a language-tagged literal, so such rows must travel apart."""
    batch = [*generated.literals, "m.e001", "m.e000"]
    for relation in sorted({r for lit in generated.literals for r in embedded_kg.relations(lit, Direction.IN)}):
        expected = embedded_kg.neighbors_many(batch, relation, Direction.IN, 1000)
        got = derived_kg.neighbors_many(batch, relation, Direction.IN, 1000)
        assert {e: set(v) for e, v in got.items()} == {e: set(v) for e, v in expected.items()}, relation
    expected_sub = embedded_kg.subgraph(batch, depth=2, max_per_node=1000)
    got_sub = derived_kg.subgraph(batch, depth=2, max_per_node=1000)
    assert got_sub.truncated is expected_sub.truncated is False
    assert set(got_sub.triples) == set(expected_sub.triples) and set(got_sub.nodes) == set(expected_sub.nodes)
    assert got_sub.nodes[:len(batch)] == expected_sub.nodes[:len(batch)] == batch


def test_unknown_relation_is_refused_once_the_vocabulary_is_known(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG) -> None:
    chain = (Hop("test.film.no_such_relation", Direction.OUT),)
    with pytest.raises(KGError, match="vocabulary"):
        embedded_kg.run_chain(["m.e001"], chain)
    fresh = SparqlKG(sparql_kg.endpoint, schema="freebase", default_graph=sparql_kg.default_graph)
    try:
        assert fresh.run_chain(["m.e001"], chain).entities == []  # before: valid grammar, simply no edges
        vocabulary = fresh.vocabulary()
        assert set(embedded_kg.vocabulary()) <= set(vocabulary)
        with pytest.raises(KGError, match="vocabulary"):
            fresh.run_chain(["m.e001"], chain)
        assert fresh.has_relation("test.film.starring") and not fresh.has_relation("test.film.no_such_relation")
    finally:
        fresh.close()


def test_stats_agree(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG) -> None:
    expected, got = embedded_kg.stats(), sparql_kg.stats()
    assert (got.triples, got.entities, got.literals, got.names) == (
        expected.triples, expected.entities, expected.literals, expected.names)
    assert got.relations == expected.relations


def test_search_exact_agrees(embedded_kg: EmbeddedKG, sparql_kg: SparqlKG, generated: GeneratedKG) -> None:
    for label in ("Entity 7", "entity 7", "Lonely One", "Amélie 0", 'The "Quoted" One 9', "Nobody At All"):
        expected = {(m.id, m.name, m.score) for m in embedded_kg.search(label)}
        assert {(m.id, m.name, m.score) for m in sparql_kg.search(label)} == expected, label


@pytest.mark.parametrize("server", ["oxigraph", pytest.param("virtuoso", marks=pytest.mark.virtuoso)])
def test_batches_of_language_tagged_literals_agree(tmp_path: Path, server: str, request: pytest.FixtureRequest,
                                                   primitives_only: type[PrimitivesOnly]) -> None:
    """Thousands of language-tagged literals (the case that makes Virtuoso 7 drop every answer of a multi-row,
    multi-variable VALUES holding one): batched neighbours and subgraphs of literals and entities mixed."""
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triples((f"m.x{i}", "test.label.like", make_literal(f"Label {i % 1000}", lang="en" if i % 4 else "fr"))
                        for i in range(3000))
    builder.add_triples((f"m.x{i}", "test.link.next", f"m.x{i + 1}") for i in range(0, 3000, 7))
    kg = builder.build(tmp_path / "store")
    nt = tmp_path / "lang.nt"
    export_ntriples(kg, nt)
    with contextlib.ExitStack() as stack:
        if server == "virtuoso":
            virtuoso: VirtuosoServer = request.getfixturevalue("virtuoso_server")
            graph: str | None = "http://kgqa.local/test/lang"
            virtuoso.load([nt], graph, fulltext=False)
            url = virtuoso.url
        else:
            url = stack.enter_context(OxigraphServer([nt], tmp_path / "server")).url
            graph = None
        remote = stack.enter_context(SparqlKG(url, schema="freebase", default_graph=graph))
        batch = [make_literal("Label 1", lang="en"), make_literal("Label 0", lang="fr"), make_literal("Label 3", lang="en"),
                 "m.x7", "m.x8", make_literal("Label 9", lang="de")]  # the last is in no triple
        expected = kg.neighbors_many(batch, "test.label.like", Direction.IN, 10)
        assert sum(len(v) for v in expected.values()) >= 5
        for form in (remote, primitives_only(remote)):
            got = form.neighbors_many(batch, "test.label.like", Direction.IN, 10)
            assert {e: set(v) for e, v in got.items()} == {e: set(v) for e, v in expected.items()}
            sub = form.subgraph(batch, depth=2, max_per_node=50)
            want = kg.subgraph(batch, depth=2, max_per_node=50)
            assert sub.truncated is want.truncated is False
            assert set(sub.triples) == set(want.triples) and sub.nodes[:5] == want.nodes[:5] == batch[:5]


# ---------------------------------------------------------------------------------------------------------------------
# Real data: Freebase gold-path triples and a slice of the MetaQA KB (generic schema: labels as percent-encoded IRIs)


@pytest.fixture(scope="module", params=["freebase", "metaqa"])
def real_kg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, EmbeddedKG, Path]:
    """A real KG (built once per module) and its N-Triples export."""
    which: str = request.param
    shared_data: Callable[..., Path] = request.getfixturevalue("shared_data")
    tmp = tmp_path_factory.mktemp(f"real-{which}")
    if which == "freebase":
        builder = EmbeddedKGBuilder(schema="freebase")
        load_tsv(builder, shared_data("freebase", "goldpath_triples.tsv"), names=shared_data("freebase", "names.tsv"))
    else:
        part = tmp / "kb-part.txt"
        with shared_data("metaqa", "kb.txt").open(encoding="utf-8") as src:
            part.write_text("".join(line for _, line in zip(range(4000), src, strict=False)), encoding="utf-8")
        builder = EmbeddedKGBuilder(schema="generic")
        load_metaqa(builder, part)
    kg = builder.build(tmp / "store")
    nt = tmp / "kg.nt"
    export_ntriples(kg, nt)
    return which, kg, nt


@pytest.mark.parametrize("server", ["oxigraph", pytest.param("virtuoso", marks=pytest.mark.virtuoso)])
def test_real_data_agrees(tmp_path: Path, real_kg: tuple[str, EmbeddedKG, Path], server: str,
                          request: pytest.FixtureRequest, primitives_only: type[PrimitivesOnly]) -> None:
    which, kg, nt = real_kg
    rng = random.Random(3)
    entities = sorted({h for h, _, _ in kg.iter_triples()})
    sample = rng.sample(entities, 25)
    with contextlib.ExitStack() as stack:
        if server == "virtuoso":
            # The session server, with the data in a graph of its own (a fresh Virtuoso takes ~8 s to create).
            virtuoso: VirtuosoServer = request.getfixturevalue("virtuoso_server")
            graph: str | None = f"http://kgqa.local/test/{which}"
            virtuoso.load([nt], graph, fulltext=False)
            url = virtuoso.url
        else:
            url = stack.enter_context(OxigraphServer([nt], tmp_path / "server")).url
            graph = None
        remote = stack.enter_context(SparqlKG(url, schema=kg.schema, default_graph=graph))
        assert remote.names(sample) == kg.names(sample)
        for entity in sample:
            for direction in (Direction.OUT, Direction.IN):
                relations = kg.relations(entity, direction)
                assert remote.relations(entity, direction) == relations
                for relation in relations[:2]:
                    chain = (Hop(relation, direction),)
                    second = kg.chain_relations([entity], chain, Direction.OUT)
                    assert remote.chain_relations([entity], chain, Direction.OUT) == second
                    if second:
                        chain = (*chain, Hop(second[0], Direction.OUT))
                    assert_same_result(kg.run_chain([entity], chain), remote.run_chain([entity], chain))
        # The derived operations in every form: the remote's native ones, and the generic ones over the remote's and
        # the store's primitives.
        forms = [remote, primitives_only(remote), primitives_only(kg)]
        for entity in sample[:8]:
            relation = (kg.relations(entity, Direction.OUT) or kg.relations(entity, Direction.IN) or [None])[0]
            if relation is None:
                continue
            direction = Direction.OUT if relation in kg.relations(entity, Direction.OUT) else Direction.IN
            chain = (Hop(relation, direction),)
            for form in forms:
                assert form.chain_relations([entity], chain, Direction.IN) == kg.chain_relations([entity], chain,
                                                                                                 Direction.IN)
                assert_same_result(kg.run_chain([entity], chain), form.run_chain([entity], chain))
                many = form.neighbors_many(sample, relation, direction, 3)
                assert list(many) == sample
                assert all(set(v) <= set(kg.neighbors(e, relation, direction, limit=10_000)) for e, v in many.items())
        for seeds in ([sample[0]], sample[1:3]):
            expected = kg.subgraph(seeds, depth=2, max_per_node=8, max_triples=300)
            for form in forms:
                got = form.subgraph(seeds, depth=2, max_per_node=8, max_triples=300)
                assert got.truncated is expected.truncated
                assert got.nodes[:len(seeds)] == expected.nodes[:len(seeds)]
                if not expected.truncated:
                    assert set(got.triples) == set(expected.triples) and set(got.nodes) == set(expected.nodes)
