"""The derived operations of the KG protocol, written once in terms of the primitives of :class:`~kgqa.kg.base.KGCore`.

A backend inherits :class:`DerivedOps` and implements the primitives (relations, neighbours, names, search, vocabulary,
stats, has_entity, has_relation, close, schema); it then has correct chain execution, chain-end relation search,
constraint values and filtering, batched neighbours and a bounded BFS subgraph, and overrides whichever of them it can
run natively faster (the embedded store and the SPARQL backend override all six). These generic versions define what
the operations mean: tests/kg/test_backend_agreement.py runs them over each backend's primitives next to the native ones.

They use only ``relations``, ``neighbors`` and ``has_entity``. Cost: one ``neighbors`` call per entity of every hop
(chains, constraints), one per entity (``neighbors_many``), and for each node a subgraph expands, two ``relations``
calls plus one ``neighbors`` call per relation.

Semantics shared with the native versions (see also :mod:`kgqa.kg.base`):

* A chain's frontier is the distinct entities reached by a hop, in the order first reached, capped at ``max_frontier``
  (the result then says ``truncated``); the answers are the last frontier capped at ``limit``. Unknown topics reach
  nothing; with the empty chain the answers are the topics that are in the KG.
* With ``bindings``, paths run through entities on a complete path to a returned answer, at most ``max_paths`` of them.
* A literal constraint target matches on its lexical value (``"1967"`` matches ``"1967"^^xsd:gYear``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from kgqa.errors import KGError
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
    Subgraph,
    Triple,
    is_literal,
    literal_value,
)

__all__ = ["DerivedOps", "SubgraphCollector", "check_constraint", "check_count", "check_ids", "check_subgraph_args",
           "fair_shares", "matches_target"]

# A walk: the distinct frontier at every position, the distinct (source, reached) pairs of every hop, and whether a cap
# cut a frontier.
_Walk = tuple[list[list[str]], list[list[tuple[str, str]]], bool]


# ---------------------------------------------------------------------------------------------------------------------
# Argument checks and small rules every implementation shares


def check_ids(ids: Sequence[str] | str, what: str = "topics") -> None:
    """Refuse a bare string where a list of ids is wanted (a classic slip: ``run_chain("m.0abc", ...)``)."""
    if isinstance(ids, str):
        raise KGError(f"{what} must be a list of entity ids, not the string {ids!r}")


def check_count(value: int, what: str = "limit") -> int:
    """``value`` if it is a non-negative int (not a bool), else KGError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise KGError(f"{what} {value!r} is not a non-negative integer")
    return value


def check_constraint(main: Chain, constraint: ConstraintChain) -> None:
    """The constraint's source must be a position of the main chain and its chain must not be empty."""
    if isinstance(constraint.source, bool) or not isinstance(constraint.source, int) \
            or not 0 <= constraint.source <= len(main):
        raise KGError(f"constraint source position {constraint.source!r} is outside the main chain (0..{len(main)})")
    if not constraint.chain:
        raise KGError("constraint chain is empty")


def matches_target(node: str, target: str) -> bool:
    """Whether a node reached by a constraint chain is its target: the same entity, or a literal with the same value."""
    if is_literal(target):
        return is_literal(node) and literal_value(node) == literal_value(target)
    return node == target


def fair_shares(counts: Sequence[int], cap: int) -> list[int]:
    """How many edges each group (one relation and direction of a node) keeps when the node may keep ``cap`` in all.

    Round robin over the groups in order: the first edge of every group, then the second of every group that has one,
    and so on until ``cap`` edges are taken; so a node's many small relations are not crowded out by one big one.

    >>> fair_shares([5, 1, 3], 6)
    [3, 1, 2]
    """
    if sum(counts) <= cap:
        return list(counts)
    # The number of full rounds L (the largest with sum(min(c, L)) <= cap), smallest groups first: a group no larger
    # than what is left shared by the groups still open is taken whole; at the first larger one, L is that share.
    budget, rounds = cap, 0
    for i, c in enumerate(sorted(counts)):
        share = budget // (len(counts) - i)
        if c > share:
            rounds = share
            break
        budget -= c
    takes = [min(c, rounds) for c in counts]
    rest = cap - sum(takes)  # the partial round: one more each for the first groups that have one
    for i, c in enumerate(counts):
        if rest == 0:
            break
        if c > rounds:
            takes[i] += 1
            rest -= 1
    return takes


