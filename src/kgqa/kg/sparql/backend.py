"""The SPARQL backend: the KnowledgeGraph protocol over any SPARQL 1.1 endpoint (Virtuoso, Oxigraph, QLever, ...).

How chains compile. A chain becomes ONE query in which every hop is its own ``SELECT DISTINCT`` subquery over the previous
hop's distinct frontier::

    SELECT ?e2 WHERE { { SELECT DISTINCT ?e2 WHERE {
        { SELECT DISTINCT ?e1 WHERE { VALUES ?e0 { <topic> } ?e0 <r1> ?e1 . } LIMIT 100000 }
        ?e1 <r2> ?e2 . } } } LIMIT 1001

Written as a flat basic graph pattern the engine would enumerate every *path* before DISTINCT (two hops through a hub are
|paths| = sum of degree products); per-hop DISTINCT keeps the work at the size of each frontier. The outer
``SELECT ?x WHERE {{ SELECT DISTINCT ... }} LIMIT n`` shape is what Virtuoso needs to apply LIMIT after DISTINCT and is
valid everywhere. Fetching ``limit + 1`` rows tells a full result from a cut one.

Security: SPARQL text is only ever built from identifiers that passed the schema's grammar or an IRI check (and the
fetched vocabulary, when there is one), literals are escaped, and every compiled text passes a read-only guard before it
leaves the process.

Known limits: an intermediate frontier is capped with a subquery LIMIT (``max_frontier``), which a single query cannot
observe, so ``truncated`` reports the final caps (limit, paths) and Virtuoso's own partial-result signals only. An
endpoint's own blank nodes cannot be addressed across queries: a ``_:`` id it returns matches nothing when sent back
(the ``_:bN`` ids of an exported embedded store are IRIs there, and work).

Batches: ``neighbors_many`` and each level of ``subgraph`` ask for 100 entities per query, joined with an indexed
``VALUES (?e ?i)`` (never a UNION over unbound patterns, which some engines evaluate before the join); a per-entity or
per-relation LIMIT is a UNION of small subqueries, used only when a hub passes the batch's total cap. A
language-tagged literal gets a one-row VALUES of its own (Virtuoso 7 loses every answer of a multi-row, multi-variable
VALUES holding one: ``_rows``).

Length: this module is over the ~600-line guideline because :class:`SparqlKG` is one compiler: every operation is built
from the same few pieces (ids checked into terms, per-hop DISTINCT blocks, indexed VALUES) and the same vocabulary
state, and splitting the class would scatter them; the HTTP side and the query-text guard are modules of their own.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Literal
from urllib.parse import urlparse

import httpx

from kgqa.errors import ConfigError, KGError, KGQAError, QueryTimeout
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
    Triple,
    is_literal,
    literal_value,
    make_literal,
)
from kgqa.kg.derived import (
    DerivedOps,
    SubgraphCollector,
    check_constraint,
    check_count,
    check_ids,
    check_subgraph_args,
    fair_shares,
)
from kgqa.kg.schema import Schema, check_iri, get_schema
from kgqa.kg.sparql.endpoint import SparqlEndpoint
from kgqa.kg.sparql.guard import BNODE_RE, RDF_LANGSTRING, XSD, XSD_STRING, literal_term, sparql_string
from kgqa.normalize import fold, normalize_label

__all__ = ["SparqlKG"]

_NAME_BATCH = 100
# The end of a language-tagged literal written as a SPARQL term (see SparqlKG._rows).
_LANG_TAGGED = re.compile(r'"@[A-Za-z]+(?:-[A-Za-z0-9]+)*$')
#: Entities (or subgraph nodes) per query of the batched operations.
_BATCH = 100
#: A subgraph level asks for at least this many edges per direction in one go before it counts edges per relation.
_MIN_LEVEL_ROWS = 1000


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
        self.max_frontier = int(max_frontier)
        self.stats_timeout = float(stats_timeout)
        self.vocabulary_timeout = float(vocabulary_timeout or max(self.timeout, 120.0))
        self.search_scan_limit = int(search_scan_limit)
        self.max_relations = int(max_relations)
        self.fulltext = fulltext
        self.strict_vocabulary = bool(strict_vocabulary)
        self._virtuoso = virtuoso
        self._name_iris = [check_iri(p) for p in self._schema.name_predicates]
        self._name_values = " ".join(f"<{p}>" for p in self._name_iris)
        # One name predicate is written as a constant: Oxigraph plans ``VALUES ?p {...} ?e ?p ?n`` as a scan of every
        # name (a names batch took 3 s at 1M triples, 9 ms with the constant).
        self._name_triple = (f"?e <{self._name_iris[0]}> ?n . BIND(<{self._name_iris[0]}> AS ?p)"
                             if len(self._name_iris) == 1 else f"VALUES ?p {{ {self._name_values} }} ?e ?p ?n .")
        self._lock = threading.Lock()
        self._vocab: list[str] | None = None
        self._vocab_iris: frozenset[str] | None = None
        self._relation_seen: dict[str, bool] = {}

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
        return [{var: self._node_id(term) for var, term in row.items()} for row in rows]

    # -- identifiers -> SPARQL terms (the only way anything reaches a query) ----------------------------------------

    def _relation_iri(self, relation: str) -> str:
        if not isinstance(relation, str) or not relation:
            raise KGError(f"relation {relation!r} is not a non-empty string")
        try:
            if self._schema.is_valid_relation(relation):
                iri = check_iri(self._schema.relation_iri(relation))
            elif "://" in relation or relation.startswith("urn:"):
                iri = check_iri(relation)
            else:
                raise KGError("not in the schema's relation grammar")
        except KGError as exc:
            raise KGError(f"relation {relation!r} is not a valid {self._schema.name} relation or IRI ({exc})") from None
        if self.strict_vocabulary and self._vocab_iris is None:
            self.vocabulary()
        if self._vocab_iris is not None and iri not in self._vocab_iris:
            raise KGError(f"relation {relation!r} is not in this KG's vocabulary ({len(self._vocab_iris)} relations)")
        return iri

    def _entity_term(self, entity: str) -> str:
        if not isinstance(entity, str) or not entity:
            raise KGError(f"entity {entity!r} is not a non-empty string")
        if is_literal(entity):
            try:
                return literal_term(entity)
            except KGError as exc:
                raise KGError(f"literal {entity!r} is malformed ({exc})") from None
        if entity.startswith("_:") and not BNODE_RE.match(entity):
            raise KGError(f"entity {entity!r} is not a valid blank-node id (_: followed by letters, digits, _ - .)")
        try:
            # A "_:" id is a blank node of a store exported from the embedded backend, where the schema made it an
            # IRI; an endpoint's own blank nodes cannot be addressed across queries and so match nothing.
            if (self._schema.is_valid_entity(entity) or "://" in entity or entity.startswith("urn:")
                    or entity.startswith("_:")):
                return f"<{check_iri(self._schema.entity_iri(entity))}>"
            raise KGError("not in the schema's entity grammar")
        except KGError as exc:
            raise KGError(f"entity {entity!r} is not a valid {self._schema.name} entity id or IRI ({exc})") from None

    def _values(self, var: str, entities: Iterable[str]) -> str:
        terms = list(dict.fromkeys(self._entity_term(e) for e in entities))
        return f"VALUES {var} {{ {' '.join(terms)} }}"

    def _node_id(self, term: dict[str, str]) -> str:
        kind = term.get("type")
        value = term.get("value", "")
        if kind == "uri":
            return self._schema.entity_id(value)
        if kind == "bnode":
            return "_:" + value
        lang = term.get("xml:lang")
        datatype = term.get("datatype")
        if lang or datatype in (XSD_STRING, RDF_LANGSTRING):
            datatype = None
        if datatype == XSD + "boolean" and value in ("1", "0"):
            value = "true" if value == "1" else "false"  # Virtuoso writes booleans as 1/0
        return make_literal(value, datatype=datatype, lang=lang)

    def _hidden(self, relation_iri: str) -> bool:
        # Names are served by names(); a name predicate is not a relation to follow.
        return relation_iri in self._name_iris or self._schema.is_noise_relation(self._schema.relation_id(relation_iri))

    # -- compilation -----------------------------------------------------------------------------------------------

    def _triple(self, source: str, hop: Hop, target: str) -> str:
        iri = self._relation_iri(hop.relation)
        if Direction.parse(hop.direction) is Direction.OUT:
            return f"{source} <{iri}> {target} ."
        return f"{target} <{iri}> {source} ."

    def _frontier(self, block: str, var: str, hops: Chain, prefix: str, start: int = 0,
                  cap_last: bool = True) -> tuple[str, str]:
        """Wrap ``block`` (a group yielding distinct ``var``) in one DISTINCT subquery per hop."""
        for i, hop in enumerate(hops):
            nxt = f"?{prefix}{start + i + 1}"
            cap = f" LIMIT {self.max_frontier}" if cap_last or i < len(hops) - 1 else ""
            block = f"{{ SELECT DISTINCT {nxt} WHERE {{ {block} {self._triple(var, hop, nxt)} }}{cap} }}"
            var = nxt
        return block, var

    def _path_exists(self, var: str, hops: Chain, prefix: str) -> str:
        """A plain pattern that some path ``hops`` leaves ``var`` (for FILTER EXISTS; engines stop at the first)."""
        parts, current = [], var
        for i, hop in enumerate(hops):
            nxt = f"?{prefix}{i + 1}"
            parts.append(self._triple(current, hop, nxt))
            current = nxt
        return " ".join(parts)

    def _reaches_target(self, var: str, hops: Chain, target: str, prefix: str) -> str:
        """A pattern that ``hops`` leads from ``var`` to ``target`` (entity: that node; literal: its lexical value)."""
        if is_literal(target):
            value = sparql_string(literal_value(target))
            if not hops:
                return f"FILTER(isLiteral({var}) && str({var}) = {value})"
            end = f"?{prefix}{len(hops)}"
            return f"{self._path_exists(var, hops, prefix)} FILTER(isLiteral({end}) && str({end}) = {value})"
        term = self._entity_term(target)
        if not hops:
            return f"FILTER({var} = {term})"
        body = self._path_exists(var, hops[:-1], prefix)
        last = f"?{prefix}{len(hops) - 1}" if len(hops) > 1 else var
        return f"{body} {self._triple(last, hops[-1], term)}"

    @staticmethod
    def _outer(block: str, var: str, limit: int) -> str:
        return f"SELECT {var} WHERE {{ {block} }} LIMIT {limit}"

    def _chain_query(self, topics: Sequence[str], chain: Chain, limit: int) -> str:
        block, var = self._frontier(self._values("?e0", topics), "?e0", chain, "e", cap_last=False)
        if not chain:
            # Topics that occur in the KG at all (FILTER EXISTS stops at the first triple of a hub).
            block = (f"{{ SELECT DISTINCT ?e0 WHERE {{ {block} "
                     "FILTER EXISTS { { ?e0 ?p_ ?o_ } UNION { ?s_ ?p_ ?e0 } } } }")
        return self._outer(block, var, limit + 1)

    def _paths_query(self, topics: Sequence[str], chain: Chain, max_paths: int) -> str:
        block = self._values("?e0", topics)
        projected = ["?e0"]
        for i, hop in enumerate(chain):
            nxt = f"?e{i + 1}"
            cap = f" LIMIT {self.max_frontier}" if i < len(chain) - 1 else ""
            projected.append(nxt)
            block = (f"{{ SELECT DISTINCT {' '.join(projected)} WHERE {{ {block} "
                     f"{self._triple(projected[-2], hop, nxt)} }}{cap} }}")
        return f"SELECT {' '.join(projected)} WHERE {{ {block} }} LIMIT {max_paths + 1}"

    # -- protocol: one hop -----------------------------------------------------------------------------------------

    def has_entity(self, entity: str) -> bool:
        """Whether ``entity`` occurs in any triple (a named entity of degree 0 occurs in its name triple)."""
        try:
            term = self._entity_term(entity)
        except KGError:
            return False
        if is_literal(entity):
            return self._ask(f"ASK {{ ?s ?p {term} }}")
        return self._ask(f"ASK {{ {{ {term} ?p ?o }} UNION {{ ?s ?p {term} }} }}")

    def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]:
        term = self._entity_term(entity)
        pattern = f"{term} ?p ?x ." if Direction.parse(direction) is Direction.OUT else f"?x ?p {term} ."
        return self._relation_list(pattern)

    def _relation_list(self, pattern: str) -> list[str]:
        query = self._outer(f"{{ SELECT DISTINCT ?p WHERE {{ {pattern} }} }}", "?p", self.max_relations)
        rows, _ = self._select(query)
        found = {row["p"]["value"] for row in rows if row.get("p", {}).get("type") == "uri"}
        return sorted(self._schema.relation_id(p) for p in found if not self._hidden(p))

    def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                  limit: int = 100) -> list[str]:
        limit = max(int(limit), 0)
        triple = self._triple(self._entity_term(entity), Hop(relation, Direction.parse(direction)), "?x")
        if limit == 0:
            return []
        rows, _ = self._select(self._outer(f"{{ SELECT DISTINCT ?x WHERE {{ {triple} }} }}", "?x", limit))
        return [self._node_id(row["x"]) for row in rows if "x" in row]

    @staticmethod
    def _rows(variables: str, rows: Sequence[Sequence[str]]) -> str:
        """``VALUES (?v ?i ...) { (<a> 0 ...) ... }`` for rows of terms whose first is a node.

        Virtuoso 7 (at least with a few thousand language-tagged literals in the store) matches nothing at all for a
        multi-row VALUES of several variables that holds a language-tagged literal, so each row whose node is one gets
        a one-row VALUES of its own, the blocks joined by UNION (a UNION of constants: nothing unbound to scan).
        """
        def block(part: Sequence[Sequence[str]]) -> str:
            return f"VALUES ({variables}) {{ {' '.join('(' + ' '.join(row) + ')' for row in part)} }}"

        tagged = [row for row in rows if _LANG_TAGGED.search(row[0])]
        if not tagged:
            return block(rows)
        plain = [row for row in rows if not _LANG_TAGGED.search(row[0])]
        return " UNION ".join(f"{{ {block(part)} }}" for part in ([plain] if plain else []) + [[row] for row in tagged])

    def _indexed_values(self, variables: str, terms: Sequence[str]) -> str:
        """``VALUES (?v ?i) { (<a> 0) (<b> 1) }``: each term and its position (to map answers back)."""
        return self._rows(variables, [(term, str(i)) for i, term in enumerate(terms)])

    def neighbors_many(self, entities: Sequence[str], relation: str, direction: Direction | str = Direction.OUT,
                       limit_per_entity: int = 100) -> dict[str, list[str]]:
        """One query per 100 entities; when the batch's total cap is hit (a hub among them), one more with a LIMIT per
        entity (a UNION of subqueries)."""
        check_ids(entities, "entities")
        limit = check_count(limit_per_entity, "limit_per_entity")
        hop = Hop(relation, Direction.parse(direction))
        triple = self._triple("?e", hop, "?x")  # validates the relation before anything is sent
        unique = list(dict.fromkeys(entities))
        terms = [self._entity_term(e) for e in unique]
        out: dict[str, list[str]] = {e: [] for e in unique}
        if limit == 0:
            return out
        for start in range(0, len(unique), _BATCH):
            batch = terms[start:start + _BATCH]
            cap = len(batch) * limit
            rows, partial = self._select(f"SELECT DISTINCT ?i ?x WHERE {{ {self._indexed_values('?e ?i', batch)} "
                                         f"{triple} }} LIMIT {cap + 1}", strict=False)
            if partial or len(rows) > cap:
                branches = " UNION ".join(f"{{ SELECT DISTINCT ?i ?x WHERE {{ VALUES (?e ?i) {{ ({term} {i}) }} "
                                          f"{triple} }} LIMIT {limit} }}" for i, term in enumerate(batch))
                rows, _ = self._select(f"SELECT ?i ?x WHERE {{ {branches} }}")
            for row in rows:
                found = out[unique[start + int(row["i"]["value"])]]
                if len(found) < limit:
                    found.append(self._node_id(row["x"]))
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
                    predicates.append(f"<{self._relation_iri(relation)}>")
        found = [s for s in dict.fromkeys(seeds) if self.has_entity(s)]
        collector = SubgraphCollector(found, max_triples)
        frontier = found
        for level in range(depth):
            expand = [n for n in frontier if not (level and is_literal(n))]
            nxt: list[str] = []
            for start in range(0, len(expand), _BATCH):
                edges, cut = self._level_edges(expand[start:start + _BATCH], max_per_node, allowed, predicates)
                collector.truncated = collector.truncated or cut
                if not all(collector.add(triple, other, nxt) for triple, other in edges):
                    return collector.result()
            frontier = nxt
            if not frontier:
                break
        return collector.result()

    def _level_edges(self, nodes: list[str], cap: int, allowed: frozenset[str] | None,
                     predicates: list[str] | None) -> tuple[list[tuple[Triple, str]], bool]:
        """The edges a subgraph keeps of ``nodes`` (in subgraph order, each with its far end) and whether a node's cap
        cut some."""
        if predicates is not None and not predicates:
            return [], False
        values = self._indexed_values("?v ?i", [self._entity_term(n) for n in nodes])
        only = f"VALUES ?p {{ {' '.join(predicates)} }}" if predicates is not None else ""
        shapes = {Direction.OUT: "?v ?p ?x .", Direction.IN: "?x ?p ?v ."}
        # (node position, direction, relation) -> [count, relation IRI, neighbours or None when not fetched]
        groups: dict[tuple[int, Direction, str], list[Any]] = {}
        total_cap = max(_MIN_LEVEL_ROWS, len(nodes) * (cap + 1))
        for direction, shape in shapes.items():
            rows, partial = self._select(f"SELECT DISTINCT ?i ?p ?x WHERE {{ {values} {only} {shape} }} "
                                         f"LIMIT {total_cap}", strict=False)
            complete = not partial and len(rows) < total_cap
            if not complete:  # a hub: count the edges per relation instead
                rows, _ = self._select(f"SELECT ?i ?p (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {values} {only} {shape} }} "
                                       "GROUP BY ?i ?p")
            for row in rows:
                iri = row.get("p", {}).get("value", "")
                if row.get("p", {}).get("type") != "uri" or self._hidden(iri):
                    continue
                relation = self._schema.relation_id(iri)
                if allowed is not None and relation not in allowed:
                    continue
                group = groups.setdefault((int(row["i"]["value"]), direction, relation),
                                          [0, iri, [] if complete else None])
                if complete:
                    group[0] += 1
                    group[2].append(self._node_id(row["x"]))
                else:
                    group[0] = int(row["n"]["value"])
        # Node by node, outgoing before incoming, relations sorted: the order of the generic version.
        order = sorted(groups, key=lambda k: (k[0], k[1] is Direction.IN, k[2]))
        takes: dict[tuple[int, Direction, str], int] = {}
        cut = False
        for _, node_groups in itertools.groupby(order, key=lambda k: k[0]):
            keys = list(node_groups)
            counts = [groups[k][0] for k in keys]
            cut = cut or sum(counts) > cap
            takes.update(zip(keys, fair_shares(counts, cap), strict=True))
        self._fetch_groups(nodes, groups, takes)
        kept: list[tuple[Triple, str]] = []
        for key in order:
            i, direction, relation = key
            for other in sorted(groups[key][2])[:takes[key]]:
                node = nodes[i]
                kept.append(((node, relation, other) if direction is Direction.OUT else (other, relation, node), other))
        return kept, cut

    def _fetch_groups(self, nodes: list[str], groups: dict[tuple[int, Direction, str], list[Any]],
                      takes: dict[tuple[int, Direction, str], int]) -> None:
        """Fill in the neighbours of the groups only counted so far: a whole group in one query per direction, a cut
        group with a LIMIT of its own (a UNION of subqueries, 50 at a time)."""
        whole: dict[Direction, list[tuple[str, str, str]]] = {Direction.OUT: [], Direction.IN: []}
        part: list[str] = []
        index: dict[str, tuple[int, Direction, str]] = {}  # the ?i of each group asked for
        for key, (count, iri, found) in groups.items():
            if found is not None:
                continue
            groups[key][2] = []
            if takes[key] == 0:
                continue
            i, direction, _ = key
            position = str(len(index))
            index[position] = key
            term = self._entity_term(nodes[i])
            shape = f"?v <{iri}> ?x ." if direction is Direction.OUT else f"?x <{iri}> ?v ."
            if takes[key] == count:
                whole[direction].append((term, position, f"<{iri}>"))
            else:
                part.append(f"{{ SELECT DISTINCT ?i ?p ?x WHERE {{ VALUES (?v ?i ?p) {{ ({term} {position} <{iri}>) }} "
                            f"{shape} }} LIMIT {takes[key]} }}")
        queries = [f"SELECT DISTINCT ?i ?p ?x WHERE {{ {self._rows('?v ?i ?p', rows)} "
                   f"{'?v ?p ?x .' if direction is Direction.OUT else '?x ?p ?v .'} }}"
                   for direction, rows in whole.items() if rows]
        queries += [f"SELECT ?i ?p ?x WHERE {{ {' UNION '.join(part[k:k + 50])} }}" for k in range(0, len(part), 50)]
        for query in queries:
            rows, _ = self._select(query)
            for row in rows:
                groups[index[row["i"]["value"]]][2].append(self._node_id(row["x"]))

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
            return self._entities(self._chain_query(topics, chain, limit), f"?e{len(chain)}", limit)
        if not chain:
            result = self._entities(self._chain_query(topics, chain, limit), "?e0", limit)
            result.paths = [(e,) for e in result.entities]
            return result
        rows, partial = self._select(self._paths_query(topics, chain, max_paths), strict=False)
        paths = [tuple(self._node_id(row[f"e{i}"]) for i in range(len(chain) + 1)) for row in rows]
        cut = partial or len(paths) > max_paths
        if cut:
            # The paths were cut, so they may miss some end entities: ask for the entities on their own.
            result = self._entities(self._chain_query(topics, chain, limit), f"?e{len(chain)}", limit)
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
        found = list(dict.fromkeys(self._node_id(row[name]) for row in rows if name in row))
        return ChainResult(found[:limit], None, partial or len(found) > limit)

    def chain_relations(self, topics: Sequence[str], chain: Chain,
                        direction: Direction | str = Direction.OUT) -> list[str]:
        check_ids(topics)
        if not topics:
            return []
        block, var = self._frontier(self._values("?e0", topics), "?e0", tuple(chain), "e")
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
        block, var = self._frontier(self._values("?e0", topics), "?e0", main[:s], "e")
        if s < len(main):
            # Only sources on a complete main path count: some path of the rest of the chain must leave them.
            rest = self._path_exists(var, main[s:], "r")
            block = f"{{ SELECT DISTINCT {var} WHERE {{ {block} FILTER EXISTS {{ {rest} }} }} }}"
        block, end = self._frontier(block, var, tuple(constraint.chain), "c", cap_last=False)
        return self._entities(self._outer(block, end, limit + 1), end, limit)

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
        block, var = self._frontier(self._values("?e0", topics), "?e0", main[:s], "e")
        check = self._reaches_target(var, tuple(constraint.chain), constraint.target, "c")
        block = f"{{ SELECT DISTINCT {var} WHERE {{ {block} FILTER EXISTS {{ {check} }} }} }}"
        block, end = self._frontier(block, var, main[s:], "e", start=s, cap_last=False)
        return self._entities(self._outer(block, end, limit + 1), end, limit)

    # -- protocol: names and search --------------------------------------------------------------------------------

    def _lang_filter(self, var: str) -> str:
        lang = sparql_string(self._schema.language)
        return f'FILTER(isLiteral({var}) && (lang({var}) = "" || langMatches(lang({var}), {lang})))'

    def _name_rank(self, term: dict[str, str], predicate: str) -> tuple[int, int, str]:
        lang = (term.get("xml:lang") or "").lower()
        wanted = self._schema.language.lower()
        lang_rank = 0 if lang == wanted else 1 if lang.startswith(wanted + "-") else 2
        pred_rank = self._name_iris.index(predicate) if predicate in self._name_iris else len(self._name_iris)
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
                self._entity_term(node)  # validate before anything is sent
                out[node] = None
                entities.append(node)
        unique = list(dict.fromkeys(entities))
        for start in range(0, len(unique), _NAME_BATCH):
            batch = unique[start:start + _NAME_BATCH]
            query = (f"SELECT ?e ?p ?n WHERE {{ {self._values('?e', batch)} VALUES ?p {{ {self._name_values} }} "
                     f"?e ?p ?n . {self._lang_filter('?n')} }}")
            rows, _ = self._select(query)
            best: dict[str, tuple[tuple[int, int, str], str]] = {}
            for row in rows:
                if "e" not in row or "n" not in row:
                    continue
                entity = self._node_id(row["e"])
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
        query = self._outer(f"{{ SELECT DISTINCT ?e ?n WHERE {{ VALUES ?n {{ {terms} }} "
                            f"{self._name_triple} FILTER(!isLiteral(?e)) }} }}",
                            "?e ?n", max(limit, 100))
        rows, _ = self._select(query)
        exact: dict[str, EntityMatch] = {}
        for row in rows:
            entity = self._node_id(row["e"])
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
        query = (f"SELECT ?e ?n WHERE {{ {self._name_triple} {self._lang_filter('?n')} "
                 f"FILTER(!isLiteral(?e)) {condition} }} LIMIT {self.search_scan_limit}")
        rows, _ = self._select(query, strict=False)
        return [(self._node_id(r["e"]), r["n"]["value"]) for r in rows if "e" in r and "n" in r]

    # -- protocol: vocabulary and statistics -----------------------------------------------------------------------

    def has_relation(self, relation: str) -> bool:
        """In the vocabulary once it is fetched; before that, an indexed ``ASK`` (cached), falling back to the schema's
        grammar when the endpoint does not answer."""
        try:
            iri = self._relation_iri(relation)
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
        not_name = f"FILTER(?p NOT IN ({', '.join(f'<{p}>' for p in self._name_iris)}))" if self._name_iris else ""
        queries = {
            "triples": f"SELECT (COUNT(*) AS ?c) WHERE {{ ?s ?p ?o {not_name} }}",
            "relations": f"SELECT (COUNT(DISTINCT ?p) AS ?c) WHERE {{ ?s ?p ?o {not_name} }}",
            "entities": ("SELECT (COUNT(DISTINCT ?x) AS ?c) WHERE { { ?x ?p ?o } UNION "
                         "{ ?s ?p ?x FILTER(!isLiteral(?x)) } }"),
            "literals": f"SELECT (COUNT(DISTINCT ?o) AS ?c) WHERE {{ ?s ?p ?o FILTER(isLiteral(?o)) {not_name} }}",
            "names": f"SELECT (COUNT(*) AS ?c) WHERE {{ VALUES ?p {{ {self._name_values} }} ?s ?p ?o }}",
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


def _reading_results(method: Callable[..., Any]) -> Callable[..., Any]:
    """Turn an error raised while reading an endpoint's results (a variable left unbound, a count that is not a number)
    into a :class:`KGError` that names the endpoint: the endpoint answered, but not as SPARQL 1.1 results should."""

    @functools.wraps(method)
    def reading(self: SparqlKG, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            if isinstance(exc, KGQAError):
                raise
            raise KGError(f"SPARQL endpoint {self.endpoint} sent results kgqa cannot read ({type(exc).__name__}: "
                          f"{str(exc)[:200]}); is it a SPARQL 1.1 endpoint answering in JSON?") from exc

    return reading


for _name in ("has_entity", "relations", "neighbors", "neighbors_many", "subgraph", "run_chain", "chain_relations",
              "constraint_values", "filter_by_constraint", "names", "search", "has_relation", "vocabulary", "stats",
              "select"):
    setattr(SparqlKG, _name, _reading_results(getattr(SparqlKG, _name)))
del _name
