"""Relation chains read through the trained foresight scorer (issue 18, the composite ``chains`` method).

FoG scores triples; CCoR grows relation chains. :class:`ChainSteering` joins them over one question's expanded and
propagated subgraph (:func:`kgqa.steps.foresight.graph.expand`, :meth:`ForesightScorer.propagate`): a chain from the
topic entities is walked along the subgraph's oriented edges (layered orientation: the node of an entity at depth d),
so each candidate relation at the chain's end gets the propagated score of the best triple it opens, and each chain
gets the score of the best triple it arrived by and of the best triple leading on from where it stands. A triple the
expansion cut (below tau_e, or a hub cap) scores 0: the scorer never vouched for it.

:class:`ForesightPruner` ranks the candidate relations of a chain by those scores, with the same ``prune`` contract as
:class:`kgqa.steps.pruning.RelationPruner`, so :class:`kgqa.steps.explore.RelationExplorer` runs on either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kgqa.kg.base import Chain, Direction, Hop, format_chain
from kgqa.steps.foresight.graph import ExpandedGraph, Triple
from kgqa.steps.losses import note_relations
from kgqa.steps.pruning import ScoredHop
from kgqa.steps.relations import describe_hop
from kgqa.steps.reply import StepResult

if TYPE_CHECKING:
    from kgqa.core import Trace

__all__ = ["ChainReading", "ChainSteering", "ForesightPruner"]


@dataclass(frozen=True, slots=True)
class ChainReading:
    """What the scorer says of one chain: the best triple it arrived by (``arrival``), the best triple leading on from
    the nodes it reached (``onward``), the best of each hop on the way (``per_hop``), and the last hop's edges."""

    arrival: float
    onward: float
    per_hop: tuple[float, ...]
    reached: int
    last_edges: tuple[int, ...]
    #: :meth:`ChainSteering.value` of the chain, and the best value of any extension of it (0 with no depth left).
    here: float = 0.0
    beyond: float = 0.0

    @property
    def weakest(self) -> float:
        return min(self.per_hop, default=0.0)


