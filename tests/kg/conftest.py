"""Shared KG fixtures: a generated Freebase-style KG, its embedded store, and real Oxigraph / Virtuoso servers loaded with
the same data (session-scoped: each server starts once per test run)."""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kgqa.kg.base import Direction, EntityMatch, KGStats, make_literal
from kgqa.kg.derived import DerivedOps
from kgqa.kg.embedded import EmbeddedKG, EmbeddedKGBuilder
from kgqa.kg.schema import Schema
from kgqa.kg.servers import OxigraphServer, VirtuosoServer, export_ntriples
from kgqa.kg.sparql import SparqlKG

XSD = "http://www.w3.org/2001/XMLSchema#"
IN_CI = os.environ.get("CI", "").lower() == "true"


def data_dir() -> Path:
    """The shared benchmark data (KGQA_DATA_DIR, default ../shared/data next to the repository)."""
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    return Path(os.environ.get("KGQA_DATA_DIR", default))


def require_data(*parts: str) -> Path:
    path = data_dir().joinpath(*parts)
    if not path.exists():
        if IN_CI:
            pytest.fail(f"test data {path} is missing (CI=true, so this is an error)")
        pytest.skip(f"test data {path} is missing")
    return path


def require_virtuoso() -> None:
    if shutil.which("virtuoso-t") is None or shutil.which("isql-vt") is None:
        if IN_CI:
            pytest.fail("virtuoso-t / isql-vt not found and CI=true: install virtuoso-opensource")
        pytest.skip("virtuoso-t not installed")


# ---------------------------------------------------------------------------------------------------------------------
# The generated KG


@dataclass
class GeneratedKG:
    """A small Freebase-style KG with the awkward parts on purpose: nameless CVT mediators, a hub, literals (plain,
    typed, language-tagged, with quotes/backslashes/newlines/unicode), the same lexical value under several datatypes,
    noise relations, unnamed entities and named entities of degree 0."""

    triples: list[tuple[str, str, str]]
    names: dict[str, str]
    entities: list[str]
    cvts: list[str]
    isolated: list[str]
    literals: list[str]
    relations: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """Every node kind, plus an id that is not in the KG."""
        return [*self.entities, *self.cvts, *self.isolated, *self.literals, "m.unknown"]

    @property
    def topics(self) -> list[str]:
        """Topic candidates with edges (entities, CVTs, literals), the hub, an isolated and an unknown id."""
        return [*self.entities[:30], *self.cvts[:6], *self.cvts[-2:], *self.literals[:6], "m.e000", "m.unknown",
                *self.isolated]

    def pick(self, pool: list[str], index: int) -> str:
        return pool[index % len(pool)]


FACT_RELATIONS = [
    "test.film.directed_by", "test.film.starring", "test.performance.actor", "test.performance.character",
    "test.person.born_in", "test.place.contained_by", "test.film.genre", "test.film.sequel",
]
LITERAL_RELATIONS = ["test.film.release_year", "test.film.tagline", "test.film.runtime", "test.film.released_on",
                     "test.film.in_colour", "test.film.rating"]
NOISE_RELATIONS = ["type.object.type", "common.topic.notable_for"]


