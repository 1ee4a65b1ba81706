"""The KG core and its derived operations: the protocol split, the fair per-node shares, and what a BFS subgraph and a
batch of neighbours mean, checked on the generated KG in the embedded store (native) and over its primitives (generic).
Agreement across backends is tests/kg/test_backend_agreement.py."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgqa.errors import KGError
from kgqa.kg import KGCore, KnowledgeGraph
from kgqa.kg.base import ConstraintChain, Direction, Hop, Subgraph, is_literal
from kgqa.kg.derived import DerivedOps, fair_shares
from kgqa.kg.embedded import EmbeddedKG

if TYPE_CHECKING:  # conftest is not importable as a module at run time (tests/ is not a package)
    from conftest import GeneratedKG, PrimitivesOnly


@pytest.fixture(params=["native", "generic"])
def kg(request: pytest.FixtureRequest, embedded_kg: EmbeddedKG,
       primitives_only: type[PrimitivesOnly]) -> EmbeddedKG | PrimitivesOnly:
    """The embedded store's native derived operations, and the generic ones over its primitives."""
    return embedded_kg if request.param == "native" else primitives_only(embedded_kg)


# ---------------------------------------------------------------------------------------------------------------------
# The protocol split


def test_backends_are_cores_with_derived_operations(embedded_kg: EmbeddedKG,
                                                    primitives_only: type[PrimitivesOnly]) -> None:
    generic = primitives_only(embedded_kg)
    for backend in (embedded_kg, generic):
        assert isinstance(backend, KGCore) and isinstance(backend, KnowledgeGraph)
        assert isinstance(backend, DerivedOps)

    class CoreOnly:  # the primitives and nothing else: a core, not yet a KnowledgeGraph
        schema = embedded_kg.schema
        relations, neighbors, names = embedded_kg.relations, embedded_kg.neighbors, embedded_kg.names
        search, has_entity, has_relation = embedded_kg.search, embedded_kg.has_entity, embedded_kg.has_relation
        vocabulary, stats, close = embedded_kg.vocabulary, embedded_kg.stats, embedded_kg.close

    assert isinstance(CoreOnly(), KGCore) and not isinstance(CoreOnly(), KnowledgeGraph)
    # The generic versions ask only the primitives.
    before = generic.calls
    generic.run_chain(["m.e001"], (Hop("test.film.directed_by"),))
    assert generic.calls > before


def test_every_derived_operation_is_overridden_natively_by_both_backends() -> None:
    from kgqa.kg.sparql import SparqlKG

    derived = ["run_chain", "chain_relations", "constraint_values", "filter_by_constraint", "neighbors_many", "subgraph"]
    for backend in (EmbeddedKG, SparqlKG):
        for name in derived:
            assert getattr(backend, name) is not getattr(DerivedOps, name), f"{backend.__name__}.{name} is generic"


# ---------------------------------------------------------------------------------------------------------------------
# Fair shares


def test_fair_shares_examples() -> None:
    assert fair_shares([5, 1, 3], 6) == [3, 1, 2]
    assert fair_shares([5, 1, 3], 100) == [5, 1, 3]  # under the cap: everything
    assert fair_shares([5, 1, 3], 0) == [0, 0, 0]
    assert fair_shares([10, 10, 10], 4) == [2, 1, 1]  # the partial round goes to the first groups
    assert fair_shares([100, 1], 10) == [9, 1]  # a big relation does not crowd out a small one
    assert fair_shares([], 5) == []


@given(counts=st.lists(st.integers(0, 30), max_size=12), cap=st.integers(0, 60))
def test_fair_shares_is_the_round_robin(counts: list[int], cap: int) -> None:
    takes = fair_shares(counts, cap)
    assert sum(takes) == min(cap, sum(counts))
    assert all(0 <= t <= c for t, c in zip(takes, counts, strict=True))
    # Round robin, written out: item k of every group that has one, k = 0, 1, ..., until the cap.
    expected = [0] * len(counts)
    budget, k = cap, 0
    while budget and any(c > k for c in counts):
        for i, c in enumerate(counts):
            if budget and c > k:
                expected[i] += 1
                budget -= 1
        k += 1
    assert takes == expected


# ---------------------------------------------------------------------------------------------------------------------
# Subgraphs


def test_subgraph_depth_zero_is_the_seeds_in_the_kg(kg: KnowledgeGraph) -> None:
    sub = kg.subgraph(["m.e003", "m.unknown", "m.e003", "m.lonely1"], depth=0)
    assert sub == Subgraph([], ["m.e003", "m.lonely1"], False)


