"""The SPARQL backend: the KnowledgeGraph protocol over any SPARQL 1.1 endpoint (Virtuoso, Oxigraph, QLever, ...).

:class:`SparqlKG` answers each operation in as few queries as it can: a chain is one query (:mod:`kgqa.kg.sparql.compiler`
says how it compiles and what may reach a query text; :mod:`kgqa.kg.sparql.results` how answers are read back).

Known limits: an intermediate frontier is capped with a subquery LIMIT (``max_frontier``), which a single query cannot
observe, so ``truncated`` reports the final caps (limit, paths) and Virtuoso's own partial-result signals only. An
endpoint's own blank nodes cannot be addressed across queries: a ``_:`` id it returns matches nothing when sent back
(the ``_:bN`` ids of an exported embedded store are IRIs there, and work).

Batches: ``neighbors_many`` and each level of ``subgraph`` (:mod:`kgqa.kg.sparql.subgraph`) ask for 100 entities per
query; a per-entity or per-relation LIMIT is a UNION of small subqueries, used only when a hub passes the batch's total
cap.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Collection, Sequence
from typing import Any, Literal
from urllib.parse import urlparse

import httpx

from kgqa.errors import ConfigError, KGError, QueryTimeout
from kgqa.kg.base import (
    DEFAULT_CHAIN_LIMIT,
    DEFAULT_MAX_FRONTIER,
    DEFAULT_MAX_PATHS,
    DEFAULT_MAX_PER_NODE,
    DEFAULT_MAX_TRIPLES,
    DEFAULT_SUBGRAPH_DEPTH,
    Chain,
    ChainResult,
    ConstraintChain,
    Direction,
    EntityMatch,
    Hop,
    KGStats,
    Subgraph,
    is_literal,
    literal_value,
)
from kgqa.kg.derived import (
    DerivedOps,
    SubgraphCollector,
    check_constraint,
    check_count,
    check_ids,
    check_subgraph_args,
)
from kgqa.kg.schema import Schema, check_iri, get_schema
from kgqa.kg.sparql.compiler import QueryCompiler
from kgqa.kg.sparql.endpoint import SparqlEndpoint
from kgqa.kg.sparql.guard import sparql_string
from kgqa.kg.sparql.results import ResultReader, guard_result_reading
from kgqa.kg.sparql.subgraph import SubgraphLevels
from kgqa.normalize import fold, normalize_label

__all__ = ["SparqlKG"]

#: Entities per query of the batched operations (names, neighbors_many, a subgraph level).
_BATCH = 100


#: Seconds per HTTP attempt and extra attempts, unless given or set (``KGQA_KG_TIMEOUT`` / ``kg_timeout``,
#: ``KGQA_KG_RETRIES`` / ``kg_retries``, ``kgqa eval --kg-timeout/--kg-retries``).
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 2


def _number_setting(key: str, value: float | None, kind: type, default: float) -> float:
    """An explicit option, else ``KGQA_<KEY>``, else the config file, else ``default``; a clear error when malformed."""
    from kgqa import config

    raw, origin = config.get_with_origin(key, value)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} from {origin} must be a number, got {raw!r}") from None


class SparqlKG(DerivedOps):
    """A KnowledgeGraph backed by a SPARQL 1.1 endpoint over HTTP.

    ``timeout`` is per HTTP attempt (seconds); ``retries`` extra attempts are made on 5xx, timeouts and connection
    errors with exponential backoff plus jitter. ``default_graph`` is sent as ``default-graph-uri`` (Virtuoso's default
    graph is the union of all graphs, its system graphs included). ``virtuoso=None`` detects Virtuoso from the
    ``Server`` header once; ``fulltext`` picks how fuzzy search finds candidates (``auto``: ``bif:contains`` on
    Virtuoso, a bounded CONTAINS scan elsewhere).

    A well-formed relation that the KG does not have simply matches nothing until the vocabulary is known
    (``vocabulary()``); from then on it is refused with KGError, as the embedded store does. ``strict_vocabulary``
    fetches the vocabulary on first use (one ``SELECT DISTINCT ?p``: cheap on small KGs, a long query on Freebase).

    Raw queries (:meth:`select`) pass the same read-only guard as compiled ones. A federated query (``SERVICE <url>``)
    is refused unless ``allow_service=True``: it makes the endpoint fetch a URL of the query's choosing (from the
    endpoint's network, which may reach what the caller cannot), so allow it only for query text you trust.
    """

    def __init__(self, endpoint_url: str, schema: str | Schema | None = "freebase", *, timeout: float | None = None,
                 retries: int | None = None, backoff: float = 0.5, max_backoff: float = 8.0, default_graph: str | None = None,
                 virtuoso: bool | None = None, fulltext: Literal["auto", "bif", "contains"] = "auto",
                 max_frontier: int = DEFAULT_MAX_FRONTIER, stats_timeout: float = 10.0,
                 vocabulary_timeout: float | None = None, search_scan_limit: int = 500,
                 max_relations: int = 100_000, strict_vocabulary: bool = False,
                 headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, allow_service: bool = False) -> None:
        parsed = urlparse(endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"SPARQL endpoint {endpoint_url!r} is not an http(s) URL")
        timeout = _number_setting("kg_timeout", timeout, float, DEFAULT_TIMEOUT)
        retries = int(_number_setting("kg_retries", retries, int, DEFAULT_RETRIES))
        if timeout <= 0 or retries < 0 or max_frontier < 1:
            raise ConfigError(f"bad SPARQL options: timeout={timeout} (> 0), retries={retries} (>= 0), "
                              f"max_frontier={max_frontier} (>= 1)")
        if fulltext not in ("auto", "bif", "contains"):
            raise ConfigError(f"fulltext={fulltext!r} is not one of 'auto', 'bif', 'contains'")
        self.endpoint = endpoint_url
        self._schema = get_schema(schema)
        self.timeout = float(timeout)
        try:
            self.default_graph = check_iri(default_graph) if default_graph else None
        except KGError as exc:
            raise ConfigError(f"default_graph: {exc}") from None
        self._http = SparqlEndpoint(endpoint_url, timeout=timeout, retries=retries, backoff=backoff,
                                    max_backoff=max_backoff, default_graph=self.default_graph, headers=headers,
                                    transport=transport, allow_service=allow_service)
        self.stats_timeout = float(stats_timeout)
        self.vocabulary_timeout = float(vocabulary_timeout or max(self.timeout, 120.0))
        self.search_scan_limit = int(search_scan_limit)
        self.max_relations = int(max_relations)
        self.fulltext = fulltext
        self.strict_vocabulary = bool(strict_vocabulary)
        self._virtuoso = virtuoso
        self._lock = threading.Lock()
        self._vocab: list[str] | None = None
        self._vocab_iris: frozenset[str] | None = None
        self._relation_seen: dict[str, bool] = {}
        self._compiler = QueryCompiler(self._schema, max_frontier=int(max_frontier),
                                       known_predicates=self._known_predicates)
        self._reader = ResultReader(self._schema, self._compiler.name_iris)
        self._levels = SubgraphLevels(self._compiler, self._reader, self._select)

    @property
    def max_frontier(self) -> int:
        """Distinct entities a chain carries from one hop to the next (a subquery LIMIT per intermediate hop)."""
        return self._compiler.max_frontier

    @max_frontier.setter
    def max_frontier(self, value: int) -> None:
        self._compiler.max_frontier = int(value)

    def _known_predicates(self) -> frozenset[str] | None:
        """The endpoint's predicates once fetched (first fetched here with ``strict_vocabulary``), else None."""
        if self.strict_vocabulary and self._vocab_iris is None:
            self.vocabulary()
        return self._vocab_iris

    # -- plumbing --------------------------------------------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        return self._schema

    def __repr__(self) -> str:
        return f"SparqlKG({self.endpoint!r}, schema={self._schema.name!r})"

    @property
    def history(self) -> list[str]:
        """The last 50 query texts sent, most recent last (for traces and debugging)."""
        return self._http.history

    @property
    def queries_sent(self) -> int:
        """How many queries were sent (retries not counted)."""
        return self._http.queries_sent

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SparqlKG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _select(self, query: str, *, timeout: float | None = None, retries: int | None = None,
                strict: bool = True) -> tuple[list[dict[str, dict[str, str]]], bool]:
        return self._http.select(query, timeout=timeout, retries=retries, strict=strict)

    def _ask(self, query: str) -> bool:
        return self._http.ask(query)

    @property
    def is_virtuoso(self) -> bool:
        """Whether the endpoint is Virtuoso (from the constructor, else detected once from the Server header)."""
        if self._virtuoso is None:
            if self._http.server_header is None:
                self._http.send("ASK {}")
            self._virtuoso = "virtuoso" in (self._http.server_header or "").lower()
        return self._virtuoso

    def select(self, query: str, *, timeout: float | None = None) -> list[dict[str, str]]:
        """Run a raw read-only SELECT (guarded like every compiled query: no update, no vendor procedure, no ``SERVICE``
        unless the KG was opened with ``allow_service=True``); each row maps a variable to an id (entity id, relation
        IRI mapped to an entity id, or a literal in N-Triples form)."""
        rows, _ = self._select(query, timeout=timeout)
        return [{var: self._reader.node_id(term) for var, term in row.items()} for row in rows]

    # -- protocol: one hop -----------------------------------------------------------------------------------------

    def has_entity(self, entity: str) -> bool:
        """Whether ``entity`` occurs in any triple (a named entity of degree 0 occurs in its name triple)."""
        try:
            term = self._compiler.entity_term(entity)
        except KGError:
            return False
        if is_literal(entity):
            return self._ask(f"ASK {{ ?s ?p {term} }}")
        return self._ask(f"ASK {{ {{ {term} ?p ?o }} UNION {{ ?s ?p {term} }} }}")

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        term = self._compiler.entity_term(entity)
        pattern = f"{term} ?p ?x ." if Direction.parse(direction) is Direction.OUT else f"?x ?p {term} ."
        return self._relation_list(pattern)

    def _relation_list(self, pattern: str) -> list[str]:
        query = self._compiler.outer(f"{{ SELECT DISTINCT ?p WHERE {{ {pattern} }} }}", "?p", self.max_relations)
        rows, _ = self._select(query)
        predicates = {row["p"]["value"]: row["p"] for row in rows if "p" in row}
        return sorted(r for r in map(self._reader.relation, predicates.values()) if r is not None)

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        limit = max(int(limit), 0)
        triple = self._compiler.triple(self._compiler.entity_term(entity), Hop(relation, Direction.parse(direction)), "?x")
        if limit == 0:
            return []
        rows, _ = self._select(self._compiler.outer(f"{{ SELECT DISTINCT ?x WHERE {{ {triple} }} }}", "?x", limit))
        return [self._reader.node_id(row["x"]) for row in rows if "x" in row]

    def neighbors_many(self, entities: Sequence[str], relation: str, direction: Direction | str = Direction.OUT,
                       limit_per_entity: int = 100) -> dict[str, list[str]]:
        """One query per 100 entities; when the batch's total cap is hit (a hub among them), one more with a LIMIT per
        entity (a UNION of subqueries)."""
        check_ids(entities, "entities")
        limit = check_count(limit_per_entity, "limit_per_entity")
        hop = Hop(relation, Direction.parse(direction))
        triple = self._compiler.triple("?e", hop, "?x")  # validates the relation before anything is sent
        unique = list(dict.fromkeys(entities))
        terms = [self._compiler.entity_term(e) for e in unique]
        out: dict[str, list[str]] = {e: [] for e in unique}
        if limit == 0:
            return out
        for start in range(0, len(unique), _BATCH):
            batch = terms[start:start + _BATCH]
            cap = len(batch) * limit
            rows, partial = self._select(f"SELECT DISTINCT ?i ?x WHERE {{ {self._compiler.indexed_values('?e ?i', batch)} "
                                         f"{triple} }} LIMIT {cap + 1}", strict=False)
            if partial or len(rows) > cap:
                branches = " UNION ".join(f"{{ SELECT DISTINCT ?i ?x WHERE {{ VALUES (?e ?i) {{ ({term} {i}) }} "
                                          f"{triple} }} LIMIT {limit} }}" for i, term in enumerate(batch))
                rows, _ = self._select(f"SELECT ?i ?x WHERE {{ {branches} }}")
            for row in rows:
                found = out[unique[start + int(row["i"]["value"])]]
                if len(found) < limit:
                    found.append(self._reader.node_id(row["x"]))
        return out

    # -- subgraphs ---------------------------------------------------------------------------------------------------

    def subgraph(self, seeds: Sequence[str], *, depth: int = DEFAULT_SUBGRAPH_DEPTH,
                 max_per_node: int = DEFAULT_MAX_PER_NODE, max_triples: int = DEFAULT_MAX_TRIPLES,
                 relations: Collection[str] | None = None) -> Subgraph:
        """The generic BFS subgraph (:meth:`kgqa.kg.derived.DerivedOps.subgraph`) a level at a time: per 100 nodes of
        a level, one query per direction for all their edges; only when a hub among them passes the batch's total cap,
        counts per relation and then each kept group's edges (a LIMIT per cut group). Within a relation the neighbours
        are in id order; which ones a cut group keeps is the endpoint's choice."""
        allowed = check_subgraph_args(seeds, depth, max_per_node, max_triples, relations)
        predicates = None
        if allowed is not None:
            predicates = []
            for relation in sorted(allowed):
                with contextlib.suppress(KGError):  # a relation this endpoint cannot have is simply not followed
                    predicates.append(f"<{self._compiler.relation_iri(relation)}>")
        found = [s for s in dict.fromkeys(seeds) if self.has_entity(s)]
        collector = SubgraphCollector(found, max_triples)
        frontier = found
        for level in range(depth):
            expand = [n for n in frontier if not (level and is_literal(n))]
            nxt: list[str] = []
            for start in range(0, len(expand), _BATCH):
                edges, cut = self._levels.edges(expand[start:start + _BATCH], max_per_node, allowed, predicates)
                collector.truncated = collector.truncated or cut
                if not all(collector.add(triple, other, nxt) for triple, other in edges):
                    return collector.result()
            frontier = nxt
            if not frontier:
                break
        return collector.result()

    # -- protocol: chains ------------------------------------------------------------------------------------------

    def run_chain(self, topics: Sequence[str], chain: Chain, *, bindings: bool = False,
                  limit: int = DEFAULT_CHAIN_LIMIT, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
        check_count(limit)
        check_count(max_paths, "max_paths")
        chain = tuple(chain)
        check_ids(topics)
        if not topics:
            return ChainResult([], [] if bindings else None)
        if not bindings:
            return self._entities(self._compiler.chain_query(topics, chain, limit), f"?e{len(chain)}", limit)
        if not chain:
            result = self._entities(self._compiler.chain_query(topics, chain, limit), "?e0", limit)
            result.paths = [(e,) for e in result.entities]
            return result
        rows, partial = self._select(self._compiler.paths_query(topics, chain, max_paths), strict=False)
        paths = [tuple(self._reader.node_id(row[f"e{i}"]) for i in range(len(chain) + 1)) for row in rows]
        cut = partial or len(paths) > max_paths
        if cut:
            # The paths were cut, so they may miss some end entities: ask for the entities on their own.
            result = self._entities(self._compiler.chain_query(topics, chain, limit), f"?e{len(chain)}", limit)
            keep = set(result.entities)
            result.paths = [p for p in paths if p[-1] in keep][:max_paths]
            result.truncated = True
            return result
        entities = list(dict.fromkeys(p[-1] for p in paths))
        truncated = len(entities) > limit
        if truncated:
            entities = entities[:limit]
            keep = set(entities)
            paths = [p for p in paths if p[-1] in keep]
        return ChainResult(entities, paths, truncated)

    def _entities(self, query: str, var: str, limit: int) -> ChainResult:
        rows, partial = self._select(query, strict=False)
        name = var.lstrip("?")
        found = list(dict.fromkeys(self._reader.node_id(row[name]) for row in rows if name in row))
        return ChainResult(found[:limit], None, partial or len(found) > limit)

    def chain_relations(self, topics: Sequence[str], chain: Chain,
                        direction: Direction | str = Direction.OUT) -> list[str]:
        check_ids(topics)
        if not topics:
            return []
        block, var = self._compiler.frontier(self._compiler.values("?e0", topics), "?e0", tuple(chain), "e")
        edge = f"{var} ?p ?x ." if Direction.parse(direction) is Direction.OUT else f"?x ?p {var} ."
        return self._relation_list(f"{block} {edge}")

    # -- protocol: constraints -------------------------------------------------------------------------------------

    def _check_constraint(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain) -> None:
        check_ids(topics)
        check_constraint(main, constraint)

    def constraint_values(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                          limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        main = tuple(main)
        self._check_constraint(topics, main, constraint)
        check_count(limit)
        if not topics:
            return ChainResult([])
        s = constraint.source
        block, var = self._compiler.frontier(self._compiler.values("?e0", topics), "?e0", main[:s], "e")
        if s < len(main):
            # Only sources on a complete main path count: some path of the rest of the chain must leave them.
            rest = self._compiler.path_exists(var, main[s:], "r")
            block = f"{{ SELECT DISTINCT {var} WHERE {{ {block} FILTER EXISTS {{ {rest} }} }} }}"
        block, end = self._compiler.frontier(block, var, tuple(constraint.chain), "c", cap_last=False)
        return self._entities(self._compiler.outer(block, end, limit + 1), end, limit)

    def filter_by_constraint(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                             limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        main = tuple(main)
        self._check_constraint(topics, main, constraint)
        check_count(limit)
        if constraint.target is None:
            raise KGError("filter_by_constraint needs a constraint target; use constraint_values to list candidates")
        if not topics:
            return ChainResult([])
        s = constraint.source
        block, var = self._compiler.frontier(self._compiler.values("?e0", topics), "?e0", main[:s], "e")
        check = self._compiler.reaches_target(var, tuple(constraint.chain), constraint.target, "c")
        block = f"{{ SELECT DISTINCT {var} WHERE {{ {block} FILTER EXISTS {{ {check} }} }} }}"
        block, end = self._compiler.frontier(block, var, main[s:], "e", start=s, cap_last=False)
        return self._entities(self._compiler.outer(block, end, limit + 1), end, limit)

    # -- protocol: names and search --------------------------------------------------------------------------------

    def _name_rank(self, term: dict[str, str], predicate: str) -> tuple[int, int, str]:
        lang = (term.get("xml:lang") or "").lower()
        wanted = self._schema.language.lower()
        lang_rank = 0 if lang == wanted else 1 if lang.startswith(wanted + "-") else 2
        name_iris = self._compiler.name_iris
        pred_rank = name_iris.index(predicate) if predicate in name_iris else len(name_iris)
        return lang_rank, pred_rank, term.get("value", "")

    def names(self, ids: Sequence[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        entities: list[str] = []
        for node in ids:
            if is_literal(node):
                try:
                    out[node] = literal_value(node)
                except KGError as exc:
                    raise KGError(f"literal {node!r} is malformed ({exc})") from None
            else:
                self._compiler.entity_term(node)  # validate before anything is sent
                out[node] = None
                entities.append(node)
        unique = list(dict.fromkeys(entities))
        for start in range(0, len(unique), _BATCH):
            batch = unique[start:start + _BATCH]
            query = (f"SELECT ?e ?p ?n WHERE {{ {self._compiler.values('?e', batch)} "
                     f"VALUES ?p {{ {self._compiler.name_values} }} ?e ?p ?n . {self._compiler.lang_filter('?n')} }}")
            rows, _ = self._select(query)
            best: dict[str, tuple[tuple[int, int, str], str]] = {}
            for row in rows:
                if "e" not in row or "n" not in row:
                    continue
                entity = self._reader.node_id(row["e"])
                rank = self._name_rank(row["n"], row.get("p", {}).get("value", ""))
                if entity not in best or rank < best[entity][0]:
                    best[entity] = (rank, row["n"]["value"])
            for entity, (_, name) in best.items():
                if entity in out:
                    out[entity] = name
        return out

    def search(self, label: str, *, fuzzy: bool = False, limit: int = 10) -> list[EntityMatch]:
        """Exact: names equal to ``label`` as given, stripped, lower/title-cased, each plain and language-tagged
        (index lookups, cheap). Fuzzy adds candidates from ``bif:contains`` on Virtuoso (free-text index, cheap) or
        a CONTAINS scan over name literals elsewhere (cost: linear in the number of names, bounded by LIMIT and the
        timeout), reranked with rapidfuzz against the normalised label."""
        check_count(limit)
        key = normalize_label(label)
        if not key or limit == 0:
            return []
        variants = list(dict.fromkeys(v for v in (label, label.strip(), label.strip().lower(), label.strip().title(),
                                                  label.strip().capitalize()) if v))
        lang = self._schema.language
        terms = " ".join(f"{sparql_string(v)} {sparql_string(v)}@{lang}" for v in variants)
        query = self._compiler.outer(f"{{ SELECT DISTINCT ?e ?n WHERE {{ VALUES ?n {{ {terms} }} "
                            f"{self._compiler.name_triple} FILTER(!isLiteral(?e)) }} }}",
                            "?e ?n", max(limit, 100))
        rows, _ = self._select(query)
        exact: dict[str, EntityMatch] = {}
        for row in rows:
            entity = self._reader.node_id(row["e"])
            exact.setdefault(entity, EntityMatch(entity, row["n"]["value"], 1.0))
        matches = sorted(exact.values(), key=lambda m: m.id)
        if not fuzzy or len(matches) >= limit:
            return matches[:limit]
        candidates = self._fuzzy_candidates(label)
        from rapidfuzz import fuzz

        scored: dict[str, EntityMatch] = {m.id: m for m in matches}
        for entity, name in candidates:
            if entity in scored:
                continue
            other = normalize_label(name)
            # The embedded store's similarity, so scores mean the same on both backends.
            similarity = max(fuzz.ratio(key, other), fuzz.token_sort_ratio(key, other)) / 100.0
            score = 1.0 if other == key else min(0.99, similarity)
            scored[entity] = EntityMatch(entity, name, score)
        ranked = sorted(scored.values(), key=lambda m: (-m.score, m.name, m.id))
        return ranked[:limit]

    def _fuzzy_candidates(self, label: str) -> list[tuple[str, str]]:
        words = [w for w in re.findall(r"\w+", label.lower()) if w]
        if not words:
            return []
        if self.fulltext == "bif" or (self.fulltext == "auto" and self.is_virtuoso):
            # Free-text terms are letters and digits only, so no quote can reach the expression. Whole words of
            # >= 3 characters (Virtuoso rejects shorter or noise-only expressions) plus 4-character prefix
            # wildcards, which tolerate a typo after the fourth character.
            clean = [re.sub(r"[\W_]", "", v) for w in words for v in dict.fromkeys((w, fold(w)))]
            terms = [f'"{w}"' for w in clean if len(w) >= 3] + [f'"{w[:4]}*"' for w in clean if len(w) >= 5]
            if terms:
                expression = sparql_string(" OR ".join(list(dict.fromkeys(terms))[:12]))
                try:
                    return self._candidate_rows(f"?n bif:contains {expression} .")
                except QueryTimeout:
                    raise
                except KGError:
                    if self.fulltext == "bif":
                        raise
                    # The free-text engine refused this expression: scan for this one search.

        # A CONTAINS scan, in up to three passes while too little is found: all words (precise), any of the
        # longest words, any of their 3-character prefixes (tolerates later typos).
        def has(w: str) -> str:
            return f"CONTAINS(LCASE(STR(?n)), {sparql_string(w)})"

        longest = sorted(set(words), key=len, reverse=True)[:3]
        passes = [" && ".join(has(w) for w in words[:6]),
                  " || ".join(has(w) for w in longest),
                  " || ".join(has(p) for p in dict.fromkeys(w[:3] for w in longest if len(w) >= 4))]
        found: list[tuple[str, str]] = []
        for condition in dict.fromkeys(p for p in passes if p):
            found += self._candidate_rows(f"FILTER({condition})")
            if len(found) >= self.search_scan_limit // 4:
                break
        return list(dict.fromkeys(found))

    def _candidate_rows(self, condition: str) -> list[tuple[str, str]]:
        query = (f"SELECT ?e ?n WHERE {{ {self._compiler.name_triple} {self._compiler.lang_filter('?n')} "
                 f"FILTER(!isLiteral(?e)) {condition} }} LIMIT {self.search_scan_limit}")
        rows, _ = self._select(query, strict=False)
        return [(self._reader.node_id(r["e"]), r["n"]["value"]) for r in rows if "e" in r and "n" in r]

    # -- protocol: vocabulary and statistics -----------------------------------------------------------------------

    def has_relation(self, relation: str) -> bool:
        """In the vocabulary once it is fetched; before that, an indexed ``ASK`` (cached), falling back to the schema's
        grammar when the endpoint does not answer."""
        try:
            iri = self._compiler.relation_iri(relation)
        except KGError:
            return False
        if self._vocab_iris is not None:
            return True
        if iri not in self._relation_seen:
            try:
                self._relation_seen[iri] = self._ask(f"ASK {{ ?s <{iri}> ?o }}")
            except KGError:
                return self._schema.is_valid_relation(relation)
        return self._relation_seen[iri]

    def vocabulary(self) -> list[str]:
        """Every predicate of the endpoint (``SELECT DISTINCT ?p``, paged past server row caps); cached."""
        with self._lock:
            if self._vocab is None:
                page = 10_000
                iris: set[str] = set()
                offset = 0
                while True:
                    query = (f"SELECT ?p WHERE {{ {{ SELECT DISTINCT ?p WHERE {{ ?s ?p ?o }} }} }} ORDER BY ?p "
                             f"LIMIT {page} OFFSET {offset}")
                    rows, _ = self._select(query, timeout=self.vocabulary_timeout, strict=False)
                    iris.update(r["p"]["value"] for r in rows if r.get("p", {}).get("type") == "uri")
                    if len(rows) < page:
                        break
                    offset += page
                self._vocab_iris = frozenset(iris)
                self._vocab = sorted({self._schema.relation_id(p) for p in iris})
        return list(self._vocab)

    def stats(self) -> KGStats:
        """Counts by COUNT queries, each bounded by ``stats_timeout`` (``None`` when it runs out)."""
        # Name triples are counted under ``names`` only, as the embedded store does.
        name_iris = self._compiler.name_iris
        not_name = f"FILTER(?p NOT IN ({', '.join(f'<{p}>' for p in name_iris)}))" if name_iris else ""
        queries = {
            "triples": f"SELECT (COUNT(*) AS ?c) WHERE {{ ?s ?p ?o {not_name} }}",
            "relations": f"SELECT (COUNT(DISTINCT ?p) AS ?c) WHERE {{ ?s ?p ?o {not_name} }}",
            "entities": ("SELECT (COUNT(DISTINCT ?x) AS ?c) WHERE { { ?x ?p ?o } UNION "
                         "{ ?s ?p ?x FILTER(!isLiteral(?x)) } }"),
            "literals": f"SELECT (COUNT(DISTINCT ?o) AS ?c) WHERE {{ ?s ?p ?o FILTER(isLiteral(?o)) {not_name} }}",
            "names": f"SELECT (COUNT(*) AS ?c) WHERE {{ VALUES ?p {{ {self._compiler.name_values} }} ?s ?p ?o }}",
        }
        counts: dict[str, int | None] = {}
        for key, query in queries.items():
            try:
                rows, partial = self._select(query, timeout=self.stats_timeout, retries=0, strict=False)
                counts[key] = None if partial or not rows else int(rows[0]["c"]["value"])
            except QueryTimeout:
                counts[key] = None
        extra: dict[str, Any] = {"endpoint": self.endpoint, "default_graph": self.default_graph}
        if self._virtuoso is not None or self._http.server_header is not None:
            extra["server"] = self._http.server_header
        return KGStats(backend="sparql", schema=self._schema.name, extra=extra, **counts)


guard_result_reading(SparqlKG, ("has_entity", "relations", "neighbors", "neighbors_many", "subgraph", "run_chain",
                                 "chain_relations", "constraint_values", "filter_by_constraint", "names", "search",
                                 "has_relation", "vocabulary", "stats", "select"))