def generate_kg(seed: int = 7) -> GeneratedKG:
    rng = random.Random(seed)
    entities = [f"m.e{i:03d}" for i in range(120)]
    # Mostly Freebase-style mediators, plus two blank-node ids as an RDF import produces them.
    cvts = [f"m.cvt{i:02d}" for i in range(23)] + ["_:b1", "_:b2"]
    isolated = ["m.lonely1", "m.lonely2", "m.lonely3"]
    hub = "m.e000"
    years = [make_literal(str(y), datatype=XSD + "gYear") for y in (1967, 1999, 2010)]
    literals = [
        *years,
        make_literal("1967"),  # same lexical value as the gYear: constraint targets match both
        make_literal("1967", datatype=XSD + "integer"),
        make_literal("142", datatype=XSD + "integer"),
        make_literal("2010-07-16", datatype=XSD + "date"),
        make_literal("true", datatype=XSD + "boolean"),
        make_literal("1.5", datatype=XSD + "double"),
        make_literal("Le rêve", lang="fr"),
        make_literal('A "quoted" tag\\line'),
        make_literal("two\nlines\tand a tab"),
        make_literal("} ; DROP ALL ; {"),
        make_literal("Ünïcödé ✓ 映画"),
    ]
    triples: set[tuple[str, str, str]] = set()
    for i, head in enumerate(entities):
        for _ in range(rng.randint(0, 4)):
            rel = rng.choice(FACT_RELATIONS[:2] + FACT_RELATIONS[4:])
            triples.add((head, rel, rng.choice(entities)))
        if i % 3 == 0:
            triples.add((head, rng.choice(LITERAL_RELATIONS), rng.choice(literals)))
        if i % 7 == 0:
            triples.add((head, rng.choice(NOISE_RELATIONS), rng.choice(entities[:5])))
    # CVT mediators: film -starring-> cvt -actor/character-> person
    for cvt in cvts:
        film = rng.choice(entities[:60])
        triples.add((film, "test.film.starring", cvt))
        triples.add((cvt, "test.performance.actor", rng.choice(entities[60:])))
        if rng.random() < 0.7:
            triples.add((cvt, "test.performance.character", rng.choice(entities[60:])))
    # A hub with a wide neighbourhood (for limits and truncation).
    for other in entities[1:80]:
        triples.add((other, "test.place.contained_by", hub))
    for lit in literals:
        triples.add((entities[rng.randint(1, 119)], rng.choice(LITERAL_RELATIONS), lit))
    names: dict[str, str] = {}
    odd_names = ["Amélie", 'The "Quoted" One', "Back\\slash", "Brace } ; DROP ALL", "東京", "O'Brien"]
    for i, entity in enumerate(entities):
        if i % 11 == 5:
            continue  # unnamed (but not a CVT by type; names() says None all the same)
        names[entity] = f"{odd_names[(i // 9) % len(odd_names)]} {i}" if i % 9 == 0 else f"Entity {i}"
    names["m.lonely1"] = "Lonely One"
    names["m.lonely2"] = "Lonely Two"
    names["m.lonely3"] = "Entity 7"  # same name as m.e007: search returns both
    ordered = sorted(triples)
    return GeneratedKG(ordered, names, entities, cvts, isolated, literals,
                       sorted({r for _, r, _ in ordered}))


# ---------------------------------------------------------------------------------------------------------------------
# Session fixtures


@pytest.fixture
def need_virtuoso() -> None:
    """Skip (fail in CI) when Virtuoso is not installed."""
    require_virtuoso()


@pytest.fixture(scope="session")
def shared_data() -> Callable[..., Path]:
    """``shared_data("freebase", "names.tsv")``: a path in the shared data dir, skipping (failing in CI) if absent."""
    return require_data


@pytest.fixture(scope="session")
def generated() -> GeneratedKG:
    return generate_kg()


@pytest.fixture(scope="session")
def embedded_kg(generated: GeneratedKG, tmp_path_factory: pytest.TempPathFactory) -> EmbeddedKG:
    builder = EmbeddedKGBuilder(schema="freebase")
    builder.add_triples(generated.triples)
    for entity, name in generated.names.items():
        builder.add_name(entity, name)
    return builder.build(tmp_path_factory.mktemp("generated") / "store")