class ChainSteering:
    """One question's propagated subgraph, indexed for walking relation chains from its seeds."""

    def __init__(self, graph: ExpandedGraph) -> None:
        self.graph = graph
        self._out: dict[int, list[int]] = {}
        for edge, near in enumerate(graph.near):
            self._out.setdefault(near, []).append(edge)
        self._seeds = [n for n, depth in enumerate(graph.node_depth) if depth == 0]

    def _matches(self, edge: int, hop: Hop) -> bool:
        return (self.graph.triples[edge][1] == hop.relation
                and self.graph.backward[edge] == (hop.direction is Direction.IN))

    def walk(self, chain: Chain) -> tuple[list[int], list[float], list[int]]:
        """(nodes reached, best score of each hop, edges of the last hop) of ``chain`` from the seeds."""
        nodes, per_hop, last = list(self._seeds), [], []
        for hop in chain:
            edges = [e for n in nodes for e in self._out.get(n, ()) if self._matches(e, hop)]
            per_hop.append(max((self.graph.scores[e] for e in edges), default=0.0))
            nodes = list(dict.fromkeys(self.graph.far[e] for e in edges))
            last = edges
        return nodes, per_hop, last

    def _extensions(self, nodes: Sequence[int]) -> dict[tuple[str, bool], tuple[float, list[int]]]:
        """Every (relation, backward) leading on from ``nodes``: its best score and the nodes it reaches."""
        out: dict[tuple[str, bool], tuple[float, list[int]]] = {}
        for n in nodes:
            for e in self._out.get(n, ()):
                key = (self.graph.triples[e][1], self.graph.backward[e])
                score, far = out.get(key, (0.0, []))
                far.append(self.graph.far[e])
                out[key] = (max(score, self.graph.scores[e]), far)
        return out

    @staticmethod
    def value(per_hop: Sequence[float], onward: float) -> float:
        """FoG's reading of a path, at the level of a relation chain: the geometric mean of its weakest and its last
        hop (the relation the question ends on counts twice) times 1 - the best triple leading on from its typical end (the median
        of its ends; an entity a relevant triple leads on from is an intermediate, not an answer)."""
        if not per_hop:
            return 0.0
        return (min(per_hop) * per_hop[-1]) ** 0.5 * (1.0 - onward)

    def best_value(self, nodes: Sequence[int], per_hop: list[float], depth_left: int, floor: float) -> float:
        """The best :meth:`value` of the chain ending at ``nodes`` or of any extension of it by up to ``depth_left``
        hops whose triples score above ``floor``: the scorer's foresight past the next hop."""
        extensions = self._extensions(nodes)
        best = self.value(per_hop, self._typical_continuation(nodes))
        if depth_left > 0:
            for score, far in extensions.values():
                if score > floor:
                    best = max(best, self.best_value(list(dict.fromkeys(far)), [*per_hop, score], depth_left - 1,
                                                     floor))
        return best

    def hop_scores(self, chain: Chain, hops: Sequence[Hop], *, depth_left: int = 0, floor: float = 0.0) -> list[float]:
        """Each hop's score from the end of ``chain``: with ``depth_left`` 0, the propagated score of the best triple it
        opens (0 where none was kept); else the best :meth:`value` of the chain extended by it and by up to
        ``depth_left`` more hops."""
        nodes, per_hop, _ = self.walk(chain)
        extensions = self._extensions(nodes)
        scores = []
        for h in hops:
            score, far = extensions.get((h.relation, h.direction is Direction.IN), (0.0, []))
            if depth_left <= 0 or score <= floor:
                scores.append(score)
            else:
                scores.append(self.best_value(list(dict.fromkeys(far)), [*per_hop, score], depth_left, floor))
        return scores

    def read(self, chain: Chain, *, depth_left: int = 0, floor: float = 0.0) -> ChainReading:
        nodes, per_hop, last = self.walk(chain)
        extensions = self._extensions(nodes)
        onward = max((score for score, _ in extensions.values()), default=0.0)
        beyond = 0.0
        if depth_left > 0:
            for score, far in extensions.values():
                if score > floor:
                    beyond = max(beyond, self.best_value(list(dict.fromkeys(far)), [*per_hop, score], depth_left - 1,
                                                         floor))
        return ChainReading(arrival=per_hop[-1] if per_hop else 1.0, onward=onward, per_hop=tuple(per_hop),
                            reached=len(nodes), last_edges=tuple(last),
                            here=self.value(per_hop, self._typical_continuation(nodes)), beyond=beyond)

    def _typical_continuation(self, nodes: Sequence[int]) -> float:
        """The median over the reached nodes of the best triple leading on from each: a chain is read at its typical
        end. FoG reads each path's own end; at the level of a relation chain the median keeps one reached name that
        is also a film from making every genre an intermediate, and one film the expansion cut short from making a
        whole set of films answers."""
        conts = sorted(max((self.graph.scores[e] for e in self._out.get(n, ())), default=0.0) for n in nodes)
        if not conts:
            return 0.0
        mid = len(conts) // 2
        return conts[mid] if len(conts) % 2 else (conts[mid - 1] + conts[mid]) / 2

    def end_scores(self, chain: Chain) -> dict[str, float]:
        """For each entity ``chain`` reaches in the subgraph, the best path to it along the chain, scored as FoG scores
        an answer path (the geometric mean of its weakest and its last triple): the scorer's order of the answers."""
        best: dict[int, tuple[float, float]] = {n: (1.0, 1.0) for n in self._seeds}  # node -> (weakest, last)
        for hop in chain:
            step: dict[int, tuple[float, float]] = {}
            for n, (weakest, _) in best.items():
                for e in self._out.get(n, ()):
                    if not self._matches(e, hop):
                        continue
                    score = self.graph.scores[e]
                    candidate = (min(weakest, score), score)
                    far = self.graph.far[e]
                    held = step.get(far)
                    if held is None or (candidate[0] * candidate[1]) > (held[0] * held[1]):
                        step[far] = candidate
            best = step
        out: dict[str, float] = {}
        for n, (weakest, last) in best.items():
            entity = self.graph.node_entity[n]
            out[entity] = max(out.get(entity, 0.0), (weakest * last) ** 0.5)
        return out

    def best_edges(self, edges: Sequence[int], limit: int) -> list[int]:
        """The ``limit`` best-scored of ``edges`` (propagated scores), best first."""
        return sorted(edges, key=lambda e: -self.graph.scores[e])[:limit]

    def triples(self, edges: Sequence[int]) -> list[Triple]:
        return [self.graph.triples[e] for e in edges]


