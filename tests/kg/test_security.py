"""Hostile input never changes the structure of a SPARQL query: identifiers are validated (rejected with KGError before
anything is sent), literals are escaped, and mutating query text is refused before it leaves the process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgqa.errors import KGError
from kgqa.kg.base import ConstraintChain, Direction, Hop, make_literal, parse_chain
from kgqa.kg.embedded import EmbeddedKG
from kgqa.kg.schema import check_iri
from kgqa.kg.sparql import SparqlKG, ensure_read_only, sparql_string

if TYPE_CHECKING:  # conftest is not importable as a module at run time (tests/ is not a package)
    from conftest import FaultProxy, GeneratedKG

HOSTILE = [
    "m.x> } ; DROP ALL ; <",
    'm.x" } ; DROP ALL ; {"',
    "m.x\n} DELETE WHERE { ?s ?p ?o }",
    "m.x } UNION { ?s ?p ?o",
    "http://example.org/a> ?p ?o } #",
    "http://example.org/a b",
    "http://example.org/{x}",
    "urn:x\"y",
    "<http://example.org/a>",
    "m.x'; DROP TABLE DB.DBA.RDF_QUAD; --",
    "?s",
    "",
    " ",
    "m.e001 ",
    "_:b0 } DROP ALL",
    "_:",
]
MALFORMED_LITERALS = ['"unterminated', '"x"@en} DROP ALL', '"x"^^<http://a.org/t> } #', '"a" "b"', '"x"^^<a b>']
SERVER_ERRORS = ("refused the query", "rejected the query", "did not answer", "failed after")

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _refused_before_sending(kg: SparqlKG, call: Callable[[], object]) -> None:
    sent = kg.queries_sent
    with pytest.raises(KGError) as info:
        call()
    assert kg.queries_sent == sent, f"a query was sent for a hostile argument: {kg.history[-1]!r}"
    assert not any(marker in str(info.value) for marker in SERVER_ERRORS)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_entity_ids_are_rejected_before_sending(sparql_kg: SparqlKG, hostile: str) -> None:
    chain = parse_chain("test.film.starring")
    _refused_before_sending(sparql_kg, lambda: sparql_kg.relations(hostile))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.neighbors(hostile, "test.film.starring"))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.run_chain(["m.e001", hostile], chain))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.chain_relations([hostile], chain))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.names(["m.e001", hostile]))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.constraint_values([hostile], chain, ConstraintChain(
        1, parse_chain("test.performance.actor"))))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.filter_by_constraint(["m.e001"], chain, ConstraintChain(
        1, parse_chain("test.performance.actor"), hostile)))
    sent = sparql_kg.queries_sent
    assert sparql_kg.has_entity(hostile) is False
    assert sparql_kg.queries_sent == sent


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_relations_are_rejected_before_sending(sparql_kg: SparqlKG, hostile: str) -> None:
    bad = (Hop(hostile, Direction.OUT),)
    _refused_before_sending(sparql_kg, lambda: sparql_kg.neighbors("m.e001", hostile))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.run_chain(["m.e001"], bad))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.run_chain(["m.e001"], (Hop(hostile, Direction.IN),),
                                                                   bindings=True))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.chain_relations(["m.e001"], bad))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.constraint_values(
        ["m.e001"], parse_chain("test.film.starring"), ConstraintChain(0, bad)))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.filter_by_constraint(
        ["m.e001"], bad, ConstraintChain(0, parse_chain("test.film.genre"), "m.e002")))
    sent = sparql_kg.queries_sent
    assert sparql_kg.has_relation(hostile) is False
    assert sparql_kg.queries_sent == sent


@pytest.mark.parametrize("literal", MALFORMED_LITERALS)
def test_malformed_literals_are_rejected(sparql_kg: SparqlKG, literal: str) -> None:
    _refused_before_sending(sparql_kg, lambda: sparql_kg.relations(literal, Direction.IN))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.names([literal]))
    _refused_before_sending(sparql_kg, lambda: sparql_kg.filter_by_constraint(
        ["m.e001"], (), ConstraintChain(0, parse_chain("test.film.genre"), literal)))


@pytest.mark.parametrize("value", ['"} ; DROP ALL ; {"', '\\" . } DELETE WHERE { ?s ?p ?o } #', "x\" ) || true || (\"",
                                   "'''", '"""', "\\", "line\nbreak } ;", "\x00\x01\x7f", "\\u0022 } DROP ALL"])