class SubgraphCollector:
    """Collects a BFS subgraph: distinct triples in the order met, nodes in the order first reached, the total cap."""

    __slots__ = ("max_triples", "nodes", "seen_nodes", "seen_triples", "triples", "truncated")

    def __init__(self, seeds: Sequence[str], max_triples: int) -> None:
        self.nodes = list(seeds)
        self.seen_nodes = set(seeds)
        self.triples: list[Triple] = []
        self.seen_triples: set[Triple] = set()
        self.max_triples = max_triples
        self.truncated = False

    def add(self, triple: Triple, other: str, frontier: list[str]) -> bool:
        """Add ``triple`` (whose far end is ``other``) unless it is already in; a newly reached node joins ``frontier``.
        Returns False when the total cap leaves no room for a new triple (the subgraph is then truncated: stop)."""
        if triple in self.seen_triples:
            return True
        if len(self.triples) >= self.max_triples:
            self.truncated = True
            return False
        self.seen_triples.add(triple)
        self.triples.append(triple)
        if other not in self.seen_nodes:
            self.seen_nodes.add(other)
            self.nodes.append(other)
            frontier.append(other)
        return True

    def result(self) -> Subgraph:
        return Subgraph(self.triples, self.nodes, self.truncated)


def check_subgraph_args(seeds: Sequence[str], depth: int, max_per_node: int, max_triples: int,
                        relations: Collection[str] | None) -> frozenset[str] | None:
    """Validate the arguments of ``subgraph``; returns the relation filter as a set (None: every relation)."""
    check_ids(seeds, "seeds")
    check_count(depth, "depth")
    check_count(max_per_node, "max_per_node")
    check_count(max_triples, "max_triples")
    if isinstance(relations, str):
        raise KGError(f"relations must be a collection of relation ids, not the string {relations!r}")
    return None if relations is None else frozenset(relations)


# ---------------------------------------------------------------------------------------------------------------------


