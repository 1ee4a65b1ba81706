"""The types every layer shares: questions, topic entities, gold answers, predictions, answer items, grounding, the trace
and the method context.

They sit below ``steps/``, ``methods/`` and ``eval/`` (which all speak them) and import nothing of kgqa but errors, so a
step never needs to import a method to name what it returns.
"""

from __future__ import annotations

import enum
import math
import unicodedata
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:  # the KG, LLM and text layers are only named here, never imported at run time
    from kgqa.artifacts import ArtifactStore
    from kgqa.kg.base import KnowledgeGraph
    from kgqa.llm.accounting import Recorder
    from kgqa.llm.base import ChatModel
    from kgqa.text.base import Embedder

__all__ = [
    "GROUNDING_WEIGHTS", "MAX_QUESTION_CHARS", "AnswerItem", "Audit", "GoldAnswer", "GoldReasoning", "Grounding",
    "MethodContext", "Prediction", "Question", "TopicEntity", "Trace", "check_question_text",
]


# ---------------------------------------------------------------------------------------------------------------------
# Questions


#: The longest question ``kgqa ask`` and ``kgqa serve`` take, in characters (a 120 KB question was 36,286 prompt tokens).
MAX_QUESTION_CHARS = 2000


def check_question_text(text: str) -> str:
    """``text`` if it can be a question someone asks, else a :class:`~kgqa.errors.ConfigError` saying why: empty, longer
    than :data:`MAX_QUESTION_CHARS`, or holding a control character (NUL, ESC, a lone surrogate ...; newline and tab
    are fine). The one rule of ``kgqa ask`` and ``POST /v1/ask``."""
    from kgqa.errors import ConfigError

    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the question is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise ConfigError(f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}")
    for position, char in enumerate(text):
        if char in "\n\t":
            continue
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise ConfigError(f"the question holds the control character U+{ord(char):04X} at position {position + 1}; "
                              "only newline and tab are allowed")
    return text


class TopicEntity(BaseModel):
    """An entity the question is about: its KG id (``m.0abc``, ``Q42``, a MetaQA label) and its display name."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class GoldAnswer(BaseModel):
    """One gold answer. ``id`` is ``None`` for a literal (a year, a count) or when the data gives names only."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    name: str
    aliases: list[str] = Field(default_factory=list)


class Question(BaseModel):
    """A benchmark question.

    ``metadata`` keys used across datasets (present only where the data says): ``hops`` (int), ``qtype`` (str),
    ``compositionality`` (str), ``constraints`` (list), ``sparql`` (str), ``dataset`` and ``split``; loaders add their
    own (``level``, ``function``, ``webqsp_id`` ...).
    """

    id: str
    text: str
    topic_entities: list[TopicEntity] = Field(default_factory=list)
    answers: list[GoldAnswer] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def topic_ids(self) -> list[str]:
        return [t.id for t in self.topic_entities]

    @property
    def gold_names(self) -> list[str]:
        return [a.name for a in self.answers]


