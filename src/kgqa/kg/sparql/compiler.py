"""SPARQL text for the KG operations: ids checked into terms, chains compiled to one query each, indexed VALUES.

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
fetched vocabulary, when there is one: :meth:`QueryCompiler.relation_iri`), literals are escaped, and every compiled
text passes a read-only guard before it leaves the process (:mod:`kgqa.kg.sparql.guard`).

Batches join an indexed ``VALUES (?e ?i)`` (never a UNION over unbound patterns, which some engines evaluate before the
join); a language-tagged literal gets a one-row VALUES of its own (Virtuoso 7 loses every answer of a multi-row,
multi-variable VALUES holding one: :meth:`QueryCompiler.values_rows`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from kgqa.errors import KGError
from kgqa.kg.base import Chain, Direction, Hop, is_literal, literal_value
from kgqa.kg.schema import Schema, check_iri
from kgqa.kg.sparql.guard import BNODE_RE, literal_term, sparql_string

__all__ = ["QueryCompiler"]

# The end of a language-tagged literal written as a SPARQL term (see QueryCompiler.values_rows).
_LANG_TAGGED = re.compile(r'"@[A-Za-z]+(?:-[A-Za-z0-9]+)*$')


class QueryCompiler:
    """Query text for one schema. Ids reach a query only through :meth:`relation_iri` and :meth:`entity_term`.

    ``known_predicates`` returns the endpoint's predicate IRIs once they are known (None before): from then on a
    relation outside them is refused. ``max_frontier`` caps every intermediate hop of a chain (a subquery LIMIT).
    """

    def __init__(self, schema: Schema, *, max_frontier: int,
                 known_predicates: Callable[[], frozenset[str] | None]) -> None:
        self.schema = schema
        self.max_frontier = max_frontier
        self._known_predicates = known_predicates
        self.name_iris = [check_iri(p) for p in schema.name_predicates]
        self.name_values = " ".join(f"<{p}>" for p in self.name_iris)
        # One name predicate is written as a constant: Oxigraph plans ``VALUES ?p {...} ?e ?p ?n`` as a scan of every
        # name (a names batch took 3 s at 1M triples, 9 ms with the constant).
        self.name_triple = (f"?e <{self.name_iris[0]}> ?n . BIND(<{self.name_iris[0]}> AS ?p)"
                            if len(self.name_iris) == 1 else f"VALUES ?p {{ {self.name_values} }} ?e ?p ?n .")

    # -- identifiers -> SPARQL terms -------------------------------------------------------------------------------

    def relation_iri(self, relation: str) -> str:
        if not isinstance(relation, str) or not relation:
            raise KGError(f"relation {relation!r} is not a non-empty string")
        try:
            if self.schema.is_valid_relation(relation):
                iri = check_iri(self.schema.relation_iri(relation))
            elif "://" in relation or relation.startswith("urn:"):
                iri = check_iri(relation)
            else:
                raise KGError("not in the schema's relation grammar")
        except KGError as exc:
            raise KGError(f"relation {relation!r} is not a valid {self.schema.name} relation or IRI ({exc})") from None
        known = self._known_predicates()
        if known is not None and iri not in known:
            raise KGError(f"relation {relation!r} is not in this KG's vocabulary ({len(known)} relations)")
        return iri

    def entity_term(self, entity: str) -> str:
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
            if (self.schema.is_valid_entity(entity) or "://" in entity or entity.startswith("urn:")
                    or entity.startswith("_:")):
                return f"<{check_iri(self.schema.entity_iri(entity))}>"
            raise KGError("not in the schema's entity grammar")
        except KGError as exc:
            raise KGError(f"entity {entity!r} is not a valid {self.schema.name} entity id or IRI ({exc})") from None

    def values(self, var: str, entities: Iterable[str]) -> str:
        terms = list(dict.fromkeys(self.entity_term(e) for e in entities))
        return f"VALUES {var} {{ {' '.join(terms)} }}"

    @staticmethod
    def values_rows(variables: str, rows: Sequence[Sequence[str]]) -> str:
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

    def indexed_values(self, variables: str, terms: Sequence[str]) -> str:
        """``VALUES (?v ?i) { (<a> 0) (<b> 1) }``: each term and its position (to map answers back)."""
        return self.values_rows(variables, [(term, str(i)) for i, term in enumerate(terms)])

    def lang_filter(self, var: str) -> str:
        lang = sparql_string(self.schema.language)
        return f'FILTER(isLiteral({var}) && (lang({var}) = "" || langMatches(lang({var}), {lang})))'


    # -- patterns ----------------------------------------------------------------------------------------------------

    def triple(self, source: str, hop: Hop, target: str) -> str:
        iri = self.relation_iri(hop.relation)
        if Direction.parse(hop.direction) is Direction.OUT:
            return f"{source} <{iri}> {target} ."
        return f"{target} <{iri}> {source} ."

    def frontier(self, block: str, var: str, hops: Chain, prefix: str, start: int = 0,
                  cap_last: bool = True) -> tuple[str, str]:
        """Wrap ``block`` (a group yielding distinct ``var``) in one DISTINCT subquery per hop."""
        for i, hop in enumerate(hops):
            nxt = f"?{prefix}{start + i + 1}"
            cap = f" LIMIT {self.max_frontier}" if cap_last or i < len(hops) - 1 else ""
            block = f"{{ SELECT DISTINCT {nxt} WHERE {{ {block} {self.triple(var, hop, nxt)} }}{cap} }}"
            var = nxt
        return block, var

    def path_exists(self, var: str, hops: Chain, prefix: str) -> str:
        """A plain pattern that some path ``hops`` leaves ``var`` (for FILTER EXISTS; engines stop at the first)."""
        parts, current = [], var
        for i, hop in enumerate(hops):
            nxt = f"?{prefix}{i + 1}"
            parts.append(self.triple(current, hop, nxt))
            current = nxt
        return " ".join(parts)

    def reaches_target(self, var: str, hops: Chain, target: str, prefix: str) -> str:
        """A pattern that ``hops`` leads from ``var`` to ``target`` (entity: that node; literal: its lexical value)."""
        if is_literal(target):
            value = sparql_string(literal_value(target))
            if not hops:
                return f"FILTER(isLiteral({var}) && str({var}) = {value})"
            end = f"?{prefix}{len(hops)}"
            return f"{self.path_exists(var, hops, prefix)} FILTER(isLiteral({end}) && str({end}) = {value})"
        term = self.entity_term(target)
        if not hops:
            return f"FILTER({var} = {term})"
        body = self.path_exists(var, hops[:-1], prefix)
        last = f"?{prefix}{len(hops) - 1}" if len(hops) > 1 else var
        return f"{body} {self.triple(last, hops[-1], term)}"

    @staticmethod
    def outer(block: str, var: str, limit: int) -> str:
        return f"SELECT {var} WHERE {{ {block} }} LIMIT {limit}"

    def chain_query(self, topics: Sequence[str], chain: Chain, limit: int) -> str:
        block, var = self.frontier(self.values("?e0", topics), "?e0", chain, "e", cap_last=False)
        if not chain:
            # Topics that occur in the KG at all (FILTER EXISTS stops at the first triple of a hub).
            block = (f"{{ SELECT DISTINCT ?e0 WHERE {{ {block} "
                     "FILTER EXISTS { { ?e0 ?p_ ?o_ } UNION { ?s_ ?p_ ?e0 } } } }")
        return self.outer(block, var, limit + 1)

    def paths_query(self, topics: Sequence[str], chain: Chain, max_paths: int) -> str:
        block = self.values("?e0", topics)
        projected = ["?e0"]
        for i, hop in enumerate(chain):
            nxt = f"?e{i + 1}"
            cap = f" LIMIT {self.max_frontier}" if i < len(chain) - 1 else ""
            projected.append(nxt)
            block = (f"{{ SELECT DISTINCT {' '.join(projected)} WHERE {{ {block} "
                     f"{self.triple(projected[-2], hop, nxt)} }}{cap} }}")
        return f"SELECT {' '.join(projected)} WHERE {{ {block} }} LIMIT {max_paths + 1}"