def verify_hop(scorer: Any, labels: Any, sub_goal: str, steering: ChainSteering, edges: Sequence[int], *,
               limit: int = 64) -> float:
    """How well the hop's best triples answer ``sub_goal`` on their own: the scorer's s_t of the ``limit`` best of
    ``edges`` re-scored with ``sub_goal`` as the only sub-question and no propagation (nothing beyond the hop lifts
    them), the best of those. The VoG-style check of a hop against what its sub-goal predicts."""
    chosen = steering.best_edges(edges, limit)
    if not chosen:
        return 0.0
    graph = steering.graph
    layers = np.asarray([graph.edge_layer[e] for e in chosen], dtype=np.int64)
    backward = np.asarray([graph.backward[e] for e in chosen], dtype=bool)
    scores, _ = scorer.score_triples(labels, scorer.questions(labels, [sub_goal]), steering.triples(chosen), layers,
                                     backward)
    return float(np.max(scores)) if len(scores) else 0.0


class ForesightPruner:
    """Keeps the ``top_k`` candidate relations whose best triple scores above ``min_score``, ranked by the best reading
    (:meth:`ChainSteering.value`) the chain extended by them reaches within ``max_depth``, best first.

    The same ``prune`` contract as :class:`kgqa.steps.pruning.RelationPruner`; no model call, no embedder. Ties keep
    the KG's order, so runs repeat.
    """

    def __init__(self, steering: ChainSteering, *, top_k: int, min_score: float, step: str = "prune",
                 max_depth: int = 0, pattern: Chain = ()) -> None:
        self.steering = steering
        self.max_depth = max_depth
        #: The scorer's best reading of the whole subgraph (FoG's answer pattern): the hop that continues it is tried
        #: first while the chain is a prefix of it.
        self.pattern = tuple(pattern)
        self.top_k = top_k
        self.min_score = min_score
        self.step = step

    def prune(self, question: str, topic_names: Sequence[str], chain: Chain, candidates: Sequence[Hop], *,
              trace: Trace | None = None, from_topic: Chain | None = None,
              **prompt_vars: str) -> StepResult[list[ScoredHop]]:
        direct = self.steering.hop_scores(chain, candidates)
        ahead = self.steering.hop_scores(chain, candidates, depth_left=max(0, self.max_depth - len(chain) - 1),
                                         floor=self.min_score)
        # Followed only when the scorer kept one of its triples; ranked by the best reading the hop leads to.
        following = (self.pattern[len(chain)] if len(chain) < len(self.pattern)
                     and tuple(chain) == self.pattern[: len(chain)] else None)
        order = sorted((i for i in range(len(candidates)) if direct[i] > self.min_score),
                       key=lambda i: (candidates[i] != following, -ahead[i], -direct[i]))
        kept = [ScoredHop(candidates[i], ahead[i]) for i in order][: self.top_k]
        note_relations(self.step, candidates, [s.hop for s in kept], chain=chain if from_topic is None else from_topic)
        scores = direct
        if trace is not None:
            trace.add(self.step, scorer="foresight", chain=format_chain(chain), candidates=len(candidates),
                      scored_above=sum(1 for s in scores if s > self.min_score),
                      kept=[{"relation": describe_hop(s.hop), "score": round(s.score, 4)} for s in kept])
        return StepResult.success(kept)
