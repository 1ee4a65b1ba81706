"""Answer extraction: KG ids to answer items, the evidence triples behind a chain's answers, and the step where the LLM
picks answers among numbered KG candidates (CCoR's Global Entity Filtering; the answer step of later methods).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from kgqa.core import AnswerItem
from kgqa.kg.base import Chain, Direction, KnowledgeGraph, is_literal
from kgqa.steps.reply import StepResult, ask_reply

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.prompts import PromptBook


def answer_items(kg: KnowledgeGraph, ids: Sequence[str], *, limit: int | None = None) -> list[AnswerItem]:
    """Answer items for KG nodes, in order: the id (None for a literal, which has no id) and the display name."""
    chosen = list(ids if limit is None else ids[:limit])
    names = kg.names(chosen)
    return [AnswerItem(id=None if is_literal(e) else e, name=names.get(e) or e) for e in chosen]


def chain_evidence(kg: KnowledgeGraph, topics: Sequence[str], chain: Chain, answers: Sequence[str], *,
                   max_paths: int = 20, limit: int = 1000) -> list[list[str]]:
    """The triples of the chain's paths that end in ``answers`` (head, relation, tail), at most ``max_paths`` paths."""
    result = kg.run_chain(topics, chain, bindings=True, limit=limit)
    wanted = set(answers)
    evidence: list[list[str]] = []
    for path in result.paths or []:
        if path[-1] in wanted:
            for i, hop in enumerate(chain):
                head, tail = (path[i], path[i + 1]) if hop.direction is Direction.OUT else (path[i + 1], path[i])
                triple = [head, hop.relation, tail]
                if triple not in evidence:
                    evidence.append(triple)
        if len(evidence) >= max_paths * len(chain):
            break
    return evidence


# Rendered into the prompt as a JSON schema: its name and fields are part of what the model is asked.
class FilterChoice(BaseModel):
    keep: list[int] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Chosen:
    """What the LLM kept among the candidates shown; ``shown`` of ``offered`` were listed."""

    kept: list[str]
    shown: int
    offered: int


def choose_candidates(llm: ChatModel, prompts: PromptBook, prompt: str, question: str, candidates: Sequence[str],
                      names: dict[str, str | None], *, max_shown: int, step: str) -> StepResult[Chosen]:
    """List the first ``max_shown`` candidates by name, ask which answer the question (``{"keep": [numbers]}``).

    A failed result (unreadable reply) carries ``Chosen`` with nothing kept; the caller decides what that means.
    """
    shown = list(candidates[:max_shown])
    listing = "\n".join(f"{i}. {names.get(e) or e}" for i, e in enumerate(shown, start=1))
    reply = ask_reply(llm, prompts, prompt, FilterChoice, step=step, question=question, candidates=listing)
    if not reply.ok or reply.value is None:
        return StepResult.failed(reply.failure or "no choice", Chosen([], len(shown), len(candidates)))
    kept = [shown[i - 1] for i in dict.fromkeys(reply.value.keep) if 1 <= i <= len(shown)]
    return StepResult.success(Chosen(kept, len(shown), len(candidates)))