class DerivedOps:
    """Generic derived operations over the primitives; inherit it, implement the primitives, override what is native.

    ``max_frontier`` caps the entities a chain carries from one hop to the next (a backend usually sets its own).
    """

    max_frontier: int = DEFAULT_MAX_FRONTIER

    if TYPE_CHECKING:  # the primitives the generic versions use (a subclass implements them)

        def relations(self, entity: str, direction: Direction | str = Direction.OUT) -> list[str]: ...

        def neighbors(self, entity: str, relation: str, direction: Direction | str = Direction.OUT,
                      limit: int = 100) -> list[str]: ...

        def has_entity(self, entity: str) -> bool: ...

    def run_chain(self, topics: Sequence[str], chain: Chain, *, bindings: bool = False,
                  limit: int = DEFAULT_CHAIN_LIMIT, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
        """Follow ``chain`` from ``topics``; every intermediate entity is a variable (see the module docstring)."""
        check_ids(topics)
        check_count(limit)
        check_count(max_paths, "max_paths")
        chain = tuple(chain)
        return _run(self, _start(self, topics, chain), chain, None, bindings=bindings, limit=limit, max_paths=max_paths)

    def chain_relations(self, topics: Sequence[str], chain: Chain,
                        direction: Direction | str = Direction.OUT) -> list[str]:
        """Relations (sorted, noise left out) leaving or entering the entities that ``chain`` reaches."""
        check_ids(topics)
        chain = tuple(chain)
        direction = Direction.parse(direction)
        frontiers, _, _ = _walk(self, _start(self, topics, chain), chain)
        found: set[str] = set()
        for entity in frontiers[-1]:
            found.update(self.relations(entity, direction))
        return sorted(found)

    # -- constraints -----------------------------------------------------------------------------------------------

    def constraint_values(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                          limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        """What the constraint chain reaches from the main chain's entities at ``constraint.source`` (only entities on
        a complete main path count)."""
        check_ids(topics)
        main = tuple(main)
        check_constraint(main, constraint)
        check_count(limit)
        sources, truncated = _sources_on_paths(self, _start(self, topics, main), main, constraint.source)
        result = _run(self, sources, tuple(constraint.chain), None, bindings=False, limit=limit)
        result.truncated = result.truncated or truncated
        return result

    def filter_by_constraint(self, topics: Sequence[str], main: Chain, constraint: ConstraintChain,
                             limit: int = DEFAULT_CHAIN_LIMIT) -> ChainResult:
        """Candidates of ``main`` on some path whose entity at ``constraint.source`` reaches ``constraint.target``."""
        check_ids(topics)
        main = tuple(main)
        check_constraint(main, constraint)
        check_count(limit)
        if constraint.target is None:
            raise KGError("filter_by_constraint needs a constraint target; use constraint_values to list candidates")
        start = _start(self, topics, main)
        sources, truncated = _sources_on_paths(self, start, main, constraint.source)
        frontiers, edges, cut = _walk(self, sources, tuple(constraint.chain))
        hit = [n for n in frontiers[-1] if matches_target(n, constraint.target)]
        satisfied = set(_alive(frontiers, edges, hit)[0])
        result = _run(self, start, main, {constraint.source: satisfied}, bindings=False, limit=limit)
        result.truncated = result.truncated or truncated or cut
        return result

    # -- batches and subgraphs -------------------------------------------------------------------------------------

    def statement_counts(self, triples: Sequence[Triple]) -> list[int]:
        """Every triple asserted once: a store that keeps no counts (SPARQL endpoints hold sets of triples)."""
        return [1] * len(triples)

    def neighbors_many(self, entities: Sequence[str], relation: str, direction: Direction | str = Direction.OUT,
                       limit_per_entity: int = 100) -> dict[str, list[str]]:
        """``neighbors`` of every distinct entity (in the order given; an entity with none maps to ``[]``)."""
        check_ids(entities, "entities")
        check_count(limit_per_entity, "limit_per_entity")
        direction = Direction.parse(direction)
        return {e: self.neighbors(e, relation, direction, limit=limit_per_entity) for e in dict.fromkeys(entities)}

    def subgraph(self, seeds: Sequence[str], *, depth: int = DEFAULT_SUBGRAPH_DEPTH,
                 max_per_node: int = DEFAULT_MAX_PER_NODE, max_triples: int = DEFAULT_MAX_TRIPLES,
                 relations: Collection[str] | None = None) -> Subgraph:
        """A bounded breadth-first subgraph around ``seeds``: the edges of the seeds, then of the nodes they reach, for
        ``depth`` levels.

        Each expanded node keeps at most ``max_per_node`` of its edges (shared fairly among its relations, see
        :func:`fair_shares`; an edge already in the subgraph counts), the subgraph at most ``max_triples`` triples;
        ``truncated`` says either cap left an edge out. Noise relations are left out as ``relations()`` leaves them out;
        ``relations``, if given, are the only ones followed. Literals are values, not places to go: a literal reached
        is not expanded (a literal seed is). The order is deterministic (see :class:`~kgqa.kg.base.Subgraph`).
        """
        allowed = check_subgraph_args(seeds, depth, max_per_node, max_triples, relations)
        found = [s for s in dict.fromkeys(seeds) if self.has_entity(s)]
        collector = SubgraphCollector(found, max_triples)
        frontier = found
        for level in range(depth):
            nxt: list[str] = []
            for node in frontier:
                if level and is_literal(node):
                    continue
                edges, cut = _node_edges(self, node, max_per_node, allowed)
                collector.truncated = collector.truncated or cut
                if not all(collector.add(triple, other, nxt) for triple, other in edges):
                    return collector.result()
            frontier = nxt
            if not frontier:
                break
        return collector.result()


# ---------------------------------------------------------------------------------------------------------------------
# The generic engine (module functions, so a backend's own private helpers never collide with them)


def _start(kg: DerivedOps, topics: Sequence[str], chain: Chain) -> list[str]:
    """The distinct topics; for the empty chain only those in the KG (a chain's hops drop the others anyway)."""
    start = list(dict.fromkeys(topics))
    return start if chain else [t for t in start if kg.has_entity(t)]


def _walk(kg: DerivedOps, start: list[str], chain: Chain, keep: dict[int, set[str]] | None = None) -> _Walk:
    """Follow ``chain`` from ``start``; ``keep`` restricts the frontier at given positions to given entities."""
    cap = kg.max_frontier
    frontier = [e for e in start if e in keep[0]] if keep and 0 in keep else list(start)
    frontiers: list[list[str]] = [frontier]
    edges: list[list[tuple[str, str]]] = []
    truncated = False
    for position, hop in enumerate(chain, start=1):
        direction = Direction.parse(hop.direction)
        allowed = keep.get(position) if keep else None
        reached: dict[str, None] = {}
        pairs: list[tuple[str, str]] = []
        for source in frontier:
            found = kg.neighbors(source, hop.relation, direction, limit=cap + 1)
            if len(found) > cap:  # the listing itself may have been cut
                truncated = True
            for other in found:
                if allowed is None or other in allowed:
                    reached[other] = None
                    pairs.append((source, other))
        nxt = list(reached)
        if len(nxt) > cap:
            truncated = True
            nxt = nxt[:cap]
            kept = set(nxt)
            pairs = [p for p in pairs if p[1] in kept]
        edges.append(pairs)
        frontier = nxt
        frontiers.append(frontier)
    return frontiers, edges, truncated


def _alive(frontiers: list[list[str]], edges: list[list[tuple[str, str]]], final: list[str]) -> list[list[str]]:
    """The entities at each position that lie on a complete path ending in ``final`` (frontier order)."""
    alive: list[list[str]] = [[] for _ in frontiers]
    alive[-1] = list(final)
    for h in range(len(edges) - 1, -1, -1):
        ahead = set(alive[h + 1])
        sources = {s for s, d in edges[h] if d in ahead}
        alive[h] = [e for e in frontiers[h] if e in sources]
    return alive


def _paths(edges: list[list[tuple[str, str]]], alive: list[list[str]],
           max_paths: int) -> tuple[list[tuple[str, ...]], bool]:
    """Paths through the alive entities, breadth-first, at most ``max_paths`` (cut only if one more exists)."""
    rows: list[tuple[str, ...]] = [(e,) for e in alive[0]]
    truncated = False
    for h, pairs in enumerate(edges):
        here, ahead = set(alive[h]), set(alive[h + 1])
        succ: dict[str, list[str]] = {}
        for s, d in pairs:
            if s in here and d in ahead:
                succ.setdefault(s, []).append(d)
        grown: list[tuple[str, ...]] = []
        for row in rows:
            for d in succ.get(row[-1], ()):
                if len(grown) >= max_paths:
                    truncated = True
                    break
                grown.append((*row, d))
            if truncated:
                break
        rows = grown
    return rows, truncated


def _run(kg: DerivedOps, start: list[str], chain: Chain, keep: dict[int, set[str]] | None, *, bindings: bool,
         limit: int, max_paths: int = DEFAULT_MAX_PATHS) -> ChainResult:
    frontiers, edges, truncated = _walk(kg, start, chain, keep)
    final = frontiers[-1]
    if len(final) > limit:
        truncated = True
        final = final[:limit]
    result = ChainResult(list(final), truncated=truncated)
    if bindings:
        result.paths, cut = _paths(edges, _alive(frontiers, edges, final), max_paths)
        result.truncated = result.truncated or cut
    return result


def _sources_on_paths(kg: DerivedOps, start: list[str], main: Chain, source: int) -> tuple[list[str], bool]:
    frontiers, edges, truncated = _walk(kg, start, main)
    return _alive(frontiers, edges, frontiers[-1])[source], truncated


def _node_edges(kg: DerivedOps, node: str, cap: int,
                allowed: frozenset[str] | None) -> tuple[list[tuple[Triple, str]], bool]:
    """The edges a subgraph keeps of ``node`` (each with its far end) and whether the per-node cap cut some."""
    groups: list[tuple[Direction, str, list[str]]] = []
    for direction in (Direction.OUT, Direction.IN):
        for relation in kg.relations(node, direction):
            if allowed is None or relation in allowed:
                found = kg.neighbors(node, relation, direction, limit=cap + 1)
                if found:
                    groups.append((direction, relation, found))
    counts = [len(g[2]) for g in groups]
    kept: list[tuple[Triple, str]] = []
    for (direction, relation, found), take in zip(groups, fair_shares(counts, cap), strict=True):
        for other in found[:take]:
            kept.append(((node, relation, other) if direction is Direction.OUT else (other, relation, node), other))
    return kept, sum(counts) > cap