def test_subgraph_of_one_seed_at_depth_one_is_its_edges(kg: KnowledgeGraph, embedded_kg: EmbeddedKG,
                                                        generated: GeneratedKG) -> None:
    seed = "m.e001"
    sub = kg.subgraph([seed], depth=1)
    expected = {t for t in generated.triples if seed in (t[0], t[2]) and not kg.schema.is_noise_relation(t[1])}
    assert set(sub.triples) == expected and len(sub.triples) == len(expected)
    assert sub.truncated is False
    # Outgoing edges first, relations sorted, then incoming ones.
    out = [t for t in sub.triples if t[0] == seed]
    assert sub.triples[:len(out)] == out
    assert [r for _, r, _ in out] == sorted(r for _, r, _ in out)
    assert sub.nodes[0] == seed and set(sub.nodes) == {seed} | {n for t in expected for n in (t[0], t[2])}


def test_subgraph_is_a_breadth_first_search(kg: KnowledgeGraph, generated: GeneratedKG) -> None:
    sub = kg.subgraph(["m.e005"], depth=2, max_per_node=10_000)
    edges = [t for t in generated.triples if not kg.schema.is_noise_relation(t[1])]

    def around(nodes: set[str]) -> set[tuple[str, str, str]]:
        return {t for t in edges if t[0] in nodes or t[2] in nodes}

    first = around({"m.e005"})
    reached = {n for t in first for n in (t[0], t[2])}
    expandable = {n for n in reached if not is_literal(n)}
    assert set(sub.triples) == first | around(expandable)
    assert sub.truncated is False
    # Level by level: every triple of the first level comes before any of the second.
    assert set(sub.triples[:len(first)]) == first


def test_literals_reached_are_leaves_but_a_literal_seed_is_expanded(kg: KnowledgeGraph,
                                                                    generated: GeneratedKG) -> None:
    year = next(lit for lit in generated.literals if lit.startswith('"1967"^^'))
    sub = kg.subgraph([year], depth=1)
    assert sub.triples and all(t[2] == year for t in sub.triples)  # its incoming edges
    films = {h for h, _, _ in sub.triples}
    deeper = kg.subgraph([next(iter(sorted(films)))], depth=3, max_per_node=10_000)
    literals = {n for n in deeper.nodes if is_literal(n)}
    assert literals  # reached ...
    assert not any(h in literals for h, _, _ in deeper.triples)  # ... but never a head (literals have no out-edges)
    assert all(sum(1 for t in deeper.triples if t[2] == lit) >= 1 for lit in literals)
    # A literal reached at depth 1 is not expanded at depth 2: only the edge that reached it.
    two = kg.subgraph(["m.e000"], depth=2, max_per_node=10_000)
    lits = {n for n in two.nodes if is_literal(n)}
    level_one = {n for t in kg.subgraph(["m.e000"], depth=1, max_per_node=10_000).triples for n in (t[0], t[2])}
    for lit in lits & level_one:
        assert {h for h, _, t in two.triples if t == lit} <= level_one


def test_subgraph_follows_only_the_relations_asked_for_and_never_noise(kg: KnowledgeGraph) -> None:
    only = kg.subgraph(["m.e000"], depth=2, relations=["test.place.contained_by", "type.object.type"])
    assert only.triples and {r for _, r, _ in only.triples} == {"test.place.contained_by"}
    everything = kg.subgraph(["m.e000", "m.e007", "m.e014"], depth=2, max_per_node=10_000)
    assert not any(kg.schema.is_noise_relation(r) for _, r, _ in everything.triples)
    assert kg.subgraph(["m.e000"], depth=2, relations=[]).triples == []
    assert kg.subgraph(["m.e000"], relations=["test.film.no_such_relation"]).triples == []


def test_subgraph_caps_say_truncated(kg: KnowledgeGraph, embedded_kg: EmbeddedKG) -> None:
    hub_degree = len(embedded_kg.neighbors("m.e000", "test.place.contained_by", Direction.IN, limit=1000))
    assert hub_degree > 50
    cut = kg.subgraph(["m.e000"], depth=1, max_per_node=10)
    assert cut.truncated is True and len(cut.triples) == 10
    assert kg.subgraph(["m.e000"], depth=1, max_per_node=hub_degree + 10).truncated is False
    # The per-node share: a hub with one big relation and small ones keeps some of each.
    rich = kg.subgraph(["m.e001"], depth=1, max_per_node=10_000)
    relations = Counter(r for _, r, _ in rich.triples)
    assert len(relations) == 4 and max(relations.values()) > 1
    small = kg.subgraph(["m.e001"], depth=1, max_per_node=len(relations))
    assert small.truncated is True
    assert Counter(r for _, r, _ in small.triples) == dict.fromkeys(relations, 1)
    total = kg.subgraph(["m.e000"], depth=2, max_per_node=10_000, max_triples=25)
    assert total.truncated is True and len(total.triples) == 25
    exact = kg.subgraph(["m.e001"], depth=1, max_triples=len(rich.triples))
    assert exact.truncated is False and exact.triples == rich.triples  # filling the cap exactly is not a cut