@dataclass(frozen=True)
class GoldReasoning:
    """What the harness knows of how a question is answered, computed on the KG from the dataset's gold (never shown to
    a method; the oracle reasoner and loss attribution read it).

    ``chains``: each gold relation chain from the topic, a hop as ``(relation, backward)`` (the dataset's chain first,
    then the same walk by equivalent hops, e.g. a relation's declared reverse). ``constraints``: each gold constraint
    as ``(position, hops, value)``: from the chain's node at ``position`` (0 the topic ... len(chain) the answer) the
    ``hops`` reach ``value`` (an id or literal, or None for an ordering). ``answers``: gold answer ids (a name where the
    data has no id).
    ``path_nodes``: every KG node on a walk of a gold chain from a topic to a gold answer, by depth (``path_nodes[d]``
    the nodes d hops from the topic; depth 0 the topics). ``names``: normalised surface forms of the answers
    (``answer_names``), of the path nodes (``path_names``) and of the constraint values (``constraint_names``), as
    prompts show them.
    """

    chains: tuple[tuple[tuple[str, bool], ...], ...] = ()
    constraints: tuple[tuple[int, tuple[tuple[str, bool], ...], str | None], ...] = ()
    answers: frozenset[str] = frozenset()
    answer_names: frozenset[str] = frozenset()
    path_nodes: tuple[frozenset[str], ...] = ()
    path_names: frozenset[str] = frozenset()
    constraint_names: frozenset[str] = frozenset()

    @property
    def relations(self) -> frozenset[str]:
        """Every relation of a gold chain or constraint."""
        return frozenset(r for chain in (*self.chains, *(c[1] for c in self.constraints)) for r, _ in chain)

    @property
    def nodes(self) -> frozenset[str]:
        """Every node on a gold walk, the topics included."""
        return frozenset().union(*self.path_nodes) if self.path_nodes else frozenset()


# ---------------------------------------------------------------------------------------------------------------------
# Predictions


class Grounding(enum.StrEnum):
    """Where the final answer came from (CCoR paper, Sec. V-A).

    ``structured``: derived entirely from explicit KG execution. ``synthesis``: the KG gave intermediate results (e.g.
    a candidate set) and the LLM decided the answer from them. ``parametric``: the LLM answered from its own memory.
    """

    STRUCTURED = "structured"
    SYNTHESIS = "synthesis"
    PARAMETRIC = "parametric"

    @property
    def weight(self) -> float:
        """The KGR weight of this state (Eq. 10): 1.0, 0.5, 0."""
        return GROUNDING_WEIGHTS[self]


GROUNDING_WEIGHTS: dict[Grounding, float] = {
    Grounding.STRUCTURED: 1.0,
    Grounding.SYNTHESIS: 0.5,
    Grounding.PARAMETRIC: 0.0,
}


