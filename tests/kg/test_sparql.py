"""The SPARQL backend against real Oxigraph and Virtuoso servers: query shape, names, search, vocabulary, failures
(injected by a real HTTP proxy), and the server helpers themselves."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph
import pytest

from kgqa.errors import ConfigError, KGError, QueryTimeout
from kgqa.kg import KnowledgeGraph, open_kg, parse_chain
from kgqa.kg.base import ConstraintChain, Direction, Hop, make_literal
from kgqa.kg.embedded import EmbeddedKG
from kgqa.kg.servers import OxigraphServer, VirtuosoServer, export_ntriples, free_port
from kgqa.kg.sparql import SparqlKG

if TYPE_CHECKING:  # conftest is not importable as a module at run time (tests/ is not a package)
    from conftest import FaultProxy, GeneratedKG

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
FB = "http://rdf.freebase.com/ns/"


def test_satisfies_protocol(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG) -> None:
    assert isinstance(sparql_kg, KnowledgeGraph)
    assert sparql_kg.schema.name == "freebase"
    # an endpoint holds a set of triples: every statement counts once (the store imported the same set)
    some = list(itertools.islice(embedded_kg.iter_triples(), 3))
    assert sparql_kg.statement_counts(some) == embedded_kg.statement_counts(some) == [1, 1, 1]


def test_open_kg_routes_urls_to_sparql(oxigraph_server: OxigraphServer) -> None:
    kg = open_kg(oxigraph_server.url, schema="freebase")
    try:
        assert isinstance(kg, SparqlKG)
        assert kg.relations("m.e001")  # a real answer over HTTP
    finally:
        kg.close()


def test_bad_endpoint_url_is_a_config_error() -> None:
    for url in ("ftp://example.org/sparql", "localhost:8890/sparql", "http://"):
        with pytest.raises(ConfigError, match="not an http"):
            SparqlKG(url)


def test_a_schema_with_several_name_predicates_searches_them_all(oxigraph_server: OxigraphServer) -> None:
    """With more than one name predicate the search pattern is a VALUES over them (it once referred to itself)."""
    from kgqa.kg.schema import FreebaseSchema

    schema = FreebaseSchema(name_predicates=(FB + "type.object.name", RDFS_LABEL))
    with SparqlKG(oxigraph_server.url, schema=schema) as kg:
        assert [m.id for m in kg.search("Entity 7")] == ["m.e007", "m.lonely3"]


def test_virtuoso_is_detected_from_the_server_header(sparql_kg: SparqlKG) -> None:
    assert sparql_kg.is_virtuoso == sparql_kg.endpoint.endswith("/sparql")


# -- query shape -----------------------------------------------------------------------------------------------------


def test_a_chain_is_one_query_with_one_distinct_subquery_per_hop(sparql_kg: SparqlKG) -> None:
    chain = parse_chain("^test.place.contained_by,test.film.starring,test.performance.actor")
    before = sparql_kg.queries_sent
    result = sparql_kg.run_chain(["m.e000"], chain, limit=7)
    assert sparql_kg.queries_sent == before + 1
    query = sparql_kg.history[-1]
    assert query.startswith("SELECT ?e3 WHERE {")
    assert query.count("SELECT DISTINCT") == 3
    assert query.rstrip().endswith("LIMIT 8")  # limit + 1 tells a full result from a cut one
    assert len(result.entities) <= 7


def test_hub_and_cvt_chain(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG, generated: GeneratedKG) -> None:
    # Films in the hub, through nameless CVT mediators to actors.
    chain = parse_chain("^test.place.contained_by,test.film.starring,test.performance.actor")
    result = sparql_kg.run_chain(["m.e000"], chain, bindings=True)
    assert result.entities and not result.truncated
    assert result.paths is not None
    through_cvt = [p for p in result.paths if p[2].startswith("m.cvt")]
    assert through_cvt
    assert all(sparql_kg.names([p[2]])[p[2]] is None for p in through_cvt[:5])
    assert set(result.entities) == set(embedded_kg.run_chain(["m.e000"], chain).entities)


def test_truncation_is_reported(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG) -> None:
    chain = (Hop("test.place.contained_by", Direction.IN),)
    full = sparql_kg.run_chain(["m.e000"], chain)
    assert len(full.entities) == 79 and not full.truncated
    cut = sparql_kg.run_chain(["m.e000"], chain, limit=10)
    assert cut.truncated and len(cut.entities) == 10 and set(cut.entities) <= set(full.entities)
    exact = sparql_kg.run_chain(["m.e000"], chain, limit=79)
    assert not exact.truncated and len(exact.entities) == 79


def test_paths_cap_keeps_all_entities(sparql_kg: SparqlKG) -> None:
    chain = parse_chain("^test.place.contained_by,test.place.contained_by")
    plain = sparql_kg.run_chain(["m.e000"], chain)
    capped = sparql_kg.run_chain(["m.e000"], chain, bindings=True, max_paths=5)
    assert capped.truncated
    assert capped.paths is not None and 0 < len(capped.paths) <= 5
    assert set(capped.entities) == set(plain.entities)  # the entities were fetched on their own
    assert all(p[-1] in set(capped.entities) for p in capped.paths)


def test_empty_chain_returns_the_topics_that_exist(sparql_kg: SparqlKG) -> None:
    result = sparql_kg.run_chain(["m.e001", "m.lonely1", "m.unknown"], ())
    assert set(result.entities) == {"m.e001", "m.lonely1"}
    assert sparql_kg.run_chain([], parse_chain("test.film.starring")).entities == []


def test_constraint_sources_anywhere_on_the_main_chain(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG) -> None:
    main = parse_chain("^test.place.contained_by,test.film.starring")
    for source in range(len(main) + 1):
        for chain in (parse_chain("test.film.release_year"), parse_chain("test.performance.actor"),
                      parse_chain("test.place.contained_by")):
            constraint = ConstraintChain(source, chain)
            values = sparql_kg.constraint_values(["m.e000"], main, constraint)
            assert set(values.entities) == set(embedded_kg.constraint_values(["m.e000"], main, constraint).entities)
            for target in values.entities[:3]:
                targeted = ConstraintChain(source, chain, target)
                got = sparql_kg.filter_by_constraint(["m.e000"], main, targeted)
                assert set(got.entities) == set(embedded_kg.filter_by_constraint(["m.e000"], main, targeted).entities)


def test_constraint_arguments_are_checked(sparql_kg: SparqlKG) -> None:
    main = parse_chain("test.film.starring")
    with pytest.raises(KGError, match="outside the main chain"):
        sparql_kg.constraint_values(["m.e001"], main, ConstraintChain(2, parse_chain("test.film.genre")))
    with pytest.raises(KGError, match="empty"):
        sparql_kg.constraint_values(["m.e001"], main, ConstraintChain(0, ()))
    with pytest.raises(KGError, match="target"):
        sparql_kg.filter_by_constraint(["m.e001"], main, ConstraintChain(0, parse_chain("test.film.genre")))


def test_literal_target_matches_on_lexical_value(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG,
                                                 generated: GeneratedKG) -> None:
    main = (Hop("test.place.contained_by", Direction.IN),)
    year = parse_chain("test.film.release_year")
    for target in (make_literal("1967"), make_literal("1967", datatype="http://www.w3.org/2001/XMLSchema#gYear"),
                   make_literal("1967", lang="en")):
        constraint = ConstraintChain(1, year, target)
        assert set(sparql_kg.filter_by_constraint(["m.e000"], main, constraint).entities) == set(
            embedded_kg.filter_by_constraint(["m.e000"], main, constraint).entities)


# -- names and search ------------------------------------------------------------------------------------------------


LANG_NT = f"""\
<{FB}m.multi> <{FB}type.object.name> "Le Nom"@fr .
<{FB}m.multi> <{FB}type.object.name> "The Name"@en .
<{FB}m.multi> <{FB}type.object.name> "Plain Name" .
<{FB}m.plain> <{FB}type.object.name> "Only Plain" .
<{FB}m.german> <{FB}type.object.name> "Nur Deutsch"@de .
<{FB}m.british> <{FB}type.object.name> "Colour"@en-GB .
<{FB}m.british> <{FB}type.object.name> "Farbe"@de .
<{FB}m.british> <{FB}test.x.rel> <{FB}m.plain> .
"""


@pytest.fixture(scope="module")
def lang_kgs(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[list[SparqlKG]]:
    """The multilingual names above on Oxigraph (own server) and Virtuoso (a graph of the session server)."""
    nt = tmp_path_factory.mktemp("lang") / "lang.nt"
    nt.write_text(LANG_NT, encoding="utf-8")
    kgs: list[SparqlKG] = []
    with OxigraphServer([nt], tmp_path_factory.mktemp("lang-ox")) as server:
        kgs.append(SparqlKG(server.url, "freebase"))
        try:
            virtuoso: VirtuosoServer = request.getfixturevalue("virtuoso_server")
        except pytest.skip.Exception:
            virtuoso = None  # type: ignore[assignment]
        if virtuoso is not None:
            virtuoso.load([nt], "http://kgqa.local/test/lang", fulltext=False)
            kgs.append(SparqlKG(virtuoso.url, "freebase", default_graph="http://kgqa.local/test/lang"))
        yield kgs
        for kg in kgs:
            kg.close()


def test_names_prefer_schema_language_then_no_language(lang_kgs: list[SparqlKG]) -> None:
    for kg in lang_kgs:
        assert kg.names(["m.multi", "m.plain", "m.german", "m.british", '"42"', "m.none"]) == {
            "m.multi": "The Name", "m.plain": "Only Plain", "m.german": None, "m.british": "Colour",
            '"42"': "42", "m.none": None}


def test_exact_search_tries_the_label_plain_and_language_tagged(lang_kgs: list[SparqlKG]) -> None:
    for kg in lang_kgs:
        assert [m.id for m in kg.search("The Name")] == ["m.multi"]
        assert [m.id for m in kg.search("plain name")] == ["m.multi"]  # case variant, plain literal
        assert [m.id for m in kg.search("Only Plain")] == ["m.plain"]
        assert kg.search("Nur Deutsch") == []  # another language is not a name here
        assert kg.search("   ") == []


def test_exact_search(sparql_kg: SparqlKG) -> None:
    matches = sparql_kg.search("entity 7")
    assert {m.id for m in matches} == {"m.e007", "m.lonely3"}
    assert all(m.score == 1.0 and m.name == "Entity 7" for m in matches)
    assert len(sparql_kg.search("entity 7", limit=1)) == 1
    assert sparql_kg.search("No Such Name Anywhere") == []


@pytest.mark.parametrize("fulltext", ["auto", "contains"])
def test_fuzzy_search_tolerates_typos(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG, fulltext: str) -> None:
    kg = SparqlKG(sparql_kg.endpoint, "freebase", default_graph=sparql_kg.default_graph,
                  fulltext=fulltext)  # type: ignore[arg-type]
    try:
        matches = kg.search("Entiti 7", fuzzy=True, limit=5)
        assert {m.id for m in matches[:2]} == {"m.e007", "m.lonely3"}
        assert all(0 < m.score < 1 for m in matches)
        assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)
        assert {m.id for m in embedded_kg.search("Entiti 7", fuzzy=True, limit=5)[:2]} == {"m.e007", "m.lonely3"}
        used_bif = any("bif:contains" in q for q in kg.history)
        assert used_bif == (fulltext == "auto" and kg.is_virtuoso)
        exact_first = kg.search("Lonely One", fuzzy=True, limit=3)
        assert exact_first[0].id == "m.lonely1" and exact_first[0].score == 1.0
    finally:
        kg.close()


def test_fuzzy_search_with_accents_and_quotes(sparql_kg: SparqlKG) -> None:
    assert sparql_kg.search("Amélie 0", fuzzy=True, limit=3)[0].id == "m.e000"
    assert sparql_kg.search('The "Quoted" One 9', limit=3)[0].id == "m.e009"


# -- vocabulary, entities, stats -------------------------------------------------------------------------------------


def test_vocabulary_has_everything_relations_hide_noise_and_names(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG,
                                                                  generated: GeneratedKG) -> None:
    vocabulary = SparqlKG(sparql_kg.endpoint, "freebase", default_graph=sparql_kg.default_graph).vocabulary()
    assert "type.object.name" in vocabulary and "type.object.type" in vocabulary
    assert set(vocabulary) == set(embedded_kg.vocabulary()) | {"type.object.name"}
    for entity in generated.entities[:30]:
        relations = sparql_kg.relations(entity)
        assert "type.object.name" not in relations
        assert not any(r.startswith(("type.", "common.")) for r in relations)


def test_has_entity_and_has_relation(sparql_kg: SparqlKG, generated: GeneratedKG) -> None:
    assert sparql_kg.has_entity("m.lonely1")  # degree 0: only its name triple
    assert sparql_kg.has_entity("m.cvt01") and sparql_kg.has_entity(generated.literals[0])
    assert not sparql_kg.has_entity("m.unknown")
    assert not sparql_kg.has_entity("not an id")
    assert sparql_kg.has_relation("test.film.starring")
    assert not sparql_kg.has_relation("test.film.unknown_relation")
    assert not sparql_kg.has_relation("Not A Relation")


def test_stats_time_out_to_none(oxigraph_server: OxigraphServer, fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([("sleep", 4.0)] + ["pass"] * 10)
    kg = SparqlKG(proxy.url, "freebase", stats_timeout=1.5)
    try:
        stats = kg.stats()
        assert stats.triples is None  # the first count ran out of time
        assert stats.entities is not None and stats.names is not None
        assert stats.backend == "sparql" and stats.extra["endpoint"] == proxy.url
    finally:
        kg.close()


# -- failures --------------------------------------------------------------------------------------------------------


def test_transient_failures_are_retried(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([503, 502])
    kg = SparqlKG(proxy.url, "freebase", retries=2, backoff=0.01)
    try:
        assert kg.relations("m.e001")
        assert proxy.requests == 3
    finally:
        kg.close()


def test_retries_are_bounded_and_the_error_names_the_endpoint(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([503, 503, 503, 503])
    kg = SparqlKG(proxy.url, "freebase", retries=2, backoff=0.01)
    try:
        with pytest.raises(KGError, match=r"failed after 3 attempt\(s\): HTTP 503") as info:
            kg.relations("m.e001")
        assert proxy.url in str(info.value)
        assert not isinstance(info.value, QueryTimeout)
        assert proxy.requests == 3
    finally:
        kg.close()


def test_timeouts_raise_query_timeout(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([("sleep", 1.0), ("sleep", 1.0)])
    kg = SparqlKG(proxy.url, "freebase", timeout=0.2, retries=1, backoff=0.01)
    try:
        with pytest.raises(QueryTimeout, match=r"no answer within 0\.2s after 2 attempt") as info:
            kg.run_chain(["m.e001"], parse_chain("test.film.starring"))
        assert proxy.url in str(info.value)
    finally:
        kg.close()


def test_client_errors_and_query_errors_are_not_retried(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([("status", 400, "Parse error: unexpected token"),
                         ("status", 500, "Virtuoso 37000 Error SP030: SPARQL compiler, line 1: syntax error")])
    kg = SparqlKG(proxy.url, "freebase", retries=3, backoff=0.01)
    try:
        with pytest.raises(KGError, match="HTTP 400"):
            kg.relations("m.e001")
        with pytest.raises(KGError, match="rejected the query"):
            kg.relations("m.e001")
        assert proxy.requests == 2
    finally:
        kg.close()


def test_connection_refused_names_the_endpoint() -> None:
    url = f"http://127.0.0.1:{free_port()}/sparql"
    kg = SparqlKG(url, "freebase", retries=1, backoff=0.01)
    try:
        with pytest.raises(KGError, match="connection failed") as info:
            kg.relations("m.e001")
        assert url in str(info.value) and not isinstance(info.value, QueryTimeout)
    finally:
        kg.close()


def test_virtuoso_partial_results_are_flagged(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([("header", "X-SQL-State", "S1TAT"), ("header", "X-SQL-State", "S1TAT")])
    kg = SparqlKG(proxy.url, "freebase")
    try:
        result = kg.run_chain(["m.e000"], parse_chain("^test.place.contained_by"))
        assert result.truncated and result.entities
        with pytest.raises(QueryTimeout, match="partial result"):
            kg.relations("m.e001")
    finally:
        kg.close()


def test_non_sparql_answers_are_clear_errors(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy([("status", 200, "<html>not json</html>")])
    kg = SparqlKG(proxy.url, "freebase")
    try:
        with pytest.raises(KGError, match="did not answer with SPARQL JSON"):
            kg.relations("m.e001")
    finally:
        kg.close()


# -- the server helpers ----------------------------------------------------------------------------------------------


def _port_open(url: str) -> bool:
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def test_oxigraph_server_is_stopped_on_exit_and_on_error(generated_nt: Path, tmp_path: Path) -> None:
    with OxigraphServer([generated_nt], tmp_path / "a") as server:
        assert _port_open(server.url)
        proc = server.proc
    assert proc is not None and proc.poll() is not None
    assert not _port_open(server.url)
    with pytest.raises(RuntimeError, match="boom"), OxigraphServer([generated_nt], tmp_path / "b") as server:
        proc = server.proc
        raise RuntimeError("boom")
    assert proc is not None and proc.poll() is not None


@pytest.mark.virtuoso
@pytest.mark.slow
def test_virtuoso_server_is_stopped_on_exit(virtuoso_server: VirtuosoServer, tmp_path: Path) -> None:
    # The session server proves start-up; this one proves shutdown (an empty database, started and stopped).
    with VirtuosoServer([], tmp_path / "v") as server:
        assert _port_open(server.url)
        proc = server.proc
        with SparqlKG(server.url, "freebase", default_graph=server.graph) as kg:
            assert kg.relations("m.e001") == []
    assert proc is not None and proc.poll() is not None
    assert not _port_open(server.url)


def test_missing_binaries_and_files_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     generated_nt: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        OxigraphServer([tmp_path / "missing.nt"])
    monkeypatch.setenv("PATH", str(tmp_path))
    # the binaries are also looked for beside the Python running kgqa (a venv's bin not on PATH): hide them there too
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    with pytest.raises(ConfigError, match="'oxigraph' executable was not found"), \
            OxigraphServer([generated_nt], tmp_path / "o"):
        pass
    with pytest.raises(ConfigError, match="'virtuoso-t' executable was not found"), \
            VirtuosoServer([generated_nt], tmp_path / "v"):
        pass


def test_export_ntriples_round_trips(embedded_kg: EmbeddedKG, generated: GeneratedKG, tmp_path: Path) -> None:
    path = tmp_path / "out.nt"
    count = export_ntriples(embedded_kg, path)
    assert count == len(generated.triples) + len(generated.names)
    quads = list(pyoxigraph.parse(path=str(path), format=pyoxigraph.RdfFormat.N_TRIPLES))
    assert len(quads) == count
    values = {q.object.value for q in quads if isinstance(q.object, pyoxigraph.Literal)}
    assert 'A "quoted" tag\\line' in values and "two\nlines\tand a tab" in values
    assert 'The "Quoted" One 9' in values and "東京 36" in values
    names = [q for q in quads if q.predicate.value == FB + "type.object.name"]
    assert all(q.object.language == "en" for q in names)
    assert os.path.getsize(path) > 0


# -- other schemas ---------------------------------------------------------------------------------------------------

WD = "http://www.wikidata.org/"
WIKIDATA_NT = f"""\
<{WD}entity/Q1> <{WD}prop/direct/P57> <{WD}entity/Q2> .
<{WD}entity/Q1> <{WD}prop/P57> <{WD}entity/statement/Q1-abc> .
<{WD}entity/statement/Q1-abc> <{WD}prop/statement/P57> <{WD}entity/Q2> .
<{WD}entity/statement/Q1-abc> <{WD}prop/qualifier/P580> "1999-01-01"^^<http://www.w3.org/2001/XMLSchema#date> .
<{WD}entity/Q1> <{RDFS_LABEL}> "Film One"@en .
<{WD}entity/Q1> <{RDFS_LABEL}> "Film Eins"@de .
<{WD}entity/Q1> <http://schema.org/description> "a film"@en .
<{WD}entity/Q2> <{RDFS_LABEL}> "Director Two"@en .
"""


def test_wikidata_schema_maps_prefixes_and_statement_nodes(tmp_path: Path) -> None:
    nt = tmp_path / "wd.nt"
    nt.write_text(WIKIDATA_NT, encoding="utf-8")
    with OxigraphServer([nt], tmp_path / "server") as server, \
            SparqlKG(server.url, schema="wikidata", strict_vocabulary=True) as kg:
        assert kg.relations("Q1") == ["p:P57", "wdt:P57"]  # labels and descriptions are not relations
        assert kg.neighbors("Q1", "p:P57") == ["wds:Q1-abc"]
        chain = parse_chain("p:P57,ps:P57")
        assert kg.run_chain(["Q1"], chain).entities == ["Q2"]
        qualifier = ConstraintChain(1, parse_chain("pq:P580"), '"1999-01-01"')
        assert kg.filter_by_constraint(["Q1"], chain, qualifier).entities == ["Q2"]
        assert kg.names(["Q1", "Q2", "wds:Q1-abc"]) == {"Q1": "Film One", "Q2": "Director Two", "wds:Q1-abc": None}
        assert [m.id for m in kg.search("film one")] == ["Q1"]
        with pytest.raises(KGError, match="vocabulary"):  # strict: the vocabulary was fetched on first use
            kg.neighbors("Q1", "wdt:P58")
        with pytest.raises(KGError, match="not a valid wikidata relation"):
            kg.neighbors("Q1", "wdt:P57 } ")


def test_oxigraph_is_found_beside_python_when_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16: the suite failed with 96 errors when the venv's bin was not on PATH."""
    import sys

    from kgqa.kg.servers import find_executable

    beside = Path(sys.executable).parent / "oxigraph"
    if not beside.exists():
        pytest.skip(f"no oxigraph beside {sys.executable} on this machine")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert Path(find_executable("oxigraph", "install the oxigraph package")) == beside