def test_hostile_literal_targets_are_escaped(sparql_kg: SparqlKG, value: str) -> None:
    """Escaped, so the query keeps its shape: an empty answer (nothing has that value), not a server error."""
    main = (Hop("test.place.contained_by", Direction.IN),)
    constraint = ConstraintChain(1, parse_chain("test.film.tagline"), make_literal(value))
    result = sparql_kg.filter_by_constraint(["m.e000"], main, constraint)
    assert result.entities == [] and not result.truncated
    assert sparql_kg.search(value) == []
    assert isinstance(sparql_kg.search(value, fuzzy=True, limit=3), list)


def test_hostile_looking_data_is_matched_exactly(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG,
                                                generated: GeneratedKG) -> None:
    """Values that look like injections are data: escaping must keep them matchable, not just harmless."""
    for literal in generated.literals:
        holders = embedded_kg.chain_relations([literal], (), Direction.IN)
        for relation in holders:
            heads = set(embedded_kg.neighbors(literal, relation, Direction.IN, limit=1000))
            chain = (Hop(relation, Direction.OUT),)
            constraint = ConstraintChain(0, chain, literal)
            got = sparql_kg.filter_by_constraint(sorted(heads), (), constraint)
            assert set(got.entities) == heads, literal
    name = generated.names["m.e009"]
    assert [m.id for m in sparql_kg.search(name)] == ["m.e009"]


def test_the_store_is_unchanged_afterwards(sparql_kg: SparqlKG, embedded_kg: EmbeddedKG) -> None:
    # Runs after the hostile tests in this module: nothing was dropped or deleted.
    assert sparql_kg.stats().triples == embedded_kg.stats().triples


# -- the read-only guard ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", [
    "INSERT DATA { <http://a> <http://b> <http://c> }",
    "insert data { <http://a> <http://b> <http://c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "LOAD <http://example.org/data.nt>",
    "CLEAR ALL",
    "DROP GRAPH <http://kgqa.local/graph>",
    "CREATE GRAPH <http://example.org/g>",
    "COPY DEFAULT TO <http://example.org/g>",
    "MOVE DEFAULT TO <http://example.org/g>",
    "ADD DEFAULT TO <http://example.org/g>",
    "SELECT * WHERE { ?s ?p ?o } ; DROP ALL",
    "PREFIX ex: <http://example.org/> SELECT * WHERE { ?s ?p ?o } ; CLEAR DEFAULT",
    "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "DESCRIBE <http://example.org/a>",
    "DEFINE sql:log-enable 3 SELECT * WHERE { ?s ?p ?o }",
    "SELECT (bif:system('rm -rf /') AS ?x) WHERE { }",
    "SELECT * WHERE { ?s ?p ?o FILTER(sql:exec('x')) }",
    "",
])
def test_guard_refuses_anything_but_select_and_ask(query: str) -> None:
    with pytest.raises(KGError, match="refusing"):
        ensure_read_only(query)


@pytest.mark.parametrize("query", [
    "SELECT ?add ?drop WHERE { ?add <http://example.org/DROP> ?drop }",
    'SELECT ?s WHERE { ?s ?p "INSERT DATA { <a> <b> <c> }" }',
    "SELECT ?s WHERE { ?s ?p 'DELETE WHERE' }",
    'SELECT ?s WHERE { ?s ?p """multi\nline CLEAR ALL""" }',
    "# DROP ALL in a comment\nSELECT ?s WHERE { ?s ?p ?o }",
    "PREFIX ex: <http://example.org/> SELECT ?s WHERE { ?s ex:p ?o }",
    "ASK { ?s ?p ?o }",
    '  select ?n where { ?n bif:contains "\\"word\\"" }',
    "SELECT ?s WHERE { ?s ?p " + sparql_string('"} ; DROP ALL ; {"') + " }",
])
def test_guard_accepts_reads_with_keywords_in_iris_literals_variables_and_comments(query: str) -> None:
    ensure_read_only(query)


# -- id grammars: an id the schema accepts is compiled into a query without an IRI check ------------------------------

WIKIDATA_ENTITY_NEAR_MISSES = ["Q", "Q0", "Q007", "Q0x", "Q42x", "q5", "Q-1", "Q 42", " Q42", "Q42 ", "Q42\n", "\nQ42",
                               "Q٤٢", "Q４２", "Q42.5", "P31", "L7", "wd:Q42", "Q42>", "wds:", "wds:a b", "wds:a\n",
                               "wds:a>", ""]
WIKIDATA_RELATION_NEAR_MISSES = ["wdt:P", "wdt:P0", "wdt:P031", "wdt:p31", "wdt:Q31", "wdt:P31\n", "P31", "wdt:P31 ",
                                 "rdfs:label", "wdtx:P31", "wdt:P٣١", ""]