class AnswerItem(BaseModel):
    """One predicted answer: the KG id when the method has one, and the name shown to the user."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    name: str = ""


def _coerce_answer(value: Any) -> Any:
    # Methods and baselines often have bare strings; accept them so every method need not wrap them.
    if isinstance(value, str):
        return AnswerItem(id=None, name=value)
    if isinstance(value, tuple) and len(value) == 2:
        return AnswerItem(id=value[0], name=value[1] if value[1] is not None else "")
    return value


class Audit(BaseModel):
    """A verdict a method reached about some KG nodes, recorded for the evaluation harness to check against gold.

    A method judges its own progress (a judge says "have answer", a verifier says "complete"); it never sees gold
    answers, so it only records what it decided and on which nodes, and the harness
    (:func:`kgqa.eval.metrics.score_prediction`) decides whether those nodes hold a gold answer.

    ``check`` names the verdict (``"srp.judge"``, ``"srp.retrieved"``). ``claim`` is True when the method claims the
    answer is among ``nodes``, False when it claims it is not, None when it claims nothing and only records what it
    retrieved. ``nodes`` are KG ids and literals (N-Triples strings, as in ``Prediction.evidence``). ``names`` are display
    names: ``names[i]`` names ``nodes[i]`` (``""`` for none; a nameless literal is matched by its value), and names
    beyond the last node are name-only items (an answer the method has no node for). ``step`` is the loop iteration
    (the harness takes the audit with the highest step as a check's final verdict, else the last one listed).
    """

    model_config = ConfigDict(frozen=True)

    check: str = Field(min_length=1)
    claim: bool | None = None
    nodes: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)
    step: int | None = None


class Prediction(BaseModel):
    """What a method returns for one question (JSON-serialisable with ``model_dump(mode="json")``).

    ``answers`` are ranked, best first. ``evidence`` holds the triples or paths the answer rests on (each a list of
    ids/names). ``trace`` is the step trace, ``usage`` the accounting totals (``calls``, ``prompt_tokens``,
    ``completion_tokens``, ``latency_s`` ...). ``error`` is set when the method failed; the answers are then whatever it
    had (usually none). ``grounding`` defaults to ``parametric`` so a method that forgets it is never over-credited.
    ``audits`` are the method's own verdicts (:class:`Audit`), scored against gold by the harness; ``stats`` are
    method-specific numbers of this question (``{"edits": 2}``), averaged per key by the run's summary. ``topics`` are
    the KG ids of the topic entities the method started from; ``details`` are the method's own typed account of how it
    answered (its ``Details`` model as JSON: chains, a plan, rounds), which its ``explain()`` reads, so no caller
    reads a trace event by name.
    """

    answers: list[AnswerItem] = Field(default_factory=list)
    grounding: Grounding = Grounding.PARAMETRIC
    evidence: list[list[str]] = Field(default_factory=list)
    trace: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    audits: list[Audit] = Field(default_factory=list)
    stats: dict[str, float] = Field(default_factory=dict)
    topics: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("details", mode="before")
    @classmethod
    def _details_as_json(cls, value: Any) -> Any:
        if isinstance(value, BaseModel):  # a method's typed details travel as JSON (runs, the service)
            return value.model_dump(mode="json")
        return value

    @field_validator("answers", mode="before")
    @classmethod
    def _answers_from_strings(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [_coerce_answer(v) for v in value]
        return value

    @field_validator("stats", mode="after")
    @classmethod
    def _finite_stats(cls, value: dict[str, float]) -> dict[str, float]:
        for key, number in value.items():
            if not key:
                raise ValueError("a stats key must be a non-empty name")
            if not math.isfinite(number):
                raise ValueError(f"stats[{key!r}] must be a finite number, got {number!r}")
        return value

    @classmethod
    def failed(cls, error: str, *, usage: dict[str, Any] | None = None,
               trace: list[dict[str, Any]] | None = None) -> Prediction:
        """A prediction for a question whose method raised: no answers, parametric, the error kept."""
        return cls(answers=[], grounding=Grounding.PARAMETRIC, usage=dict(usage or {}), trace=list(trace or []),
                   error=error)

    @property
    def names(self) -> list[str]:
        """The ranked answer names."""
        return [a.name for a in self.answers]


# ---------------------------------------------------------------------------------------------------------------------
# Context


class Trace(list[dict[str, Any]]):
    """The step trace of one question: a plain list of events (so it serialises as JSON as is)."""

    def add(self, step: str, **data: Any) -> dict[str, Any]:
        """Append the event ``{"step": step, **data}`` and return it (so a step can fill in its outcome later)."""
        event: dict[str, Any] = {"step": step, **data}
        self.append(event)
        return event

    def steps(self) -> list[str]:
        return [str(e.get("step", "")) for e in self]


@dataclass
class MethodContext:
    """What a method may use while answering: the KG, the chat model, an optional embedder, a seed, the recorder, the
    trace of the question, and the artifact store (trained weights, precomputed indexes; ``kgqa artifacts``).

    The KG is None for a method whose ``needs()`` says it needs none (IO, CoT); the LLM is None for a graph-only mode.
    ``topics`` (the topic entities found in the KG) and ``details`` (the method's typed account, a pydantic model it
    fills as it goes) are per question, like the trace; the caller attaches them to the prediction, so a method that
    returns early keeps them.
    """

    kg: KnowledgeGraph
    llm: ChatModel
    embedder: Embedder | None = None
    seed: int = 0
    recorder: Recorder | None = None
    trace: Trace = field(default_factory=Trace)
    artifacts: ArtifactStore | None = None
    topics: list[str] = field(default_factory=list)
    details: BaseModel | None = None

    def for_question(self) -> MethodContext:
        """A copy with a fresh trace, topics and details (one per question, so concurrent questions never share
        them)."""
        return replace(self, trace=Trace(), topics=[], details=None)
