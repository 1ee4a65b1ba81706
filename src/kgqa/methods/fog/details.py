"""FoG's account of one answer (``prediction.details``): each expansion, each memory round, the answer-type reading,
the typed retry and the answer pattern with its evidence paths. The method fills it as it goes; ``explain`` reads it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kgqa.methods.base import MethodDetails


class Expansion(BaseModel):
    """One foresight expansion (with its propagation)."""

    round: int
    typed: bool = False
    scored: int = 0
    kept: int = 0
    layers: int = 0
    potential: int = 0
    cut: dict[str, int] = Field(default_factory=dict)


class MemoryRound(BaseModel):
    """One memory-manager call: what it was shown and what it kept, answered and asked next."""

    round: int
    ok: bool = True
    shown: int = 0
    selected: int = 0
    invented: int = 0
    answers: list[str] = Field(default_factory=list)
    next: list[str] = Field(default_factory=list)
    failure: str | None = None


class AnswerTyping(BaseModel):
    """The answer-type reading of the question: the likeliest answer type and, with a topic head, topic type."""

    best: str
    p: float
    focus: str | None = None
    topic: str | None = None
    topic_p: float | None = None
    reader: bool = False


class TypedRetry(BaseModel):
    """The typed retry: the answer pattern before and after, with P(type of its end), and whether the retry was read."""

    used: bool
    before: str | None = None
    p_before: float | None = None
    after: str | None = None
    p_after: float | None = None


class FoGDetails(MethodDetails):
    mode: Literal["graph", "llm"] | None = None
    sub_questions: list[str] = Field(default_factory=list)
    expansions: list[Expansion] = Field(default_factory=list)
    rounds: list[MemoryRound] = Field(default_factory=list)
    answer_type: AnswerTyping | None = None
    typed_retry: TypedRetry | None = None
    #: the answer pattern, relations with ``^`` for a backward hop (graph reading)
    pattern: str | None = None
    #: the best evidence paths, each ``(head, relation, tail) s=score -> ...``
    paths: list[str] = Field(default_factory=list)
    #: what gave the answer: graph mode, a memory round, the graph reading after the rounds
    source: str | None = None
    #: why graph mode's reading answered in LLM mode
    fallback: str | None = None

    def lines(self) -> list[str]:
        """The account as ``kgqa ask`` prints it."""
        lines = [f"expansion (round {e.round}): {e.scored} triples scored, {e.kept} kept over {e.layers} layers, "
                 f"{e.potential} in the potential subgraph; cut: "
                 + (", ".join(f"{k} {v}" for k, v in sorted(e.cut.items())) or "nothing") for e in self.expansions]
        lines += [f"memory round {r.round}: " + (f"{r.shown} shown, {r.selected} selected, {r.invented} invented, "
                                                 f"answers {r.answers or '-'}" if r.ok else f"failed ({r.failure})")
                  + (f", next: {r.next}" if r.next else "") for r in self.rounds]
        typed = self.answer_type
        if typed is not None:
            lines.append(f"answer type: {typed.best} (p {typed.p:.2f}; weighs each answer pattern by its end's type)")
            if typed.focus:
                lines.append(f"focus phrase: \"{typed.focus}\" (read beside the whole question)")
            if typed.topic:
                lines.append(f"topic type: {typed.topic} (p {typed.topic_p or float('nan'):.2f}; weighs each answer "
                             "pattern by the type it starts from)")
        retry = self.typed_retry
        if retry is not None:
            lines.append(f"typed retry: {retry.before or 'no answer'} (p {retry.p_before}) -> "
                         f"{retry.after or 'no answer'} (p {retry.p_after}), "
                         + ("read" if retry.used else "not read: the first reading stands"))
        if self.pattern:
            lines.append(f"answer pattern: {self.pattern} ({self.source})")
        lines += [f"evidence path: {path}" for path in self.paths[:3]]
        if self.fallback:
            lines.append(f"fallback: {self.fallback}")
        return lines
