"""Relation pruning: score candidate hops against the question and keep the top k.

One choice object, :class:`PruningConfig`, names the scorer for every method that prunes relations:

* ``llm``: the LLM scores each candidate (semantic alignment with the question, consistency with the chain so far, goal
  proximity), as in the CoR/CCoR papers. Its prompt belongs to the calling method (``prompt`` names an entry of the
  method's prompt book), so each method keeps its own wording.
* ``embedding``: cosine similarity between the question and the relation's words (no LLM call). Only semantic alignment
  is modelled; consistency and goal proximity are left to the reasoning step.
* ``hybrid``: the embedding scorer keeps ``prefilter`` candidates, then the LLM scores those (for KGs whose entities
  have hundreds of relations, where an LLM prompt over all of them is long and costly).
* ``auto``: ``embedding`` for an offline local model (the tiny CPU models rank relations worse than MiniLM cosine
  does, docs/llm.md), ``llm`` otherwise; resolved by :func:`resolve_pruner` from the model spec.

:meth:`RelationPruner.prune` returns a :class:`~kgqa.steps.reply.StepResult`: when the LLM's scores cannot be read it
is a failed result (the reason is in the trace event too) whose value keeps the KG's order, never a silent default.
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
from kgqa.steps.reply import StepResult

if TYPE_CHECKING:
    from kgqa.core import Trace
    from kgqa.llm.base import ChatModel
    from kgqa.llm.prompts import PromptBook
    from kgqa.text.base import Embedder

PrunerKind = Literal["llm", "embedding", "hybrid"]
PrunerChoice = Literal["auto", "llm", "embedding", "hybrid"]


def resolve_pruner(choice: str, llm: str | None) -> PrunerKind:
    """The scorer ``choice`` stands for with the model spec (or model name) ``llm``: ``auto`` picks by the model."""
    from kgqa.llm import is_local_spec

    if choice == "auto":
        return "embedding" if is_local_spec(llm) else "llm"
    if choice not in ("llm", "embedding", "hybrid"):
        raise ConfigError(f"relation pruner {choice!r} is not one of auto, llm, embedding, hybrid")
    return choice  # type: ignore[return-value]


def pruner_needs_embedder(kind: str) -> bool:
    return kind in ("embedding", "hybrid")


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


# The reply models' names and docstrings are rendered into the prompt (as the JSON schema ask_json shows the model):
# changing them changes what every method using them asks, so they stay as they are.
class RelationScores(BaseModel):
    scores: list[_Score]


def cosine_scores(embedder: Embedder, query: str, texts: Sequence[str]) -> list[float]:
    """Cosine similarity of ``query`` with each text, mapped from [-1, 1] to [0, 1] so every scorer speaks one scale."""
    vectors = embedder.embed([query, *texts])
    sims = np.asarray(vectors[1:] @ vectors[0], dtype=float)
    return [float((x + 1.0) / 2.0) for x in sims]


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
              trace: Trace | None = None, **prompt_vars: str) -> StepResult[list[ScoredHop]]:
        """The top-k candidates, best first. A failed result (unreadable LLM scores) still carries the KG-order top k."""
        if not candidates:
            return StepResult.success([])
        pool = list(candidates)
        if self.config.kind == "embedding":
            scored = StepResult.success(self._embedding_scores(question, pool))
        elif self.config.kind == "llm":
            scored = self._llm_scores(question, topic_names, chain, pool, prompt_vars)
        else:
            pre = sorted(self._embedding_scores(question, pool), key=lambda s: -s.score)[: self.config.prefilter]
            kept = {s.hop for s in pre}
            scored = self._llm_scores(question, topic_names, chain, [h for h in pool if h in kept], prompt_vars)
        order = {h: i for i, h in enumerate(pool)}
        best = sorted(scored.value or [], key=lambda s: (-s.score, order[s.hop]))[: self.config.top_k]
        if trace is not None:
            event = trace.add(self.step, scorer=self.config.kind, candidates=len(pool),
                              kept=[{"relation": describe_hop(s.hop), "score": round(s.score, 4)} for s in best])
            if not scored.ok:
                event["failure"] = scored.failure
                event["fallback"] = "kg order"
        return StepResult(best, scored.ok, scored.failure)

    def _embedding_scores(self, question: str, hops: list[Hop]) -> list[ScoredHop]:
        assert self.embedder is not None
        scores = cosine_scores(self.embedder, question, [verbalize_relation(h) for h in hops])
        return [ScoredHop(h, s) for h, s in zip(hops, scores, strict=True)]

    def _llm_scores(self, question: str, topic_names: Sequence[str], chain: Chain, hops: list[Hop],
                    prompt_vars: dict[str, str]) -> StepResult[list[ScoredHop]]:
        from kgqa.steps.reply import ask_reply

        assert self.llm is not None and self.prompts is not None
        listing = "\n".join(f"{i}. {describe_hop(h)}" for i, h in enumerate(hops, start=1))
        reply = ask_reply(self.llm, self.prompts, self.prompt, RelationScores, step=self.step, question=question,
                          chain=describe_chain(topic_names, chain), candidates=listing, top_k=str(self.config.top_k),
                          **prompt_vars)
        if not reply.ok or reply.value is None:
            # The model could not score: keep the KG order so exploration still proceeds, and say so.
            return StepResult.failed(reply.failure or "no scores", [ScoredHop(h, 0.0) for h in hops])
        scores = {s.id: s.score for s in reply.value.scores if 1 <= s.id <= len(hops)}
        return StepResult.success([ScoredHop(h, scores.get(i, 0.0)) for i, h in enumerate(hops, start=1)])