FREEBASE_NEAR_MISSES = ["m.", "m.0abc\n", "m.0ABC", "x.0abc", "m0abc", "m.0a b", "m.0a>", "m.0a}"]
FREEBASE_RELATION_NEAR_MISSES = ["film.film.directed_by\n", "film", "film..directed_by", "film.film directed_by",
                                 "film.film.directed_by>", ".film.film"]


@pytest.mark.parametrize("entity", WIKIDATA_ENTITY_NEAR_MISSES)
def test_wikidata_entity_grammar_refuses_near_misses(entity: str) -> None:
    from kgqa.kg.schema import get_schema

    schema = get_schema("wikidata")
    assert not schema.is_valid_entity(entity)
    try:
        iri = schema.entity_iri(entity)
    except KGError:
        return
    assert check_iri(iri) == iri  # anything else is percent-encoded into a valid IRI, never written as is


@pytest.mark.parametrize("relation", WIKIDATA_RELATION_NEAR_MISSES)
def test_wikidata_relation_grammar_refuses_near_misses(relation: str) -> None:
    from kgqa.kg.schema import get_schema

    assert not get_schema("wikidata").is_valid_relation(relation)


@pytest.mark.parametrize("entity", FREEBASE_NEAR_MISSES)
def test_freebase_grammar_refuses_near_misses(entity: str) -> None:
    from kgqa.kg.schema import FREEBASE_ID_RE, get_schema

    schema = get_schema("freebase")
    assert not schema.is_valid_entity(entity) and FREEBASE_ID_RE.match(entity) is None


@pytest.mark.parametrize("relation", FREEBASE_RELATION_NEAR_MISSES)
def test_freebase_relation_grammar_refuses_near_misses(relation: str) -> None:
    from kgqa.kg.schema import get_schema

    schema = get_schema("freebase")
    assert not schema.is_valid_relation(relation)
    assert "\n" not in schema.relation_iri(relation)


def test_id_grammars_accept_the_real_forms() -> None:
    from kgqa.kg.schema import get_schema

    wikidata, freebase = get_schema("wikidata"), get_schema("freebase")
    for entity in ("Q42", "Q1", "Q1234567890", "wds:Q42-31a4f8e2-4f4d-bc5b-0d1e9f0d5f1b",
                   "wds:Q42$31A4F8E2-4F4D-BC5B-0D1E9F0D5F1B"):
        assert wikidata.is_valid_entity(entity), entity
        assert check_iri(wikidata.entity_iri(entity))
    for relation in ("wdt:P31", "p:P6", "ps:P569", "pq:P580", "wdt:P1"):
        assert wikidata.is_valid_relation(relation), relation
    for entity in ("m.0abc", "m.0d_nolan", "g.11b6d2_x9"):
        assert freebase.is_valid_entity(entity), entity
    assert freebase.is_valid_relation("film.film.directed_by")


# -- federated queries (issue 16, finding 8): SERVICE makes the endpoint fetch a URL of the query's choosing ----------

SERVICE_QUERIES = [
    "SELECT * WHERE { SERVICE <http://169.254.169.254/latest/meta-data/> { ?s ?p ?o } }",
    "select * where { service <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE SILENT <http://internal.example/sparql> { ?s ?p ?o } }",
    "SELECT * WHERE { ?e ?q ?url . SERVICE ?url { ?s ?p ?o } }",  # an endpoint read from the data
    "SELECT * WHERE { ?s ?p ?o .SERVICE<http://x.example/>{ ?a ?b ?c } }",  # no space around the keyword
    "SELECT * WHERE { SERVICE# a comment\n<http://x.example/> { ?s ?p ?o } }",
    "PREFIX ex: <http://x.example/> SELECT * WHERE { SERVICE ex:sparql { ?s ?p ?o } }",
    "SELECT * WHERE { SERV\\u0049CE <http://x.example/> { ?s ?p ?o } }",  # spelt with a codepoint escape
    "ASK { SERVICE <http://x.example/> { ?s ?p ?o } }",
]


@pytest.mark.parametrize("query", SERVICE_QUERIES)
def test_guard_refuses_federated_queries_unless_allowed(query: str) -> None:
    with pytest.raises(KGError, match=r"refusing to send a federated query \(SERVICE\).*allow_service=True"):
        ensure_read_only(query)
    ensure_read_only(query, allow_service=True)


