"""Entity linking on the real demo KG and on small embedded stores: entities, never types or CVTs; the longest mention;
ties broken by degree; the runners-up reported with why each lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.datasets import load_dataset
from kgqa.kg import open_kg
from kgqa.kg.base import EntityMatch, KnowledgeGraph
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.steps.linking import (
    CVT_NODE,
    LOWER_DEGREE,
    NO_FACTS,
    OVER_LIMIT,
    OVERLAPPED,
    TYPE_NODE,
    LinkCandidate,
    _Linker,
    link,
    link_entities,
    type_relations,
)

HEATH = "m.0demo_heath_ledger"
COUNTRY_TYPE = "m.0demo_type_location_country"


@pytest.fixture(scope="module")
def demo() -> KnowledgeGraph:
    return open_kg("demo")


def ids(matches: list[EntityMatch]) -> list[str]:
    return [m.id for m in matches]


def test_heath_ledger_question_links_the_person_not_the_country_type(demo: KnowledgeGraph) -> None:
    question = "What currency is used in the country of Heath Ledger's nationality?"
    assert ids(link_entities(demo, question)) == [HEATH]
    result = link(demo, question)
    (linked,) = result.linked
    assert (linked.name, linked.mention, linked.exact, linked.score) == ("Heath Ledger", "Heath Ledger's", True, 1.0)
    (country,) = result.runners_up
    assert (country.id, country.mention, country.reason) == (COUNTRY_TYPE, "country", TYPE_NODE)


def test_the_demo_type_node_is_typed_by_the_kg_itself(demo: KnowledgeGraph) -> None:
    # What makes Country a type node is the KG: countries point at it with type.object.type (a noise relation,
    # hidden from relations(), so the node has no fact edge either).
    assert "type.object.type" in type_relations(demo)
    assert demo.relations(COUNTRY_TYPE, "in") == [] and demo.relations(COUNTRY_TYPE, "out") == []
    assert "m.0demo_australia" in demo.neighbors(COUNTRY_TYPE, "type.object.type", "in", limit=100)


@pytest.mark.parametrize("question", ["Which country is the largest?", "Which country?", "[Country]", "[Film]",
                                      "Which [country] has Canberra as its capital?"])
def test_a_type_named_word_alone_never_links_a_type_node(demo: KnowledgeGraph, question: str) -> None:
    result = link(demo, question)
    assert not any(c.id.startswith("m.0demo_type_") for c in result.linked)
    assert all(c.reason == TYPE_NODE for c in result.runners_up if c.id.startswith("m.0demo_type_"))
    if "Canberra" in question:  # the bracketed type links nothing, so the rest of the question is searched
        assert ids(result.entities) == ["m.0demo_canberra"]


def test_a_film_and_a_person_both_link_the_longest_mention_first(demo: KnowledgeGraph) -> None:
    result = link(demo, "Did Leonardo DiCaprio star in The Wolf of Wall Street?")
    assert ids(result.entities) == ["m.0demo_the_wolf_of_wall_street", "m.0demo_leonardo_dicaprio"]
    assert [c.mention for c in result.linked] == ["The Wolf of Wall Street", "Leonardo DiCaprio"]


def test_a_shorter_overlapping_mention_is_a_runner_up(demo: KnowledgeGraph) -> None:
    result = link(demo, "Who played Vito Corleone in The Godfather Part II?")
    assert ids(result.entities) == ["m.0demo_the_godfather_part_ii", "m.0demo_char_vito_corleone"]
    lost = {c.id: c for c in result.runners_up}
    assert lost["m.0demo_the_godfather"].reason == OVERLAPPED
    assert lost["m.0demo_the_godfather"].lost_to == "The Godfather Part II"


def test_possessives_match_the_name_and_names_with_apostrophes_still_match(demo: KnowledgeGraph) -> None:
    assert ids(link_entities(demo, "Which films did Jonathan Nolan's brother direct?")) == ["m.0demo_jonathan_nolan"]
    assert ids(link_entities(demo, "Who directed Christopher Nolan’s first film?")) == ["m.0demo_christopher_nolan"]
    assert ids(link_entities(demo, "Who directed Pan's Labyrinth?")) == ["m.0demo_pans_labyrinth"]
    assert ids(link_entities(demo, "Who directed [Pan's Labyrinth]?")) == ["m.0demo_pans_labyrinth"]


def test_a_cvt_is_never_linked(demo: KnowledgeGraph) -> None:
    # Nameless mediators cannot be found by name; should a backend's search return one, it is dropped as a CVT.
    cvt = next(n for n in demo.neighbors("m.0demo_inception", "film.film.starring", limit=1))
    assert demo.names([cvt])[cvt] is None
    linker = _Linker(demo, fuzzy=True)
    kept = linker._entities_only([LinkCandidate(cvt, "", "Inception cast", (0, 2), 1.0, True),
                                  LinkCandidate("m.0demo_inception", "Inception", "Inception", (0, 1), 1.0, True)])
    assert [c.id for c in kept] == ["m.0demo_inception"]
    assert [(c.id, c.reason) for c in linker.result.runners_up] == [(cvt, CVT_NODE)]
    for q in load_dataset("demo"):
        assert not any("cvt" in m.id for m in link_entities(demo, q.text))


def test_the_demo_questions_link_their_gold_topics(demo: KnowledgeGraph) -> None:
    questions = list(load_dataset("demo"))
    hits = sum(bool(set(q.topic_ids) & set(ids(link_entities(demo, q.text)))) for q in questions)
    assert hits == len(questions)


def test_same_named_entities_are_ranked_by_degree(demo: KnowledgeGraph) -> None:
    result = link(demo, "Which actors were born in London?")
    assert ids(result.entities) == ["m.0demo_london"]
    (other,) = result.runners_up
    assert (other.id, other.reason, other.lost_to) == ("m.0demo_london_ontario", LOWER_DEGREE, "m.0demo_london")
    assert other.degree is not None and result.linked[0].degree is not None and result.linked[0].degree > other.degree


def _springfields(tmp_path: Path, *, same_relations: bool) -> EmbeddedKG:
    """Two places named Springfield: the big one with more relations (or, with ``same_relations``, the same relations
    but more edges), plus a place type and a nameless-but-for-its-type schema node."""
    b = EmbeddedKGBuilder(schema="freebase")
    b.add_triple("m.small", "location.location.containedby", "m.oregon")
    b.add_triple("m.big", "location.location.containedby", "m.illinois")
    for i in range(4):
        b.add_triple(f"m.person{i}", "people.person.place_of_birth", "m.big")
        b.add_name(f"m.person{i}", f"Person {i}")
    if same_relations:
        b.add_triple("m.person9", "people.person.place_of_birth", "m.small")
        b.add_name("m.person9", "Person 9")
    else:
        b.add_triple("m.big", "location.location.people_born_here", "m.person0")
    for place in ("m.small", "m.big", "m.oregon", "m.illinois"):
        b.add_triple(place, "type.object.type", "m.type_place")
    b.add_triple("m.lonely", "common.topic.alias", '"Lonely"')
    for node, name in {"m.small": "Springfield", "m.big": "Springfield", "m.oregon": "Oregon",
                       "m.illinois": "Illinois", "m.type_place": "Place", "m.lonely": "Lonely Node"}.items():
        b.add_name(node, name)
    return b.build(tmp_path / ("same" if same_relations else "more"))


@pytest.mark.parametrize("same_relations", [False, True])
def test_degree_breaks_the_tie_between_two_same_named_entities(tmp_path: Path, same_relations: bool) -> None:
    kg = _springfields(tmp_path, same_relations=same_relations)
    assert {m.id for m in kg.search("Springfield", limit=5)} == {"m.small", "m.big"}
    result = link(kg, "Who was born in Springfield?")
    assert ids(result.entities) == ["m.big"]
    (small,) = [c for c in result.runners_up if c.id == "m.small"]
    assert (small.reason, small.lost_to) == (LOWER_DEGREE, "m.big")
    big = result.linked[0]
    assert (big.degree, big.edges or 0) > (small.degree, small.edges or 0)
    if same_relations:
        assert big.degree == small.degree and big.edges == 5 and small.edges == 2


def test_schema_nodes_of_a_small_store_are_dropped_with_their_reason(tmp_path: Path) -> None:
    kg = _springfields(tmp_path, same_relations=False)
    result = link(kg, "Which Place is a Lonely Node near Oregon?")
    assert ids(result.entities) == ["m.oregon"]
    reasons = {c.id: c.reason for c in result.runners_up}
    assert reasons == {"m.type_place": TYPE_NODE, "m.lonely": NO_FACTS}


def test_wikidata_instance_of_marks_a_type_node(tmp_path: Path) -> None:
    # In Wikidata, P31 is a fact relation (not noise): the class node has edges, and is still a type node.
    b = EmbeddedKGBuilder(schema="wikidata")
    b.add_triple("Q408", "wdt:P31", "Q6256")
    b.add_triple("Q142", "wdt:P31", "Q6256")
    b.add_triple("Q408", "wdt:P36", "Q3114")
    b.add_triple("Q6256", "wdt:P279", "Q7275")
    for node, name in {"Q408": "Australia", "Q142": "France", "Q6256": "country", "Q3114": "Canberra",
                       "Q7275": "state"}.items():
        b.add_name(node, name)
    kg = b.build(tmp_path / "wd")
    assert kg.relations("Q6256", "in") == ["wdt:P31"]
    result = link(kg, "Which country has Canberra as its capital?")
    assert ids(result.entities) == ["Q3114"]
    assert [(c.id, c.reason) for c in result.runners_up] == [("Q6256", TYPE_NODE)]


def test_the_limit_keeps_the_best_and_reports_the_rest(demo: KnowledgeGraph) -> None:
    question = "Christopher Nolan or Quentin Tarantino: which films were directed by the one born in London?"
    result = link(demo, question, limit=2)
    assert ids(result.entities) == ["m.0demo_christopher_nolan", "m.0demo_quentin_tarantino"]
    assert ("m.0demo_london", OVER_LIMIT) in [(c.id, c.reason) for c in result.runners_up]
    assert link(demo, question, limit=0).entities == []


def test_fuzzy_linking_finds_a_misspelt_name_only_when_asked(demo: KnowledgeGraph) -> None:
    assert ids(link_entities(demo, "Which films did Christopher Nolen direct?")) == ["m.0demo_christopher_nolan"]
    assert link_entities(demo, "Which films did Christopher Nolen direct?", fuzzy=False) == []
    (match,) = link(demo, "Who directed [Christopher Nolen]?").linked
    assert match.id == "m.0demo_christopher_nolan" and not match.exact and 0.85 <= match.score < 1.0


def test_ask_topics_reports_the_linking_with_its_runners_up(demo: KnowledgeGraph) -> None:
    from kgqa.cli.ask import _topics
    from kgqa.errors import KGError

    report: dict[str, object] = {}
    topics = _topics(demo, "What currency is used in the country of Heath Ledger's nationality?", (), report)
    assert [t.id for t in topics] == [HEATH]
    linking = report["linking"]
    assert isinstance(linking, dict)
    assert [c["id"] for c in linking["linked"]] == [HEATH]
    assert [(c["id"], c["reason"]) for c in linking["runners_up"]] == [(COUNTRY_TYPE, TYPE_NODE)]
    given: dict[str, object] = {}
    assert [t.id for t in _topics(demo, "?", ("Heath Ledger",), given)] == [HEATH] and given == {}
    with pytest.raises(KGError, match=r"Country .*type node"):
        _topics(demo, "Which country is the largest?", ())


def test_bracketed_mentions_link_first_with_spans_in_the_question(demo: KnowledgeGraph) -> None:
    result = link(demo, "who acted in [Pan's Labyrinth] and [Inception]")
    assert [(c.id, c.span) for c in result.linked] == [("m.0demo_pans_labyrinth", (3, 5)), ("m.0demo_inception", (6, 7))]
    once = link(demo, "Which [country] has Canberra as its capital?").runners_up
    assert [(c.id, c.reason) for c in once] == [(COUNTRY_TYPE, TYPE_NODE)]
