"""Entity pruning: score candidate entities against the question and keep the top k (ToG's and PoG's entity step).

Like relation pruning, the scorer is a choice: ``embedding`` (cosine of the question with the entity's name, no LLM
call), ``bm25`` (BM25 of the question over the candidates' names, ToG's cheapest option; no LLM call, no embedder) or
``llm`` (the model scores the numbered names; the prompt belongs to the calling method). Nameless nodes (CVTs)
cannot be judged by name: they are kept apart and reported, never scored as if their id were a name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from kgqa.errors import ConfigError
from kgqa.llm.structured import Reply
from kgqa.steps.losses import note_entities
from kgqa.steps.pruning import cosine_scores
from kgqa.steps.reply import StepResult, ask_reply

if TYPE_CHECKING:
    from kgqa.core import MethodContext, Question, TopicEntity, Trace
    from kgqa.llm.base import ChatModel
    from kgqa.llm.oracle import OracleAsk
    from kgqa.llm.prompts import Signature
    from kgqa.text.base import Embedder


class _EntityScore(Reply):
    id: int = Field(description="number of the candidate entity in the list")
    score: float = Field(ge=0.0, le=1.0)


class EntityScores(Reply):
    scores: list[_EntityScore]


def score_gold_entities(ask: OracleAsk) -> dict[str, Any]:
    """The oracle rule of entity scoring: 1 for each listed entity on a gold walk (a gold answer included), 0 for the
    others."""
    listed = ask.numbered("candidates")
    right = [number for number, name in listed if ask.on_path(name)]
    kept = set(ask.choose([n for n, _ in listed], right))
    return {"scores": [{"id": number, "score": 1.0 if number in kept else 0.0} for number, _ in listed]}


@dataclass(frozen=True, slots=True)
class Candidate:
    """An entity offered to a pruning step: its id and display name (None for a nameless node)."""

    id: str
    name: str | None


@dataclass(frozen=True, slots=True)
class ScoredEntity:
    id: str
    name: str
    score: float


EntityScorer = Literal["embedding", "bm25", "llm"]
EntityScorerChoice = Literal["auto", "llm", "embedding", "bm25"]


def resolve_entity_scorer(choice: str, llm: str | None) -> EntityScorer:
    """The scorer ``choice`` stands for with the model spec ``llm``: ``auto`` is the embedding scorer for an offline
    local model (a 135M model cannot rank entities) and the LLM otherwise, as for relations."""
    from kgqa.llm import is_local_spec

    if choice == "auto":
        return "embedding" if is_local_spec(llm) else "llm"
    if choice not in ("embedding", "bm25", "llm"):
        raise ConfigError(f"entity pruner {choice!r} is not one of auto, embedding, bm25, llm")
    return choice  # type: ignore[return-value]


def topics_in_kg(question: Question, ctx: MethodContext, method: str) -> tuple[list[TopicEntity], str | None]:
    """The question's topic entities the KG has (also recorded as ``ctx.topics``, which the prediction carries), with
    a ``start`` trace event; the second value is why the method must answer without the KG (no topic in it, or the KG
    failed while checking), else None."""
    from kgqa.errors import KGError

    try:
        present = [t for t in question.topic_entities if ctx.kg.has_entity(t.id)]
    except KGError as exc:
        ctx.trace.add("start", method=method, topics=[], error=f"{type(exc).__name__}: {exc}")
        return [], f"the KG failed while checking the topics: {type(exc).__name__}: {exc}"
    ctx.topics = [t.id for t in present]
    ctx.trace.add("start", method=method, topics=list(ctx.topics),
                  missing_topics=[t.id for t in question.topic_entities if t not in present])
    return present, None if present else "no topic entity of the question is in the KG"


class EntityPruner:
    """Keeps the ``top_k`` named candidates that best fit the question, best first; ties keep the given order.

    ``max_tokens``, ``temperature`` and ``seed`` are the LLM scorer's reply budget and sampling (None: the backend's
    defaults).
    """

    def __init__(self, kind: EntityScorer, *, top_k: int, llm: ChatModel | None = None,
                 embedder: Embedder | None = None, signature: Signature | None = None, step: str = "prune_entities",
                 max_tokens: int | None = None, temperature: float | None = None, seed: int | None = None) -> None:
        if kind not in ("embedding", "bm25", "llm"):
            raise ConfigError(f"entity pruner {kind!r} is not one of embedding, bm25, llm")
        if top_k < 1:
            raise ConfigError(f"entity pruning needs top_k >= 1, got {top_k}")
        if kind == "llm" and (llm is None or signature is None):
            raise ConfigError("entity pruner 'llm' needs a chat model and the method's entity-scoring prompt")
        if kind == "embedding" and embedder is None:
            raise ConfigError("entity pruner 'embedding' needs an embedder (e.g. --embedder minilm)")
        self.kind, self.top_k, self.llm, self.embedder = kind, top_k, llm, embedder
        # the calling method's prompt with EntityScores as its reply; its step names the trace event
        self.signature = signature
        self.step = signature.step if signature is not None else step
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed

    def prune(self, question: str, candidates: Sequence[Candidate], *, trace: Trace | None = None,
              depth: int | None = None, **prompt_vars: str) -> StepResult[list[ScoredEntity]]:
        """The ``top_k`` named candidates, best first (a nameless one is the caller's to keep or drop). ``depth``: the
        candidates' hops from the topic, for loss attribution (:mod:`kgqa.steps.losses`)."""
        named = [c for c in candidates if c.name]
        nameless = len(candidates) - len(named)
        if not named:
            result: StepResult[list[ScoredEntity]] = StepResult.success([])
        elif self.kind == "embedding":
            assert self.embedder is not None
            scores = cosine_scores(self.embedder, question, [c.name or "" for c in named])
            result = StepResult.success([ScoredEntity(c.id, c.name or "", s) for c, s in zip(named, scores, strict=True)])
        elif self.kind == "bm25":
            from kgqa.text.bm25 import BM25Index

            raw = BM25Index([c.name or "" for c in named]).scores(question)
            top = float(raw.max()) if len(raw) else 0.0
            result = StepResult.success([ScoredEntity(c.id, c.name or "", float(x) / top if top > 0 else 0.0)
                                         for c, x in zip(named, raw, strict=True)])
        else:
            result = self._llm_scores(question, named, prompt_vars)
        order = {c.id: i for i, c in enumerate(named)}
        best = sorted(result.value or [], key=lambda e: (-e.score, order[e.id]))[: self.top_k]
        note_entities(self.step, [c.id for c in named], [e.id for e in best], depth=depth)
        if trace is not None:
            event = trace.add(self.step, scorer=self.kind, candidates=len(candidates), nameless=nameless,
                              kept=[{"id": e.id, "name": e.name, "score": round(e.score, 4)} for e in best])
            if not result.ok:
                event["failure"] = result.failure
                event["fallback"] = "given order"
        return StepResult(best, result.ok, result.failure)

    def _llm_scores(self, question: str, named: list[Candidate], prompt_vars: dict[str, str]
                    ) -> StepResult[list[ScoredEntity]]:
        assert self.llm is not None and self.signature is not None
        listing = "\n".join(f"{i}. {c.name}" for i, c in enumerate(named, start=1))
        reply = ask_reply(self.llm, self.signature, question=question,
                          candidates=listing, top_k=str(self.top_k), max_tokens=self.max_tokens,
                          temperature=self.temperature, seed=self.seed, **prompt_vars)
        if not reply.ok or reply.value is None:
            return StepResult.failed(reply.failure or "no scores", [ScoredEntity(c.id, c.name or "", 0.0) for c in named])
        scores = {s.id: s.score for s in reply.value.scores if 1 <= s.id <= len(named)}
        return StepResult.success([ScoredEntity(c.id, c.name or "", scores.get(i, 0.0))
                                   for i, c in enumerate(named, start=1)])
