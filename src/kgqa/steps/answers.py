"""Answer extraction: KG ids to answer items, the evidence triples behind a chain's answers, and the step where the LLM
picks answers among numbered KG candidates (CCoR's Global Entity Filtering; the answer step of later methods).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgqa.core import AnswerItem
from kgqa.kg.base import Chain, Direction, KnowledgeGraph, is_literal
from kgqa.llm.structured import Reply
from kgqa.steps.reply import StepResult, ask_reply

if TYPE_CHECKING:
    from kgqa.llm.base import ChatModel
    from kgqa.llm.oracle import OracleAsk
    from kgqa.llm.prompts import Signature


def answer_items(kg: KnowledgeGraph, ids: Sequence[str], *, limit: int | None = None) -> list[AnswerItem]:
    """Answer items for KG nodes, in order: the id (None for a literal, which has no id) and the display name.

    A nameless node (a CVT mediator) is never an answer: it is left out (use :func:`presentable` to see which).
    """
    chosen = list(ids if limit is None else ids[:limit])
    names = kg.names(chosen)
    return [AnswerItem(id=None if is_literal(e) else e, name=names.get(e) or e) for e in chosen
            if is_literal(e) or names.get(e)]


def presentable(kg: KnowledgeGraph, ids: Sequence[str]) -> list[str]:
    """The ids that can be shown to a user as answers: literals and named nodes (not nameless CVT mediators)."""
    names = kg.names(list(ids))
    return [e for e in ids if is_literal(e) or names.get(e)]


def mention_scores(query: str, texts: Sequence[str]) -> list[float]:
    """How strongly each text is mentioned in ``query``: 1.0 when the whole (normalised) text occurs in it as words,
    else the share of its words that do (0 when none). Years, titles and names the question spells out rank first."""
    from kgqa.normalize import normalize_label

    padded = f" {normalize_label(query)} "
    query_words = set(padded.split())
    scores = []
    for text in texts:
        norm = normalize_label(text)
        if not norm:
            scores.append(0.0)
        elif f" {norm} " in padded:
            scores.append(1.0)
        else:
            words = norm.split()
            scores.append(0.9 * sum(w in query_words for w in words) / len(words))
    return scores


def rank_by_mention(query: str, ids: Sequence[str], names: dict[str, str | None]) -> list[str]:
    """``ids`` ordered by :func:`mention_scores` of their names in ``query``, best first; ties keep the given order."""
    scores = mention_scores(query, [names.get(e) or "" for e in ids])
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order]


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
class FilterChoice(Reply):
    keep: list[int]


def keep_gold_candidates(ask: OracleAsk) -> dict[str, Any]:
    """The oracle rule of a choice among numbered candidates: the gold answers listed, or, when none is, the listed
    nodes of a gold walk (a step toward the answer)."""
    listed = ask.numbered("candidates")
    answers = [n for n, name in listed if ask.shows(name, ask.gold.answer_names, mediators=False)]
    right = answers or [n for n, name in listed if ask.on_path(name)]
    return {"keep": ask.choose([n for n, _ in listed], right)}


@dataclass(frozen=True, slots=True)
class Chosen:
    """What the LLM kept among the candidates shown; ``shown`` of ``offered`` were listed."""

    kept: list[str]
    shown: int
    offered: int


def choose_candidates(llm: ChatModel, signature: Signature, question: str, candidates: Sequence[str],
                      names: dict[str, str | None], *, max_shown: int, max_tokens: int | None = None
                      ) -> StepResult[Chosen]:
    """List the first ``max_shown`` candidates by name, ask which answer the question (``signature``: the method's
    prompt with :class:`FilterChoice`, ``{"keep": [numbers]}``, as its reply).

    The caller orders ``candidates`` (e.g. :func:`rank_by_mention`) so that the ones shown are the likeliest; ``Chosen``
    says how many were shown of how many offered. A failed result (unreadable reply) carries ``Chosen`` with nothing
    kept; the caller decides what that means.
    """
    shown = list(candidates[:max_shown])
    listing = "\n".join(f"{i}. {names.get(e) or e}" for i, e in enumerate(shown, start=1))
    reply = ask_reply(llm, signature, max_tokens=max_tokens, question=question, candidates=listing)
    if not reply.ok or reply.value is None:
        return StepResult.failed(reply.failure or "no choice", Chosen([], len(shown), len(candidates)))
    kept = [shown[i - 1] for i in dict.fromkeys(reply.value.keep) if 1 <= i <= len(shown)]
    return StepResult.success(Chosen(kept, len(shown), len(candidates)))
