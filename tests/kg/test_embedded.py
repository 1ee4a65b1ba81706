"""The embedded store on a small hand-built Freebase-style KG: every protocol operation, persistence and the caps."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.errors import DataError, KGError
from kgqa.kg import ConstraintChain, Direction, KnowledgeGraph, parse_chain
from kgqa.kg.base import make_literal
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder

YEAR = "http://www.w3.org/2001/XMLSchema#gYear"
Y2010 = make_literal("2010", datatype=YEAR)
Y2014 = make_literal("2014", datatype=YEAR)

TRIPLES = [
    ("m.nolan", "film.director.film", "m.inception"),
    ("m.nolan", "film.director.film", "m.interstellar"),
    ("m.nolan", "film.director.film", "m.memento"),
    ("m.inception", "film.film.directed_by", "m.nolan"),
    ("m.inception", "film.film.initial_release_date", Y2010),
    ("m.interstellar", "film.film.initial_release_date", Y2014),
    ("m.memento", "film.film.initial_release_date", make_literal("2000")),
    ("m.inception", "film.film.starring", "m.cvt1"),
    ("m.cvt1", "film.performance.actor", "m.dicaprio"),
    ("m.cvt1", "film.performance.character", "m.cobb"),
    ("m.inception", "film.film.starring", "m.cvt2"),
    ("m.cvt2", "film.performance.actor", "m.page"),
    ("m.cvt2", "film.performance.character", "m.ariadne"),
    ("m.interstellar", "film.film.starring", "m.cvt3"),
    ("m.cvt3", "film.performance.actor", "m.mcconaughey"),
    ("m.inception", "type.object.type", "m.film_type"),
    ("m.dicaprio", "people.person.place_of_birth", "m.la"),
    ("m.la", "location.location.containedby", "m.usa"),
]
NAMES = {
    "m.nolan": "Christopher Nolan", "m.inception": "Inception", "m.interstellar": "Interstellar",
    "m.memento": "Memento", "m.dicaprio": "Leonardo DiCaprio", "m.page": "Elliot Page", "m.cobb": "Dom Cobb",
    "m.ariadne": "Ariadne", "m.mcconaughey": "Matthew McConaughey", "m.la": "Los Angeles", "m.usa": "United States",
    "m.film_type": "Film", "m.lonely": "Amélie Poulain",
}


@pytest.fixture(scope="module")
def kg(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triples(TRIPLES)
    builder.add_triple("m.nolan", "film.director.film", "m.inception")  # a duplicate is stored once
    for entity, name in NAMES.items():
        builder.add_name(entity, name)
    return builder.build(tmp_path_factory.mktemp("kg") / "store")


def test_satisfies_protocol(kg: EmbeddedKG) -> None:
    assert isinstance(kg, KnowledgeGraph)


def test_stats_count_distinct_triples_entities_and_literals(kg: EmbeddedKG) -> None:
    stats = kg.stats()
    assert stats.triples == len(TRIPLES)
    assert stats.literals == 3
    assert stats.relations == 9
    # every node that is not a literal, the nameless CVTs and the isolated named entity included
    assert stats.entities == 16


def test_relations_by_direction_hide_noise(kg: EmbeddedKG) -> None:
    assert kg.relations("m.inception", Direction.OUT) == [
        "film.film.directed_by", "film.film.initial_release_date", "film.film.starring"]
    assert "type.object.type" in kg.vocabulary()
    assert kg.relations("m.nolan", "in") == ["film.film.directed_by"]
    assert kg.relations("m.unknown") == []


def test_neighbors_respect_direction_and_limit(kg: EmbeddedKG) -> None:
    assert set(kg.neighbors("m.nolan", "film.director.film")) == {"m.inception", "m.interstellar", "m.memento"}
    assert len(kg.neighbors("m.nolan", "film.director.film", limit=2)) == 2
    assert kg.neighbors("m.usa", "location.location.containedby", Direction.IN) == ["m.la"]
    with pytest.raises(KGError, match="not in this KG's vocabulary"):
        kg.neighbors("m.nolan", "film.film.nonexistent")


def test_chain_through_cvt_keeps_intermediates_as_variables(kg: EmbeddedKG) -> None:
    chain = parse_chain("film.director.film,film.film.starring,film.performance.actor")
    result = kg.run_chain(["m.nolan"], chain)
    assert set(result.entities) == {"m.dicaprio", "m.page", "m.mcconaughey"}
    assert not result.truncated
    assert result.paths is None


def test_chain_bindings_are_complete_paths(kg: EmbeddedKG) -> None:
    chain = parse_chain("film.film.starring,film.performance.actor,people.person.place_of_birth")
    result = kg.run_chain(["m.inception"], chain, bindings=True)
    assert result.entities == ["m.la"]
    assert result.paths == [("m.inception", "m.cvt1", "m.dicaprio", "m.la")]


def test_incoming_hops(kg: EmbeddedKG) -> None:
    result = kg.run_chain(["m.usa"], parse_chain("^location.location.containedby,^people.person.place_of_birth"))
    assert result.entities == ["m.dicaprio"]


def test_limit_truncates_and_says_so(kg: EmbeddedKG) -> None:
    result = kg.run_chain(["m.nolan"], parse_chain("film.director.film"), limit=2)
    assert len(result.entities) == 2
    assert result.truncated


def test_frontier_cap_truncates(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    for i in range(50):
        builder.add_triple("hub", "r", f"e{i}")
        builder.add_triple(f"e{i}", "s", "end")
    kg = EmbeddedKG.open(builder.build(tmp_path / "hub").directory, max_frontier=10)
    result = kg.run_chain(["hub"], parse_chain("r,s"))
    assert result.entities == ["end"]
    assert result.truncated


def test_chain_relations_without_naming_entities(kg: EmbeddedKG) -> None:
    chain = parse_chain("film.director.film,film.film.starring")
    assert kg.chain_relations(["m.nolan"], chain) == ["film.performance.actor", "film.performance.character"]
    assert kg.chain_relations(["m.nolan"], chain, Direction.IN) == ["film.film.starring"]
    assert kg.chain_relations(["m.nolan"], ()) == ["film.director.film"]


def test_constraint_on_candidate_with_literal_target(kg: EmbeddedKG) -> None:
    main = parse_chain("film.director.film")
    constraint = ConstraintChain(source=1, chain=parse_chain("film.film.initial_release_date"))
    values = kg.constraint_values(["m.nolan"], main, constraint)
    assert set(values.entities) == {Y2010, Y2014, make_literal("2000")}
    # A plain "2010" matches the typed literal on its lexical value.
    kept = kg.filter_by_constraint(["m.nolan"], main, ConstraintChain(1, constraint.chain, make_literal("2010")))
    assert kept.entities == ["m.inception"]


def test_constraint_from_intermediate_entity(kg: EmbeddedKG) -> None:
    # Who acted in Nolan's films as the character Dom Cobb: the constraint starts at the CVT (position 2).
    main = parse_chain("film.director.film,film.film.starring,film.performance.actor")
    constraint = ConstraintChain(source=2, chain=parse_chain("film.performance.character"), target="m.cobb")
    assert kg.filter_by_constraint(["m.nolan"], main, constraint).entities == ["m.dicaprio"]
    recalled = kg.constraint_values(["m.nolan"], main, ConstraintChain(2, constraint.chain))
    assert set(recalled.entities) == {"m.cobb", "m.ariadne"}


def test_constraint_from_topic_and_bad_positions(kg: EmbeddedKG) -> None:
    main = parse_chain("film.director.film")
    on_topic = ConstraintChain(0, parse_chain("film.director.film"), "m.memento")
    assert set(kg.filter_by_constraint(["m.nolan"], main, on_topic).entities) == {
        "m.inception", "m.interstellar", "m.memento"}
    assert kg.filter_by_constraint(["m.nolan"], main, ConstraintChain(0, on_topic.chain, "m.nobody")).entities == []
    with pytest.raises(KGError, match="outside the main chain"):
        kg.filter_by_constraint(["m.nolan"], main, ConstraintChain(2, on_topic.chain, "m.memento"))
    with pytest.raises(KGError, match="needs a constraint target"):
        kg.filter_by_constraint(["m.nolan"], main, ConstraintChain(1, on_topic.chain))


def test_names_of_entities_cvts_and_literals(kg: EmbeddedKG) -> None:
    names = kg.names(["m.inception", "m.cvt1", Y2010, "m.unknown"])
    assert names == {"m.inception": "Inception", "m.cvt1": None, Y2010: "2010", "m.unknown": None}
    assert kg.schema.is_cvt("m.cvt1", names["m.cvt1"])


def test_exact_and_fuzzy_search(kg: EmbeddedKG) -> None:
    assert [m.id for m in kg.search("inception")] == ["m.inception"]
    assert [m.id for m in kg.search("AMELIE poulain!")] == ["m.lonely"]
    fuzzy = kg.search("Cristopher Nolen", fuzzy=True, limit=3)
    assert fuzzy and fuzzy[0].id == "m.nolan" and 0 < fuzzy[0].score < 1
    assert kg.search("", fuzzy=True) == []
    assert kg.search("zzzzqqqq", fuzzy=True) == []


def test_persistence_reopen_and_iteration(kg: EmbeddedKG) -> None:
    again = EmbeddedKG.open(kg.directory)
    assert sorted(again.iter_triples()) == sorted(TRIPLES)
    assert dict(again.iter_names()) == NAMES


def test_open_rejects_non_store(tmp_path: Path) -> None:
    with pytest.raises(KGError, match="not a kgqa embedded KG"):
        EmbeddedKG.open(tmp_path)


def test_builder_rejects_bad_triples_and_foreign_output_dir(tmp_path: Path) -> None:
    builder = EmbeddedKGBuilder()
    with pytest.raises(DataError, match="empty field"):
        builder.add_triple("a", "", "b")
    with pytest.raises(DataError, match="literal cannot be the head"):
        builder.add_triple('"x"', "r", "b")
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "precious.txt").write_text("keep me")
    builder.add_triple("a", "r", "b")
    with pytest.raises(DataError, match="not an embedded KG to overwrite"):
        builder.build(tmp_path / "occupied")
    assert (tmp_path / "occupied" / "precious.txt").read_text() == "keep me"


def test_empty_kg(tmp_path: Path) -> None:
    kg = EmbeddedKGBuilder().build(tmp_path / "empty")
    assert kg.stats().triples == 0
    assert kg.relations("x") == []
    assert kg.search("x", fuzzy=True) == []


def test_parse_chain_rejects_a_caret_inside_a_relation() -> None:
    """A missing comma ("a ^b") is two hops written as one; read silently, it would ask the KG for a relation named
    "a ^b" and find nothing."""
    from kgqa.errors import KGError

    assert [str(h) for h in parse_chain(" a , ^ b ")] == ["a", "^b"]
    for text in ("a ^b", "a^b", "^a ^b", "^^a"):
        with pytest.raises(KGError, match="comma-separated"):
            parse_chain(text)
