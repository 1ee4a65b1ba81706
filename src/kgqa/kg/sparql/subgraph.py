"""A subgraph level of a SPARQL endpoint: the edges of a batch of nodes, each node cut to its cap the way
:meth:`kgqa.kg.derived.DerivedOps.subgraph` cuts it (fair shares over its relations).

Per batch, one query per direction fetches every edge; only when a hub among the nodes passes the batch's total cap are
the edges counted per relation instead, and then each kept group fetched (a LIMIT per cut group).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kgqa.kg.base import Direction, Triple
from kgqa.kg.derived import fair_shares
from kgqa.kg.sparql.compiler import QueryCompiler
from kgqa.kg.sparql.results import ResultReader

__all__ = ["SubgraphLevels"]

#: A level asks for at least this many edges per direction in one go before it counts edges per relation.
_MIN_LEVEL_ROWS = 1000

#: ``select(query, strict=...) -> (rows, partial)``: a query sent to the endpoint.
Select = Callable[..., tuple[list[dict[str, dict[str, str]]], bool]]


class SubgraphLevels:
    """The edges a subgraph keeps of a level's nodes, asked through ``select``."""

    def __init__(self, compiler: QueryCompiler, reader: ResultReader, select: Select) -> None:
        self._compiler = compiler
        self._reader = reader
        self._select = select

    def edges(self, nodes: list[str], cap: int, allowed: frozenset[str] | None,
              predicates: list[str] | None) -> tuple[list[tuple[Triple, str]], bool]:
        """The edges a subgraph keeps of ``nodes`` (in subgraph order, each with its far end) and whether a node's cap
        cut some."""
        if predicates is not None and not predicates:
            return [], False
        values = self._compiler.indexed_values("?v ?i", [self._compiler.entity_term(n) for n in nodes])
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
                relation = self._reader.relation(row.get("p", {}))
                if relation is None or (allowed is not None and relation not in allowed):
                    continue
                iri = row["p"]["value"]
                group = groups.setdefault((int(row["i"]["value"]), direction, relation),
                                          [0, iri, [] if complete else None])
                if complete:
                    group[0] += 1
                    group[2].append(self._reader.node_id(row["x"]))
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
            term = self._compiler.entity_term(nodes[i])
            shape = f"?v <{iri}> ?x ." if direction is Direction.OUT else f"?x <{iri}> ?v ."
            if takes[key] == count:
                whole[direction].append((term, position, f"<{iri}>"))
            else:
                part.append(f"{{ SELECT DISTINCT ?i ?p ?x WHERE {{ VALUES (?v ?i ?p) {{ ({term} {position} <{iri}>) }} "
                            f"{shape} }} LIMIT {takes[key]} }}")
        queries = [f"SELECT DISTINCT ?i ?p ?x WHERE {{ {self._compiler.values_rows('?v ?i ?p', rows)} "
                   f"{'?v ?p ?x .' if direction is Direction.OUT else '?x ?p ?v .'} }}"
                   for direction, rows in whole.items() if rows]
        queries += [f"SELECT ?i ?p ?x WHERE {{ {' UNION '.join(part[k:k + 50])} }}" for k in range(0, len(part), 50)]
        for query in queries:
            rows, _ = self._select(query)
            for row in rows:
                groups[index[row["i"]["value"]]][2].append(self._reader.node_id(row["x"]))