def test_subgraph_is_deterministic(kg: KnowledgeGraph) -> None:
    args = (["m.e007", "m.cvt03", "m.e000"],)
    options = {"depth": 3, "max_per_node": 4, "max_triples": 200}
    assert kg.subgraph(*args, **options) == kg.subgraph(*args, **options)


def test_native_and_generic_subgraphs_are_identical(embedded_kg: EmbeddedKG, generated: GeneratedKG,
                                                    primitives_only: type[PrimitivesOnly]) -> None:
    generic = primitives_only(embedded_kg)
    for i, seed in enumerate(generated.topics):
        for depth, cap, total in ((1, 2, 50), (2, 5, 40), (3, 100, 10_000), (2, 0, 100)):
            options = {"depth": depth, "max_per_node": cap, "max_triples": total}
            assert embedded_kg.subgraph([seed, generated.pick(generated.topics, i * 7)], **options) == \
                generic.subgraph([seed, generated.pick(generated.topics, i * 7)], **options), (seed, options)


@pytest.mark.parametrize("bad", [{"depth": -1}, {"max_per_node": -2}, {"max_triples": 1.5}, {"depth": True},
                                 {"relations": "test.film.genre"}])
def test_subgraph_refuses_bad_arguments(kg: KnowledgeGraph, bad: dict[str, object]) -> None:
    with pytest.raises(KGError):
        kg.subgraph(["m.e001"], **bad)  # type: ignore[arg-type]
    with pytest.raises(KGError, match="not the string"):
        kg.subgraph("m.e001")


# ---------------------------------------------------------------------------------------------------------------------
# Batched neighbours and the other derived operations


def test_neighbors_many_is_neighbors_of_each(kg: KnowledgeGraph, embedded_kg: EmbeddedKG) -> None:
    entities = ["m.e000", "m.unknown", "m.e001", "m.e000", '"1967"']
    for direction in Direction:
        for limit in (0, 1, 3, 1000):
            got = kg.neighbors_many(entities, "test.place.contained_by", direction, limit)
            assert list(got) == ["m.e000", "m.unknown", "m.e001", '"1967"']
            for entity, found in got.items():
                assert found == embedded_kg.neighbors(entity, "test.place.contained_by", direction, limit=limit)
    assert kg.neighbors_many([], "test.film.genre") == {}


def test_neighbors_many_refuses_what_neighbors_refuses(kg: KnowledgeGraph) -> None:
    with pytest.raises(KGError, match="vocabulary"):
        kg.neighbors_many(["m.e001"], "test.film.no_such_relation")
    with pytest.raises(KGError, match="not the string"):
        kg.neighbors_many("m.e001", "test.film.genre")
    with pytest.raises(KGError, match="limit_per_entity"):
        kg.neighbors_many(["m.e001"], "test.film.genre", limit_per_entity=-1)


def test_generic_chain_operations_check_their_arguments(embedded_kg: EmbeddedKG,
                                                        primitives_only: type[PrimitivesOnly]) -> None:
    generic = primitives_only(embedded_kg)
    chain = (Hop("test.film.starring"), Hop("test.performance.actor"))
    with pytest.raises(KGError, match="not the string"):
        generic.run_chain("m.e001", chain)
    with pytest.raises(KGError, match="limit"):
        generic.run_chain(["m.e001"], chain, limit=-1)
    with pytest.raises(KGError, match="outside the main chain"):
        generic.constraint_values(["m.e001"], chain, ConstraintChain(3, (Hop("test.film.genre"),)))
    with pytest.raises(KGError, match="empty"):
        generic.constraint_values(["m.e001"], chain, ConstraintChain(1, ()))
    with pytest.raises(KGError, match="needs a constraint target"):
        generic.filter_by_constraint(["m.e001"], chain, ConstraintChain(1, (Hop("test.film.genre"),)))
    # The empty chain answers the topics that are in the KG, as the native chain does.
    assert generic.run_chain(["m.e001", "m.unknown", "m.lonely1"], ()).entities == ["m.e001", "m.lonely1"]
    assert set(embedded_kg.run_chain(["m.e001", "m.unknown", "m.lonely1"], ()).entities) == {"m.e001", "m.lonely1"}


def test_generic_frontier_cap_says_truncated(embedded_kg: EmbeddedKG, primitives_only: type[PrimitivesOnly]) -> None:
    generic = primitives_only(embedded_kg)
    generic.max_frontier = 5
    chain = (Hop("test.place.contained_by", Direction.IN), Hop("test.film.genre"))
    full = embedded_kg.run_chain(["m.e000"], chain)
    cut = generic.run_chain(["m.e000"], chain, bindings=True)
    assert cut.truncated is True and set(cut.entities) <= set(full.entities)
    assert cut.paths is not None and all(p[0] == "m.e000" and p[-1] in cut.entities for p in cut.paths)
