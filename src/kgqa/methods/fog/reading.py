"""FoG's graph-mode reading (``mode=graph``, kgqa's: the paper always ends with the LLM): the expansion's and the
ranking's settings in one place, so FoG's config, the trainer's validation and the demo scorer read alike."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kgqa.kg.base import KnowledgeGraph
from kgqa.steps.foresight.graph import (
    Caps,
    ExpandedGraph,
    Orientation,
    PatternPrior,
    RankedAnswer,
    ScoreBatch,
    StatementCounts,
    Triple,
    expand,
    rank_answers,
)


@dataclass(frozen=True)
class GraphReading:
    """FoG's graph-mode reading: the expansion's and the ranking's settings in one place. FoG's settings default to
    :data:`READING` and the trainer's answer validation reads with it, so a model card measures what the method does
    (the values were tuned on MetaQA dev: docs/fog.md)."""

    hops: int = 3
    tau_e: float = 0.02
    tau_p: float = 0.7
    orientation: Orientation = "layered"
    caps: Caps = field(default_factory=Caps)
    seed_floor: bool = True
    ratio: float = 0.5
    within: Literal["potential", "expanded"] = "expanded"
    combine: Literal["product", "min", "min_last"] = "min_last"
    simple: bool = False
    by_support: bool = True
    continuation: Literal["path", "pattern"] = "pattern"
    by_records: bool = True

    def expand(self, kg: KnowledgeGraph, seeds: Sequence[str], score_batch: ScoreBatch, *,
               skip: Collection[Triple] = (), filter_scores: bool = True,
               typed_ends: Collection[tuple[str, bool]] = (), tau_e: float | None = None,
               floor_every_layer: bool = False, absorbed: Collection[Triple] = (),
               starts: Mapping[str, int] | None = None) -> ExpandedGraph:
        """:func:`expand` with this reading's hop budget, tau_e (unless ``tau_e`` is given), orientation, caps and
        seed floor; ``skip`` (masked), ``absorbed`` (in memory) and ``starts`` (memory ends) as :func:`expand` takes
        them."""
        return expand(kg, seeds, score_batch, hops=self.hops, tau_e=self.tau_e if tau_e is None else tau_e,
                      orientation=self.orientation,
                      caps=self.caps, skip=skip, filter_scores=filter_scores, seed_floor=self.seed_floor,
                      typed_ends=typed_ends, floor_every_layer=floor_every_layer, absorbed=absorbed, starts=starts)

    def rank(self, graph: ExpandedGraph, answerable: Callable[[list[str]], set[str]] | None = None,
             pattern_prior: PatternPrior | None = None,
             statement_counts: StatementCounts | None = None) -> tuple[list[RankedAnswer], list[int]]:
        """:func:`rank_answers` with this reading's tau_p, ratio, edges read, path score, path rule and
        continuation rule (and the question's answer-type prior, when given; the KG's statement counts as the tie-break
        after support when given and ``by_records``)."""
        return rank_answers(graph, self.tau_p, ratio=self.ratio, by_support=self.by_support, answerable=answerable,
                            within=self.within, combine=self.combine, simple=self.simple,
                            continuation=self.continuation, pattern_prior=pattern_prior,
                            statement_counts=statement_counts if self.by_records else None)


#: the default reading (FoG's defaults)
READING = GraphReading()
