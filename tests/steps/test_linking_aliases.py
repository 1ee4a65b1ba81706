"""Entity linking through aliases (issue 52 item 14): the embedded store indexes the aliases a KG records (Freebase
``common.topic.alias``, SKOS ``altLabel``) beside the names, for exact and fuzzy search, so a question that says
"Oscar" links the Academy Awards; a question that links nothing is refused naming the mentions it tried, in the CLI
and in the service, with no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgqa.errors import KGError
from kgqa.kg import open_kg
from kgqa.kg.base import KnowledgeGraph
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.embedded.aliases import SKOS_ALT_LABEL
from kgqa.steps.linking import link, name_phrases, question_topics

AWARDS = "m.0demo_academy_awards"
BEST_DIRECTOR = "m.0demo_academy_award_for_best_director"


@pytest.fixture(scope="module")
def demo() -> KnowledgeGraph:
    return open_kg("demo")


def _store(tmp_path: Path) -> EmbeddedKG:
    b = EmbeddedKGBuilder(schema="freebase")
    b.add_triple("m.awards", "award.award.category", "m.director")
    b.add_triple("m.director", "award.award_category.category_of", "m.awards")
    for alias in ('"Oscar"', '"Oscars"@en', '"Premios Óscar"@es', '"Academy Awards"', '"1929"^^<http://www.w3.org/'
                  '2001/XMLSchema#gYear>'):
        b.add_triple("m.awards", "common.topic.alias", alias)
    b.add_triple("m.cvt", "common.topic.alias", '"Nameless Thing"')  # a mediator: no name, never a linking target
    b.add_triple("m.cvt", "award.award_honor.award", "m.director")
    b.add_name("m.awards", "Academy Awards")
    b.add_name("m.director", "Academy Award for Best Director")
    return b.build(tmp_path / "kg")


def test_the_store_finds_an_entity_by_its_alias_exactly_and_fuzzily(tmp_path: Path) -> None:
    kg = _store(tmp_path)
    for label in ("Oscar", "oscars", "OSCAR"):
        (hit,) = kg.search(label)
        assert (hit.id, hit.name, hit.score) == ("m.awards", "Academy Awards", 1.0)  # the name shown, not the alias
    (close,) = kg.search("Oskar", fuzzy=True, limit=1)
    assert close.id == "m.awards" and close.score < 1.0
    assert kg.search("Premios Oscar") == []  # another language's alias is not an English label
    assert kg.search("1929") == []  # a typed value is no alias
    assert kg.search("Nameless Thing") == []  # the alias of a nameless node is not indexed
    # the alias equal to the name adds nothing; the two English aliases are counted
    assert kg.stats().names == 2 and kg.stats().extra["alias_labels"] == 2
    assert "common.topic.alias" not in kg.relations("m.awards")  # still a noise relation, hidden from methods


def test_skos_alt_labels_of_an_rdf_file_are_aliases(tmp_path: Path) -> None:
    from kgqa.kg.loaders import load_into

    source = tmp_path / "films.nt"
    source.write_text(
        '<http://ex.org/inception> <http://www.w3.org/2000/01/rdf-schema#label> "Inception" .\n'
        f'<http://ex.org/inception> <{SKOS_ALT_LABEL}> "Origen"@en .\n'
        '<http://ex.org/inception> <http://ex.org/directedBy> <http://ex.org/nolan> .\n'
        '<http://ex.org/nolan> <http://www.w3.org/2000/01/rdf-schema#label> "Christopher Nolan" .\n', encoding="utf-8")
    builder = EmbeddedKGBuilder(schema="generic")
    load_into(builder, source, "nt")
    kg = builder.build(tmp_path / "rdf")
    (hit,) = kg.search("Origen")
    assert (hit.id, hit.name) == ("http://ex.org/inception", "Inception")


def test_the_demo_kg_links_the_oscar_through_its_aliases(demo: KnowledgeGraph) -> None:
    result = link(demo, "Who got the Oscar for Best Director in 2020?")
    (best,) = result.linked
    assert (best.id, best.mention, best.exact) == (BEST_DIRECTOR, "Oscar for Best Director", True)
    assert best.name == "Academy Award for Best Director"
    result = link(demo, "Which actor won an Oscar for Moonlight?")
    assert {c.id for c in result.linked} == {"m.0demo_moonlight", AWARDS}
    assert next(c.mention for c in result.linked if c.id == AWARDS) == "Oscar"
    assert {c.id for c in link(demo, "Which Tarantino films did Brad Pitt star in?").linked} == {
        "m.0demo_quentin_tarantino", "m.0demo_brad_pitt"}

def test_name_phrases_are_the_capitalised_runs_of_a_question() -> None:
    words = ["Who", "got", "the", "Golden", "Globe", "for", "Best", "Director", "in", "2020"]
    assert name_phrases(words) == ["Golden Globe for Best Director"]
    assert name_phrases(["What", "is", "the", "weather", "like"]) == []


def test_a_question_that_links_nothing_names_the_mentions_it_tried(demo: KnowledgeGraph) -> None:
    with pytest.raises(KGError) as raised:
        question_topics(demo, "Who directed Incepshun?")
    message = str(raised.value)
    assert "no entity of the KG is mentioned in the question" in message
    assert "tried 'Incepshun'" in message and "[brackets]" in message
    with pytest.raises(KGError, match="tried 'Gladiatrix'"):
        question_topics(demo, "Who directed [Gladiatrix]?")
    with pytest.raises(KGError, match="no capitalised name or \\[bracketed\\] mention"):
        question_topics(demo, "what is the weather like?")


def test_the_cli_and_the_service_say_which_mentions_were_tried(demo: KnowledgeGraph,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kgqa.cli import main
    from kgqa.service.asks import UserError, resolve_topics

    code = main(["ask", "Who composed the music for Stranger Tides?", "--method", "fog"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("kgqa: error: no entity of the KG is mentioned") and "tried 'Stranger Tides'" in err
    with pytest.raises(UserError, match="tried 'Stranger Tides'"):
        resolve_topics(demo, "Who composed the music for Stranger Tides?", None)
