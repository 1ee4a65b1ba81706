"""Foresight subgraph expansion (FoG, Sec. 3.1): a layered BFS from the seeds that scores every incident triple of the
frontier and keeps those above ``tau_e``, with every kept edge oriented from its far node to its near node (toward the
seeds), so feedback propagation can run far to near; and the readings of the result: potential subgraph, simple paths
from the seeds, and answer ranking.

Two orientations:

* ``shortest`` (the paper): a node is an entity; its distance is the BFS layer that first reached it; an edge is kept
  only from distance d to d+1 (edges back toward the seeds or within a layer are dropped, and counted).
* ``layered`` (kgqa's default): the BFS is unrolled, so an entity reached at two depths is two nodes ((entity, depth)),
  oriented the same way. On a tree both agree; on MetaQA's 3-hop chains the unrolled form keeps walks such as
  movie -> actor -> other movie -> actor, whose answers may lie at distance 1 from the topic and which a
  shortest-distance DAG cannot reach. The seeds themselves are never re-entered.

Hubs: an entity's neighbours through one (relation, direction) are cut to ``fanout`` (``seed_fanout`` at the seeds,
where the neighbours are often the answers: "movies tagged bd-r"), all of a non-seed node's triples to
``node_fanout``, and a layer's frontier to ``max_frontier`` nodes (the best-scored first); ``cut`` counts every triple
and node left out, so a run reports what the caps cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from kgqa.kg.base import Direction, KnowledgeGraph

Triple = tuple[str, str, str]
Orientation = Literal["layered", "shortest"]
#: score_batch(triples, layers, backward) -> (scores in [0, 1], payload indexable by row numbers)
ScoreBatch = Callable[[list[Triple], np.ndarray, np.ndarray], tuple[np.ndarray, Any]]
#: a factor in [0, 1] for an answer pattern ((relation, backward) per hop): how well its end fits the question
PatternPrior = Callable[[tuple[tuple[str, bool], ...]], float]
#: how often the source asserted each triple (:meth:`kgqa.kg.base.KnowledgeGraph.statement_counts`)
StatementCounts = Callable[[Sequence[Triple]], list[int]]


@dataclass(frozen=True)
class Caps:
    """Fan-out caps at hub entities (see the module docstring)."""

    seed_fanout: int = 2000
    fanout: int = 200
    max_frontier: int = 500
    #: triples one node beyond the seeds contributes over all its relations (a node with 129 relations is a hub too)
    node_fanout: int = 1000
    #: neighbours fetched per (entity, relation) to count what a cap cuts (beyond this the count is a lower bound)
    count_limit: int = 20000


@dataclass
class ExpandedGraph:
    """The oriented expanded subgraph G^xpd: nodes with their depth, edges far -> near with their triple and scores."""

    seeds: list[str]
    orientation: Orientation
    node_entity: list[str] = field(default_factory=list)
    node_depth: list[int] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    near: list[int] = field(default_factory=list)
    far: list[int] = field(default_factory=list)
    backward: list[bool] = field(default_factory=list)  # the walk crosses the triple tail -> head
    edge_layer: list[int] = field(default_factory=list)  # the far node's depth
    initial: list[float] = field(default_factory=list)  # s_t at expansion (node states zero)
    scores: list[float] = field(default_factory=list)  # s_t after propagation (= initial until propagated)
    payloads: list[tuple[Any, np.ndarray]] = field(default_factory=list)  # (scorer payload, kept rows) per batch
    scored: int = 0  # candidate triples scored
    cut: dict[str, int] = field(default_factory=dict)
    #: (depth, relation, backward) of the groups kept by a floor (``seed_floor``, ``floor_every_layer``), not by tau_e
    floored: set[tuple[int, str, bool]] = field(default_factory=set)
    _index: dict[Any, int] = field(default_factory=dict)

    def node(self, entity: str, depth: int) -> int:
        key = (entity, depth) if self.orientation == "layered" else entity
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.node_entity)
            self.node_entity.append(entity)
            self.node_depth.append(depth)
        return found

    def find(self, entity: str, depth: int) -> int | None:
        return self._index.get((entity, depth) if self.orientation == "layered" else entity)

    @property
    def layers(self) -> list[int]:
        """The layer of each edge (its far node's depth)."""
        return self.edge_layer

    def head_tail_nodes(self) -> tuple[list[int], list[int]]:
        """The node of each edge's subject and object (near/far swapped where the walk goes backward)."""
        heads = [f if b else n for n, f, b in zip(self.near, self.far, self.backward, strict=True)]
        tails = [n if b else f for n, f, b in zip(self.near, self.far, self.backward, strict=True)]
        return heads, tails

    def count(self, what: str, n: int = 1) -> None:
        if n:
            self.cut[what] = self.cut.get(what, 0) + n

    def __len__(self) -> int:
        return len(self.triples)


def expand(kg: KnowledgeGraph, seeds: Sequence[str], score_batch: ScoreBatch, *, hops: int = 3, tau_e: float = 0.1,
           orientation: Orientation = "layered", caps: Caps = Caps(), skip: Collection[Triple] = (),
           filter_scores: bool = True, seed_floor: bool = False, typed_ends: Collection[tuple[str, bool]] = (),
           typed_limit: int = 2000, floor_every_layer: bool = False, absorbed: Collection[Triple] = (),
           starts: Mapping[str, int] | None = None, bridge_ends: Collection[tuple[str, bool]] = ()) -> ExpandedGraph:
    """Expand from ``seeds`` for ``hops`` layers, scoring the frontier's incident triples and keeping s_t > ``tau_e``
    (every triple when ``filter_scores`` is False: the "plain BFS" ablation). Triples in ``skip`` (rejected by the
    memory manager; ``cut["masked_triples"]``) and in ``absorbed`` (already in its memory; ``cut["absorbed_triples"]``)
    are never scored or expanded again. ``starts`` (entity -> depth): entities that join the frontier at that depth as
    if reached there, so the walk goes on from where the absorbed triples end without walking them again.

    ``seed_floor``: when no triple at the seeds passes tau_e, the best-scored (relation, direction) group there is kept
    anyway (``cut["seed_floor"]`` counts its triples). The answer is reachable from a topic, so an empty first layer is
    always a wrong reading; it happens when a question is worded unlike any the scorer was trained on, and the layers
    beyond are then scored as usual. ``floor_every_layer``: the same at every layer whose frontier keeps nothing
    (``cut["layer_floor"]``), for a second reading when the first found nothing of the type asked for.

    ``typed_ends`` ((relation, backward) groups whose end has the type the question asks for): at every layer their
    triples below tau_e are kept too, at most ``typed_limit`` per layer (the best-scored; ``cut["typed_limit"]``
    counts the rest), as *terminal* edges: their far nodes are candidate answers and are not expanded from
    (``cut["typed_floor"]`` counts them). A relation the scorer cut at the last hop can then still end a walk.
    ``bridge_ends`` (groups whose end commonly leads on to a typed one: the films before "who directed the films X
    starred in" asks for their directors): kept below tau_e too, on every layer but the last, within the same limit,
    and expanded from (``cut["bridge_floor"]``), so a walk the scorer cut one hop before the typed end can reach it.

    A self-loop at a seed (MetaQA merges a person and the film about them: "Lemmy starred_actors Lemmy") is scored
    like any other triple at the seeds and walked both ways (the film's actor, the actor's film); the seed reached
    through it is a node like any other, expanded further ("the actors of the screenwriter Antwone Fisher": his
    film, through "Antwone Fisher written_by Antwone Fisher", then its actors). The seed is then an answer the KG
    gives (to readings whose paths may revisit an entity: ``simple=False``, FoG's); every other way back to a seed
    is left out."""
    graph = ExpandedGraph(seeds=list(dict.fromkeys(seeds)), orientation=orientation)
    typed = set(typed_ends)
    bridges = set(bridge_ends) - typed
    seed_set = set(graph.seeds)
    frontier = [graph.node(s, 0) for s in graph.seeds]
    frontier_score = dict.fromkeys(frontier, 1.0)
    skip_set = set(skip)
    absorbed_set = set(absorbed) - skip_set
    starts = {e: at for e, at in (starts or {}).items() if e not in seed_set and 0 <= at < hops}
    last_start = max(starts.values(), default=-1)
    for depth in range(1, hops + 1):
        for entity, at in starts.items():
            if at == depth - 1:
                node = graph.node(entity, at)
                if node not in frontier_score:
                    frontier.append(node)
                    frontier_score[node] = 1.0
        if not frontier:
            if depth > last_start:  # nothing left to walk on from
                break
            continue
        if len(frontier) > caps.max_frontier:
            ranked = sorted(frontier, key=lambda n: -frontier_score.get(n, 0.0))
            graph.count("frontier_nodes", len(frontier) - caps.max_frontier)
            frontier = ranked[:caps.max_frontier]
        candidates = _incident(kg, graph, frontier, depth, caps, skip_set, seed_set, absorbed_set)
        if not candidates:
            frontier, frontier_score = [], {}
            continue
        triples = [c[0] for c in candidates]
        layers = np.full(len(candidates), depth, dtype=np.int64)
        backward = np.fromiter((c[2] for c in candidates), dtype=bool, count=len(candidates))
        scores, payload = score_batch(triples, layers, backward)
        graph.scored += len(candidates)
        keep = np.flatnonzero(scores > tau_e) if filter_scores else np.arange(len(candidates))
        if len(keep) == 0 and ((depth == 1 and seed_floor) or floor_every_layer):
            best = int(np.argmax(scores))
            group = (triples[best][1], bool(backward[best]))
            keep = np.asarray([row for row in range(len(candidates))
                               if (triples[row][1], bool(backward[row])) == group], dtype=np.int64)
            graph.count("seed_floor" if depth == 1 else "layer_floor", len(keep))
            graph.floored.add((depth, *group))
        terminal = _typed_floor(triples, backward, scores, keep, typed, typed_limit, graph) if typed else set()
        keep = _with_rows(keep, terminal)
        if bridges and depth < hops:
            keep = _with_rows(keep, _typed_floor(triples, backward, scores, keep, bridges, typed_limit, graph,
                                                 what="bridge"))
        graph.count("below_tau_e", len(candidates) - len(keep))
        kept_rows: list[int] = []
        next_frontier: dict[int, float] = {}
        for row in keep.tolist():
            triple, near, back = candidates[row]
            other = triple[0] if back else triple[2]
            if orientation == "shortest":
                known = graph.find(other, depth)
                if known is not None and graph.node_depth[known] < depth:
                    graph.count("not_away_from_seeds")  # would point away from the seeds: not an oriented edge
                    continue
            far = graph.node(other, depth)
            graph.triples.append(triple)
            graph.near.append(near)
            graph.far.append(far)
            graph.backward.append(back)
            graph.edge_layer.append(depth)
            graph.initial.append(float(scores[row]))
            kept_rows.append(row)
            if row not in terminal:
                next_frontier[far] = max(next_frontier.get(far, 0.0),
                                         float(scores[row]) * frontier_score.get(near, 1.0))
        graph.payloads.append((payload, np.asarray(kept_rows, dtype=np.int64)))
        frontier, frontier_score = list(next_frontier), next_frontier
    graph.scores = list(graph.initial)
    return graph


def _with_rows(keep: np.ndarray, rows: set[int]) -> np.ndarray:
    """``keep`` with ``rows`` added, sorted."""
    if not rows:
        return keep
    return np.sort(np.concatenate([keep, np.fromiter(rows, dtype=np.int64, count=len(rows))]))


def _typed_floor(triples: list[Triple], backward: np.ndarray, scores: np.ndarray, keep: np.ndarray,
                 typed: set[tuple[str, bool]], limit: int, graph: ExpandedGraph, *, what: str = "typed") -> set[int]:
    """The rows of typed (or bridge) groups that tau_e cut, best-scored first, at most ``limit`` (see
    :func:`expand`); counted as ``{what}_limit`` and ``{what}_floor``."""
    kept = set(keep.tolist())
    rows = [row for row in range(len(triples))
            if row not in kept and (triples[row][1], bool(backward[row])) in typed]
    if len(rows) > limit:
        rows.sort(key=lambda row: -float(scores[row]))
        graph.count(f"{what}_limit", len(rows) - limit)
        rows = rows[:limit]
    graph.count(f"{what}_floor", len(rows))
    return set(rows)


def _incident(kg: KnowledgeGraph, graph: ExpandedGraph, frontier: list[int], depth: int, caps: Caps,
              skip: set[Triple], seeds: set[str], absorbed: set[Triple] | frozenset[Triple] = frozenset()
              ) -> list[tuple[Triple, int, bool]]:
    """Every (triple, near node, backward) incident to the frontier, hubs cut, seeds, skipped and absorbed triples left
    out."""
    by_pair: dict[tuple[str, Direction], list[int]] = {}
    for node in frontier:
        entity = graph.node_entity[node]
        for direction in (Direction.OUT, Direction.IN):
            for relation in kg.relations(entity, direction):
                by_pair.setdefault((relation, direction), []).append(node)
    cap = caps.seed_fanout if depth == 1 else caps.fanout
    node_cap = caps.node_fanout if depth > 1 else None
    per_node: dict[int, int] = {}
    out: list[tuple[Triple, int, bool]] = []
    for (relation, direction), nodes in by_pair.items():
        entities = [graph.node_entity[n] for n in nodes]
        found = kg.neighbors_many(entities, relation, direction, limit_per_entity=max(cap, caps.count_limit))
        back = direction is Direction.IN
        for node, entity in zip(nodes, entities, strict=True):
            others = found.get(entity, [])
            if len(others) > cap:
                graph.count("fanout_triples", len(others) - cap)
                others = others[:cap]
            if node_cap is not None:
                room = node_cap - per_node.get(node, 0)
                if len(others) > room:
                    graph.count("node_fanout_triples", len(others) - max(room, 0))
                    others = others[:max(room, 0)]
                per_node[node] = per_node.get(node, 0) + len(others)
            for other in others:
                if other in seeds and not (depth == 1 and other == entity):  # a seed's self-loop stays (both ways)
                    continue
                triple = (other, relation, entity) if back else (entity, relation, other)
                if triple in skip:
                    graph.count("masked_triples")
                    continue
                if triple in absorbed:
                    graph.count("absorbed_triples")
                    continue
                out.append((triple, node, back))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Reading the propagated graph


@dataclass(frozen=True)
class Path:
    """A walk from a seed along oriented edges (edge indices), its score (the product of its edges' s_t)."""

    edges: tuple[int, ...]
    score: float
    end: int  # node


def simple_paths(graph: ExpandedGraph, edges: Collection[int], *, max_paths: int = 20000,
                 combine: Literal["product", "min"] = "product", simple: bool = True) -> list[Path]:
    """Every path from a seed through ``edges`` (near -> far, one layer at a time), scored by the product of its edges'
    s_t (or their minimum: its weakest edge). With ``simple`` a path never revisits an entity; without, it only never
    returns to a seed (MetaQA's answers: the writer of Kadosh also directed the other films he wrote)."""
    children: dict[int, list[int]] = {}
    for e in edges:
        children.setdefault(graph.near[e], []).append(e)
    paths: list[Path] = []
    stack: list[tuple[int, tuple[int, ...], float, frozenset[str]]] = [
        (graph.find(s, 0), (), 1.0, frozenset([s])) for s in graph.seeds if graph.find(s, 0) is not None]  # type: ignore[misc]
    while stack and len(paths) < max_paths:
        node, walked, score, seen = stack.pop()
        for e in children.get(node, ()):
            far = graph.far[e]
            entity = graph.node_entity[far]
            if simple and entity in seen:
                continue
            path = (*walked, e)
            value = score * graph.scores[e] if combine == "product" else min(score, graph.scores[e])
            paths.append(Path(path, value, far))
            stack.append((far, path, value, seen | {entity}))
    return paths


@dataclass(frozen=True)
class RankedAnswer:
    entity: str
    score: float
    support: int  # simple paths of the answer's pattern ending at it
    path: Path
    pattern: tuple[tuple[str, bool], ...]  # (relation, backward) per hop of its best path
    records: int = 1  # the same walks counted through the source's statements (see rank_answers)


def pattern_name(pattern: Sequence[tuple[str, bool]]) -> str:
    """An answer pattern as the trace writes it: "written_by -> ^written_by -> directed_by" (^: walked backward)."""
    return " -> ".join(("^" if back else "") + relation for relation, back in pattern)


def rank_answers(graph: ExpandedGraph, tau_p: float, *, ratio: float = 0.5, max_paths: int = 20000,
                 by_support: bool = True, answerable: Callable[[list[str]], set[str]] | None = None,
                 within: Literal["potential", "expanded"] = "potential",
                 combine: Literal["product", "min", "min_last"] = "product",
                 simple: bool = True, continuation: Literal["path", "pattern"] = "path",
                 pattern_prior: PatternPrior | None = None,
                 statement_counts: StatementCounts | None = None) -> tuple[list[RankedAnswer], list[int]]:
    """Answers from the potential subgraph (edges with s_t > ``tau_p``; when no walk from a seed stays in it, from the
    whole re-scored subgraph, so a question always gets the graph's best reading).

    A path's answer score is its score (``combine``: the product of its edges, its weakest edge, or ``min_last`` the
    geometric mean of its weakest and its last edge) times (1 - its end's best continuation score), so an entity a
    relevant edge leads on from is an intermediate, not an answer. The best-scoring path gives the answer *pattern* (its relations
    and directions); the answers are the entities that pattern reaches with a score of at least ``ratio`` times the best,
    ranked by support (how many simple paths of the pattern reach them: an answer reached through several films outranks
    one reached through a single, possibly merged, film) and then score. ``answerable`` says which entities may be
    answers (kgqa: named nodes and literals, never a nameless mediator). ``within="expanded"`` reads every re-scored
    edge of the expanded subgraph instead of the potential subgraph only (a walk through an edge just under tau_p then
    still ends where the question does). ``continuation="pattern"`` chooses the answer pattern by its best walk's
    score times (1 - the mean continuation over all its walks' ends) instead of by the best single walk, so one walk
    ending where nothing leads on (a film with no listed director) cannot make an intermediate pattern the answer
    pattern; the answers within the pattern are chosen as before. ``pattern_prior`` (a pattern -> factor in [0, 1])
    multiplies every walk's value before the answer pattern is chosen: what the question says of its answer (a
    caller's answer-type model) against what a pattern's end is.
    ``statement_counts`` (the KG's :meth:`~kgqa.kg.base.KnowledgeGraph.statement_counts`) breaks the ties support
    leaves: each walk counts as the product of how often the source asserted its edges, so of two answers of a merged
    entity (MetaQA's remakes of one title) the one asserted for both films ranks first. Returns (answers, potential
    edge indices).
    """
    potential = [e for e, s in enumerate(graph.scores) if s > tau_p]
    ranked = _rank_over(graph, potential if within == "potential" else list(range(len(graph))), ratio, max_paths,
                        by_support, answerable, combine, simple, continuation, pattern_prior, statement_counts)
    if not ranked and within == "potential":  # no walk from a seed stays above tau_p: read the whole re-scored subgraph instead
        ranked = _rank_over(graph, list(range(len(graph))), ratio, max_paths, by_support, answerable, combine, simple,
                            continuation, pattern_prior, statement_counts)
    return ranked, potential


def _rank_over(graph: ExpandedGraph, potential: list[int], ratio: float, max_paths: int, by_support: bool,
               answerable: Callable[[list[str]], set[str]] | None, combine: Literal["product", "min", "min_last"],
               simple: bool, continuation_rule: Literal["path", "pattern"] = "path",
               pattern_prior: PatternPrior | None = None,
               statement_counts: StatementCounts | None = None) -> list[RankedAnswer]:
    paths = simple_paths(graph, potential, max_paths=max_paths, combine="product" if combine == "product" else "min",
                         simple=simple)
    if not paths:
        return []
    continuation: dict[int, float] = {}
    for e in potential:
        continuation[graph.near[e]] = max(continuation.get(graph.near[e], 0.0), graph.scores[e])
    seeds = set(graph.seeds)

    def pattern(path: Path) -> tuple[tuple[str, bool], ...]:
        return tuple((graph.triples[e][1], graph.backward[e]) for e in path.edges)

    def reaches(path: Path) -> bool:  # a seed is an answer only through its self-loop (see expand)
        entity = graph.node_entity[path.end]
        return entity not in seeds or (len(path.edges) == 1 and graph.triples[path.edges[0]][0] == entity)

    paths = [p for p in paths if reaches(p)]
    ends = {graph.node_entity[p.end] for p in paths}
    allowed = answerable(sorted(ends)) if answerable is not None else ends
    priors: dict[tuple[tuple[str, bool], ...], float] = {}

    def prior(path: Path) -> float:
        if pattern_prior is None:
            return 1.0
        key = pattern(path)
        if key not in priors:
            priors[key] = pattern_prior(key)
        return priors[key]

    def base(path: Path) -> float:
        if combine == "min_last":  # the weakest edge and the last one: the relation the question ends on counts twice
            return (path.score * graph.scores[path.edges[-1]]) ** 0.5 * prior(path)
        return path.score * prior(path)

    def value(path: Path) -> float:
        return base(path) * (1.0 - continuation.get(path.end, 0.0))

    scored = [(value(p), p, pattern(p)) for p in paths if graph.node_entity[p.end] in allowed]
    if not scored:
        return []
    if continuation_rule == "pattern":
        walks: dict[tuple[tuple[str, bool], ...], list[Path]] = {}
        for _, path, key in scored:
            walks.setdefault(key, []).append(path)

        def pattern_value(key: tuple[tuple[str, bool], ...]) -> float:
            onward = [continuation.get(p.end, 0.0) for p in walks[key]]
            return max(base(p) for p in walks[key]) * (1.0 - sum(onward) / len(onward))

        best_pattern = max(walks, key=pattern_value)
        best_value = max(v for v, _, key in scored if key == best_pattern)
    else:
        best_value, _, best_pattern = max(scored, key=lambda item: item[0])
    kept = [(value, path) for value, path, key in scored if key == best_pattern and value >= ratio * best_value]
    counts = _edge_statement_counts(graph, [path for _, path in kept], statement_counts)
    per_entity: dict[str, tuple[float, int, Path, int]] = {}
    for value, path in kept:
        entity = graph.node_entity[path.end]
        records = math.prod(counts.get(e, 1) for e in path.edges)
        held = per_entity.get(entity)
        if held is None:
            per_entity[entity] = (value, 1, path, records)
        else:
            per_entity[entity] = (max(held[0], value), held[1] + 1, path if value > held[0] else held[2],
                                  held[3] + records)
    ranked = [RankedAnswer(entity, value, support, path, best_pattern, records)
              for entity, (value, support, path, records) in per_entity.items()]
    key = (lambda a: (-a.support, -a.records, -a.score, a.entity)) if by_support else (lambda a: (-a.score, a.entity))
    ranked.sort(key=key)
    return ranked


def _edge_statement_counts(graph: ExpandedGraph, paths: Sequence[Path],
                           statement_counts: StatementCounts | None) -> dict[int, int]:
    """How often the source asserted each edge of ``paths`` (edges it asserted once, or a KG without counts: absent).
    A seed's self-loop is not a statement and counts once."""
    if statement_counts is None:
        return {}
    edges = sorted({e for path in paths for e in path.edges})
    counts = statement_counts([graph.triples[e] for e in edges])
    return {e: c for e, c in zip(edges, counts, strict=True) if c > 1}