@pytest.mark.parametrize("query", [
    "SELECT ?service WHERE { ?service <http://example.org/SERVICE> ?o }",
    'SELECT ?s WHERE { ?s ?p "SERVICE <http://x.example/> { }" }',
    "SELECT ?s WHERE { ?s ?p 'service' }",
    "# SERVICE <http://x.example/> in a comment\nSELECT ?s WHERE { ?s ?p ?o }",
    "PREFIX ex: <http://example.org/> SELECT ?s WHERE { ?s ex:service ?o }",
    "PREFIX service: <http://example.org/> SELECT ?s WHERE { ?s service:p ?o }",
    "SELECT ?s WHERE { ?s ?p " + sparql_string("x SERVICE <http://x.example/> { }") + " }",
])
def test_guard_accepts_service_as_a_word_inside_names_strings_and_comments(query: str) -> None:
    ensure_read_only(query)


@pytest.mark.parametrize("query", [
    "INS\\u0045RT DATA { <http://a> <http://b> <http://c> }",
    "SELECT * WHERE { ?s ?p ?o } ; \\u0044ROP ALL",
    "\\U00000044ROP ALL",
])
def test_guard_reads_codepoint_escapes_as_the_server_does(query: str) -> None:
    with pytest.raises(KGError, match="refusing"):
        ensure_read_only(query)


def test_sparql_kg_refuses_service_before_sending_unless_opened_with_allow_service(
        fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy()
    query = "SELECT ?s WHERE { SERVICE SILENT <http://127.0.0.1:9/sparql> { ?s ?p ?o } } LIMIT 1"
    kg = SparqlKG(proxy.url, "freebase")
    allowed = SparqlKG(proxy.url, "freebase", allow_service=True)
    try:
        with pytest.raises(KGError, match=r"federated query \(SERVICE\)"):
            kg.select(query)
        assert proxy.requests == 0
        try:
            allowed.select(query)
        except KGError as exc:  # whatever the server makes of it: the point is that it was sent
            assert "refusing" not in str(exc)
        assert proxy.requests == 1 and b"SERVICE" in proxy.bodies[0]
        # Compiled queries never need it and still pass.
        assert kg.relations("m.e001")
    finally:
        kg.close()
        allowed.close()


def test_mutating_text_is_refused_before_sending(fault_proxy: Callable[..., FaultProxy]) -> None:
    proxy = fault_proxy()
    kg = SparqlKG(proxy.url, "freebase")
    try:
        for query in ("INSERT DATA { <http://a> <http://b> <http://c> }", "DROP ALL",
                      "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }"):
            with pytest.raises(KGError, match="refusing"):
                kg.select(query)
        assert proxy.requests == 0
        assert kg.select("SELECT ?p WHERE { <http://rdf.freebase.com/ns/m.e001> ?p ?o } LIMIT 1")
        assert proxy.requests == 1
    finally:
        kg.close()


# -- property tests --------------------------------------------------------------------------------------------------


def _safe(call: Callable[[], object]) -> object:
    """Either a validation KGError or an answer; a server-side error means the text reached the query unescaped."""
    try:
        return call()
    except KGError as exc:
        assert not any(marker in str(exc) for marker in SERVER_ERRORS), str(exc)
        return None


@SETTINGS
@given(text=st.text(max_size=30))
def test_any_text_anywhere_is_rejected_or_harmless(sparql_kg: SparqlKG, text: str) -> None:
    chain = parse_chain("test.film.starring")
    _safe(lambda: sparql_kg.relations(text))
    _safe(lambda: sparql_kg.neighbors("m.e001", text))
    _safe(lambda: sparql_kg.run_chain([text], chain))
    _safe(lambda: sparql_kg.run_chain(["m.e001"], (Hop(text, Direction.IN),)))
    _safe(lambda: sparql_kg.names([text]))
    _safe(lambda: sparql_kg.search(text, fuzzy=True, limit=3))
    _safe(lambda: sparql_kg.filter_by_constraint(["m.e001"], chain, ConstraintChain(1, chain, make_literal(text))))


@pytest.fixture(scope="module")
def generic_kgs() -> Iterator[dict[str, SparqlKG]]:
    kgs: dict[str, SparqlKG] = {}
    yield kgs
    for kg in kgs.values():
        kg.close()


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(min_size=1, max_size=30))
def test_generic_schema_encodes_any_label_into_an_iri(sparql_kg: SparqlKG, generic_kgs: dict[str, SparqlKG],
                                                     text: str) -> None:
    """Under the generic schema almost any label is a valid id: it is percent-encoded, so the query still runs and
    simply finds nothing."""
    if sparql_kg.endpoint not in generic_kgs:
        generic_kgs[sparql_kg.endpoint] = SparqlKG(sparql_kg.endpoint, schema="generic",
                                                   default_graph=sparql_kg.default_graph)
    generic = generic_kgs[sparql_kg.endpoint]
    assert _safe(lambda: generic.relations(text)) in (None, [])
    assert _safe(lambda: generic.run_chain([text], (Hop(text, Direction.OUT),)).entities) in (None, [])
