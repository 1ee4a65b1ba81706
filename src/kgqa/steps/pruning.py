"""Relation pruning: score candidate hops against the question and keep the top k.

One choice object, :class:`PruningConfig`, names the scorer for every method that prunes relations:

* ``llm``: the LLM scores each candidate (semantic alignment with the question, consistency with the chain so far, goal
  proximity), as in the CoR/CCoR papers. Its prompt belongs to the calling method (``prompt`` names an entry of the
  method's prompt book), so each method keeps its own wording.
* ``embedding``: cosine similarity between the question and the relation's words (no LLM call). Only semantic alignment
  is modelled; consistency and goal proximity are left to the reasoning step.
* ``hybrid``: the embedding scorer keeps ``prefilter`` candidates, then the LLM scores those (for KGs whose entities
  have hundreds of relations, where an LLM prompt over all of them is long and costly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, Field

from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, Hop
from kgqa.steps.relations import describe_chain, describe_hop, verbalize_relation

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.prompts import PromptBook
    from kgqa.methods.base import Trace
    from kgqa.text.base import Embedder

PrunerKind = Literal["llm", "embedding", "hybrid"]


@dataclass(frozen=True)
class PruningConfig:
    kind: PrunerKind = "llm"
    top_k: int = 3
    #: hybrid only: how many candidates the embedding scorer passes to the LLM.
    prefilter: int = 20

    def __post_init__(self) -> None:
        if self.kind not in ("llm", "embedding", "hybrid"):
            raise ConfigError(f"relation pruner {self.kind!r} is not one of llm, embedding, hybrid")
        if self.top_k < 1 or self.prefilter < 1:
            raise ConfigError("relation pruning needs top_k >= 1 and prefilter >= 1")


@dataclass(slots=True)
class ScoredHop:
    hop: Hop
    score: float


class _Score(BaseModel):
    id: int = Field(description="number of the candidate relation in the list")
    score: float = Field(ge=0.0, le=1.0)


class RelationScores(BaseModel):
    scores: list[_Score]


class RelationPruner:
    """Scores candidates and keeps the top k, best first. Ties keep the KG's (alphabetical) order, so runs repeat."""

    def __init__(self, config: PruningConfig, *, llm: ChatModel | None = None, embedder: Embedder | None = None,
                 prompts: PromptBook | None = None, prompt: str = "prune_relations", step: str = "prune") -> None:
        if config.kind in ("llm", "hybrid") and (llm is None or prompts is None):
            raise ConfigError(f"relation pruner {config.kind!r} needs a chat model and a prompt book")
        if config.kind in ("embedding", "hybrid") and embedder is None:
            raise ConfigError(f"relation pruner {config.kind!r} needs an embedder (e.g. --embedder minilm)")
        self.config = config
        self.llm = llm
        self.embedder = embedder
        self.prompts = prompts
        self.prompt = prompt
        self.step = step

    def prune(self, question: str, topic_names: Sequence[str], chain: Chain, candidates: Sequence[Hop], *,
              trace: Trace | None = None, **prompt_vars: str) -> list[ScoredHop]:
        if not candidates:
            return []
        pool = list(candidates)
        if self.config.kind == "embedding":
            scored = self._embedding_scores(question, pool)
        elif self.config.kind == "llm":
            scored = self._llm_scores(question, topic_names, chain, pool, prompt_vars)
        else:
            pre = sorted(self._embedding_scores(question, pool), key=lambda s: -s.score)[: self.config.prefilter]
            kept = {s.hop for s in pre}
            scored = self._llm_scores(question, topic_names, chain, [h for h in pool if h in kept], prompt_vars)
        order = {h: i for i, h in enumerate(pool)}
        best = sorted(scored, key=lambda s: (-s.score, order[s.hop]))[: self.config.top_k]
        if trace is not None:
            trace.add(self.step, scorer=self.config.kind, candidates=len(pool),
                      kept=[{"relation": describe_hop(s.hop), "score": round(s.score, 4)} for s in best])
        return best

    def _embedding_scores(self, question: str, hops: list[Hop]) -> list[ScoredHop]:
        assert self.embedder is not None
        vectors = self.embedder.embed([question, *(verbalize_relation(h) for h in hops)])
        sims = np.asarray(vectors[1:] @ vectors[0], dtype=float)
        # Cosine in [-1, 1] mapped to [0, 1] so every scorer speaks the same scale.
        return [ScoredHop(h, float((s + 1.0) / 2.0)) for h, s in zip(hops, sims, strict=True)]

    def _llm_scores(self, question: str, topic_names: Sequence[str], chain: Chain, hops: list[Hop],
                    prompt_vars: dict[str, str]) -> list[ScoredHop]:
        from kgqa.llm.structured import StructuredOutputError, ask_json

        assert self.llm is not None and self.prompts is not None
        listing = "\n".join(f"{i}. {describe_hop(h)}" for i, h in enumerate(hops, start=1))
        messages = self.prompts.messages(self.prompt, question=question, chain=describe_chain(topic_names, chain),
                                         candidates=listing, top_k=str(self.config.top_k), **prompt_vars)
        try:
            reply = ask_json(self.llm, messages, RelationScores, step=self.step)
        except StructuredOutputError:
            # The model could not score: keep the KG order, so exploration still proceeds (recorded by the caller).
            return [ScoredHop(h, 0.0) for h in hops]
        scores = {s.id: s.score for s in reply.scores if 1 <= s.id <= len(hops)}
        return [ScoredHop(h, scores.get(i, 0.0)) for i, h in enumerate(hops, start=1)]