@pytest.fixture(scope="session")
def generated_nt(embedded_kg: EmbeddedKG, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nt") / "generated.nt"
    export_ntriples(embedded_kg, path)
    return path


@pytest.fixture(scope="session")
def oxigraph_server(generated_nt: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    with OxigraphServer([generated_nt], tmp_path_factory.mktemp("oxigraph")) as server:
        yield server


@pytest.fixture(scope="session")
def virtuoso_server(generated_nt: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    require_virtuoso()
    with VirtuosoServer([generated_nt], tmp_path_factory.mktemp("virtuoso")) as server:
        yield server


@pytest.fixture(scope="session")
def oxigraph_kg(oxigraph_server: OxigraphServer) -> Iterator[SparqlKG]:
    with SparqlKG(oxigraph_server.url, schema="freebase", timeout=20) as kg:
        yield kg


@pytest.fixture(scope="session")
def virtuoso_kg(virtuoso_server: VirtuosoServer) -> Iterator[SparqlKG]:
    with SparqlKG(virtuoso_server.url, schema="freebase", timeout=20, default_graph=virtuoso_server.graph) as kg:
        yield kg


@pytest.fixture(scope="session", params=["oxigraph", pytest.param("virtuoso", marks=pytest.mark.virtuoso)])
def sparql_kg(request: pytest.FixtureRequest) -> SparqlKG:
    """Each SPARQL server in turn (session scope, so hypothesis tests can use it)."""
    return request.getfixturevalue(f"{request.param}_kg")


# ---------------------------------------------------------------------------------------------------------------------
# The generic derived operations over a backend's primitives


class PrimitivesOnly(DerivedOps):
    """A backend seen only through its primitives (:class:`~kgqa.kg.base.KGCore`): every derived operation is the
    generic one of :class:`~kgqa.kg.derived.DerivedOps`, run over the wrapped backend's relations / neighbors /
    has_entity. ``calls`` counts the primitive calls."""

    def __init__(self, inner: EmbeddedKG | SparqlKG) -> None:
        self.inner = inner
        self.max_frontier = inner.max_frontier
        self.calls = 0

    def __repr__(self) -> str:
        return f"PrimitivesOnly({self.inner!r})"

    @property
    def schema(self) -> Schema:
        return self.inner.schema

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        self.calls += 1
        return self.inner.relations(entity, direction)

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        self.calls += 1
        return self.inner.neighbors(entity, relation, direction, limit=limit)

    def names(self, ids: list[str]) -> dict[str, str | None]:
        return self.inner.names(ids)

    def search(self, label: str, *, fuzzy: bool = False, limit: int = 10) -> list[EntityMatch]:
        return self.inner.search(label, fuzzy=fuzzy, limit=limit)

    def has_entity(self, entity: str) -> bool:
        self.calls += 1
        return self.inner.has_entity(entity)

    def has_relation(self, relation: str) -> bool:
        return self.inner.has_relation(relation)

    def vocabulary(self) -> list[str]:
        return self.inner.vocabulary()

    def stats(self) -> KGStats:
        return self.inner.stats()

    def close(self) -> None:  # the wrapped backend belongs to its fixture
        pass


@pytest.fixture(scope="session")
def primitives_only() -> type[PrimitivesOnly]:
    """The :class:`PrimitivesOnly` wrapper class (conftest is not importable from the tests)."""
    return PrimitivesOnly


DERIVED_FORMS = ["oxigraph", pytest.param("virtuoso", marks=pytest.mark.virtuoso), "embedded-generic",
                 "oxigraph-generic", pytest.param("virtuoso-generic", marks=pytest.mark.virtuoso)]


@pytest.fixture(scope="session", params=DERIVED_FORMS)
def derived_kg(request: pytest.FixtureRequest) -> EmbeddedKG | SparqlKG | PrimitivesOnly:
    """Every form of the derived operations the embedded store's native ones are compared with: each SPARQL server's
    native (compiled) version, and the generic version over the primitives of the embedded store and of each server."""
    backend, _, form = request.param.partition("-")
    kg = request.getfixturevalue(f"{backend}_kg")
    return PrimitivesOnly(kg) if form == "generic" else kg


# ---------------------------------------------------------------------------------------------------------------------
# Fault injection: a real HTTP server on 127.0.0.1 in front of a real endpoint


class FaultProxy:
    """Forwards SPARQL requests to ``upstream`` over real HTTP, except that it first plays a script of faults.

    Script items: an int (answer with that HTTP status), ``("status", code, body)``, ``("sleep", seconds)`` (then
    forward), ``("header", name, value)`` (forward and add a response header), ``"pass"`` (forward). When the script
    is used up every request is forwarded. ``requests`` counts what arrived.
    """

    def __init__(self, upstream: str | None, script: list[object] | None = None) -> None:
        import http.server
        import threading

        import httpx

        self.upstream = upstream
        self.script = list(script or [])
        self.requests = 0
        self.bodies: list[bytes] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                proxy.requests += 1
                proxy.bodies.append(body)
                step = proxy.script.pop(0) if proxy.script else "pass"
                extra: dict[str, str] = {}
                if isinstance(step, int):
                    self._answer(step, b"injected failure", {"Content-Type": "text/plain"})
                    return
                if isinstance(step, tuple) and step[0] == "status":
                    self._answer(int(step[1]), str(step[2]).encode(), {"Content-Type": "text/plain"})
                    return
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(float(step[1]))
                if isinstance(step, tuple) and step[0] == "header":
                    extra[str(step[1])] = str(step[2])
                assert proxy.upstream is not None
                upstream = httpx.post(proxy.upstream, content=body, timeout=30, headers={
                    "Content-Type": self.headers.get("Content-Type", "application/x-www-form-urlencoded"),
                    "Accept": self.headers.get("Accept", "application/sparql-results+json")})
                self._answer(upstream.status_code, upstream.content,
                             {"Content-Type": upstream.headers.get("content-type", "application/octet-stream"),
                              **extra})

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/sparql"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fault_proxy(oxigraph_server: OxigraphServer) -> Iterator[Callable[..., FaultProxy]]:
    """``fault_proxy(script)``: a FaultProxy in front of the session Oxigraph server (closed after the test)."""
    made: list[FaultProxy] = []

    def make(script: list[object] | None = None) -> FaultProxy:
        proxy = FaultProxy(oxigraph_server.url, script)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()
