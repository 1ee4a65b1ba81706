"""FoG (Foresight-over-Graph), after the paper in ../shared/papers (NeurIPS 2026; arXiv 2610.08388).

Graph side (Sec. 3.1-3.2, :mod:`kgqa.steps.foresight`): a trained foresight triple scorer over a frozen text encoder
scores the incident triples of a layered BFS from the topic entities (hop budget L = 3), keeping s_t > tau_e;
the kept edges are oriented toward the seeds; far-to-near feedback propagation updates node states and every edge is
re-scored; the potential subgraph keeps s_t > tau_p = 0.7.

LLM side (Sec. 3.1, 3.3): one call decomposes the question into standalone sub-questions (they guide the scorer); then
per round one memory-manager call reads the question, the memory subgraph and the potential subgraph and replies
{selected_triplets, predict_answer, subsequent_question}; selected triples are absorbed into memory (and excluded from
later expansion), the potential triples it did not select are masked for good, new sub-questions drive the next round;
at most ``rounds`` rounds and at most ``rounds`` + 1 calls: a re-ask of an unreadable reply counts, and a round
that would exceed the budget is skipped (the trace says so).

Graph mode (``mode=graph``, the default with an offline local model or no model): no LLM at all. The question is the
only sub-question and the answers are read from the re-scored subgraph: the best-scoring path from a topic whose end no
relevant edge leads on from gives the answer pattern (its relations and directions), and every entity that pattern
reaches with a comparable score is an answer, ranked by support (how many such paths reach it) then score. Grounding
is ``structured`` and the evidence is the answers' best paths.

Ablations (the paper's Tables 2-3) are settings: ``propagation=none`` (w/o FFP), ``memory=false`` (w/o MSM: the answer
is read from the graph after the decomposition), ``foresight_expansion=false`` (w/o FSE: plain BFS, every triple kept
within the hub caps, then the scorer), ``propagation=undirected`` (FFP replaced by an undirected GNN).

Where kgqa differs from the paper, and why:

* Encoder: all-MiniLM-L6-v2 (384-d) by default, not Qwen3-Embedding-4B, which no machine here can run; the encoder is
  a setting of training (any registered embedder; ``st:MODEL`` for a sentence-transformers model) and the scorer
  records it, so the method always reads with the encoder it was trained with.
* The scorer sees each triple's BFS layer and walk direction (learned biases on the relation token): MetaQA's chains
  reuse one relation at two depths in opposite directions, which a position-free scorer cannot separate before
  propagation. The paper's triple tokens carry role biases only.
* Orientation: ``orientation=layered`` (default) unrolls the BFS so an entity reached at two depths is two nodes;
  ``orientation=shortest`` is the paper's orientation by shortest distance. The unrolled form keeps 3-hop walks whose
  answers lie nearer the topic (movie -> actor -> other movie -> actor); measured in the FoG notes.
* Hub caps (the paper names none): ``seed_fanout`` neighbours per (entity, relation, direction) at the topic,
  ``fanout`` further out, ``node_fanout`` per node further out over all its relations, ``max_frontier`` nodes per
  layer; the trace counts what each cut.
* Training (``kgqa train fog``): two phases, scorer then propagation (the encoder frozen in the second), with a
  learning rate measured for the 384-d encoder rather than the paper's 1e-5 (docs/fog.md gives the curves).
* The decomposition reply is an object {"sub_questions": [...]} rather than a bare list (JSON modes of real servers
  require an object); the original question is always kept among the sub-questions.
* The memory manager sees at most ``max_potential`` potential triples (the best-scored) so small models get short
  prompts, and when no triple passes tau_p it sees the best-scored expanded triples rather than an empty list; a
  reply that names a triple not in its input has it dropped and counted (``invented``), an answer not
  among the memory's entities likewise. If no round yields an answer, the graph-mode reading of a fresh expansion
  guided by the question alone (nothing absorbed or masked left out, no sub-question) answers (grounding
  ``structured``, the trace says so), where the paper does not say what happens.
* tau_e defaults to 0.02, not the paper's 0.1: our scorer gives ambiguous intermediate edges (an actor's films, when
  only the films with a language lead to the answer) low scores before propagation, and 0.1 cut them before the far
  signal could lift them (MetaQA 3-hop dev, 300 questions, the paper's potential-only reading: Hits@1 91.3 at 0.1,
  92.0 at 0.02; docs/fog.md). tau_p stays 0.7.
* Graph mode is ours (the paper always ends with the LLM). Its reading, chosen on MetaQA dev: every re-scored edge,
  not only the potential subgraph (``answer_from``); a path scored by the geometric mean of its weakest and its last
  edge, not the product (``path_score``: the relation the question ends on is the most specific evidence, while an
  intermediate edge such as an actor's films stays ambiguous even after propagation); paths may pass an entity twice
  but never return to a topic (``simple_paths``: the writer of Kadosh directed the other films he wrote, and MetaQA
  counts him). ``continuation=pattern`` (the default since the third December session; ``path`` before) chooses
  the answer pattern by how much leads on from its walks' ends on average rather than by its best walk: on unseen
  MetaQA dev it is a wash for the recipe's scorer and lifts 3-hop hit by 0.5-0.6 for three other trainings of it whose
  propagation trained less well, so answers depend less on how one training's propagation came out (docs/fog.md).
  Answers of the pattern are ranked by support (walks reaching them), then by ``rank_by_records``: each walk counted
  through the KG's statement counts (:meth:`~kgqa.kg.base.KnowledgeGraph.statement_counts`), so where an import
  merged records (MetaQA's remakes of one title) an answer asserted for more of them ranks first; then by score.
  Stores without counts (SPARQL endpoints) rank as before. The trainer's validation ranks without counts.
* Answer types (ours, ``answer_types=DIR`` from ``kgqa train answer-types``; off without one): the types of the KG's
  (relation, direction) ends are induced from the KG and a linear classifier over the encoder's vector of the
  question (topic masked) predicts which type the question asks for; graph reading multiplies each answer pattern
  by P(type of its end) ** ``answer_type_weight`` (1, chosen on unseen MetaQA dev). Most misses without it stop a hop
  early (the films of "who directed the films X starred in"), which the triple scorer cannot see
  (:mod:`kgqa.methods.fog.answer_types`, docs/fog.md). Models trained since the eleventh session also weigh a
  pattern by P(the type it starts from | question) (``answer_type_topic``: "the movie John Carter", not the director
  of that name) and, at each junction where one hop's end type differs from the type the next hop starts from, by
  the share of that type's entities that go on by the next hop (``answer_type_junctions``: an actor named "Lucy" is
  not the film "Lucy"); both chosen on unseen MetaQA dev and the reworded dev split. A model trained with
  ``--focus-phrase`` reads the question's wh-word and its neighbours beside the sentence (fewer misread types: +2 of
  600 on the reworded dev split; in the recipe since the fourteenth session, docs/fog.md). A model trained with
  ``--fine-tune`` reads the answer type with a fine-tuned copy of the encoder instead of the linear head
  (:mod:`kgqa.methods.fog.type_reader`; the scorer's encoder stays frozen, as the paper's): on the second
  reworded dev split 596 of 600 right against 583 (docs/fog.md, the seventeenth session).
* The typed retry (ours, ``typed_retry``, on when ``answer_types`` is given; graph mode): when the answer pattern
  ends on a type the question almost surely does not ask for (P < ``typed_retry_below``, 0.01), the question is
  expanded once more with the likely types' triples (P >= 0.5) kept below tau_e as last hops, and that graph is read
  if a pattern with the first reading's hops but the last ends on a likely type there (only the last hop is
  re-read). The scorer sometimes cuts the very relation the question ends on (the genre of "Freedom Writers", the
  author of "The Appeared"): a prior over what was kept cannot bring it back.
  ``typed_retry_tau_e`` (off by default) adds a second stage when that finds nothing: the question expanded again
  at that tau_e with the best-scored group kept at every layer that keeps nothing, any pattern ending on a likely type
  read (the scorer cut an inner hop: "The cast of Madison has worked with which directors on other films?" scores
  every triple at Madison below 0.002). Tried on the reworded dev split, +1 of 600; not adopted (docs/fog.md).
* A self-loop at a topic entity (MetaQA merges a film and its subject: "Lemmy starred_actors Lemmy") is expanded,
  walked both ways, like any other triple; the topic is then an answer through it (and through nothing else), and
  walks go on through it ("the actors of the screenwriter Antwone Fisher": his film is himself).
* ``seed_floor`` (ours, on by default): when no triple at the topic entities passes tau_e, the best-scored
  (relation, direction) group there is kept anyway. The paper's expansion then ends empty, and no answer can be right;
  it happens on questions worded unlike the training ones ("Which filmmakers have directed [an actor]?").
* The memory manager selects triples by number (``selection=index``, the default): the candidates are numbered and
  the reply lists numbers, where the paper's model copies each triple (``selection=copy``). Same mechanism, a reply
  of a few tokens per triple instead of about twenty, and no misquoted triples; a number out of range is counted as
  invented. With the 135M local model a copied reply was mostly the prompt's example triples (MetaQA 3-hop, 4
  questions: 0 selected, 2 invented per round).
* Sub-questions (of the decomposition and of each round) are dropped when they have fewer than two words or are
  copied from a prompt's example, and repeats are dropped; the trace lists what was dropped. A decomposition cut off
  by its token budget is read as far as it got (its complete sub-questions) instead of being re-asked: a small model
  that loops on the list fills any budget again.
* An LLM answer is grounding ``synthesis`` (the KG gave the triples, the model picked the answer among them).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.errors import ConfigError, KGError
from kgqa.llm import is_local_spec
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook
from kgqa.llm.structured import Reply
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, Needs
from kgqa.methods.fog.answer_types import AnswerTypes, model_file
from kgqa.methods.fog.reading import READING, GraphReading
from kgqa.methods.fog.trainer import TRAINERS
from kgqa.methods.registry import register_method
from kgqa.steps.answers import answer_items, presentable
from kgqa.steps.foresight.graph import Caps, ExpandedGraph, PatternPrior, RankedAnswer, Triple, pattern_name
from kgqa.steps.foresight.loading import ScorerLoader, check_scorer_dir
from kgqa.steps.reply import BudgetedModel, ask_reply
from kgqa.text import load_embedder

PROMPTS = PromptBook.for_package("kgqa.methods.fog")
#: How a user gets a scorer for a KG that has none (the end of the errors that say so).
HOW_TO_TRAIN = ("train one with `kgqa train fog --dataset NAME --split dev --kg KG --out MODELDIR` and pass "
                "`--method-config scorer=MODELDIR`")
#: an answer type this likely is one the question asks for (the typed retry's trigger and target)
TYPED_RETRY_P = 0.5


@dataclass(frozen=True)
class _Typing:
    """One question's answer-type reading: the model, its P(type) row and the pattern prior made from it."""

    types: AnswerTypes
    probabilities: np.ndarray
    prior: PatternPrior

    def end_p(self, ranked: list[RankedAnswer]) -> float | None:
        """P(type of the answer pattern's end); None when there is no answer or the end is untyped."""
        return self.types.end_probability(self.probabilities, ranked[0].pattern[-1]) if ranked else None

    def retry_prior(self, prefix: tuple[tuple[str, bool], ...] | None) -> PatternPrior:
        """The typed retry's prior: the question's, and 0 for a pattern that does not end on a likely type or (given
        a ``prefix``) does not keep the first reading's hops but the last."""
        def prior(pattern: tuple[tuple[str, bool], ...]) -> float:
            if not pattern or (prefix is not None and pattern[:-1] != prefix):
                return 0.0
            p = self.types.end_probability(self.probabilities, pattern[-1])
            return self.prior(pattern) if p is not None and p >= TYPED_RETRY_P else 0.0

        return prior


class FoGConfig(MethodConfig):
    """FoG's settings: the paper's L = 3 and tau_p = 0.7; tau_e and the graph-mode reading tuned on MetaQA dev."""

    scorer: str | None = Field(default=None, description="directory of a trained scorer (`kgqa train fog --out DIR`); "
                                                         "None: the demo KG's own scorer on the demo KG")
    mode: Literal["auto", "graph", "llm"] = Field(default="auto", description="graph: no LLM, answers read from the "
                                                  "re-scored subgraph; llm: decomposition + memory manager; auto: "
                                                  "graph with a local model or none, llm otherwise")
    hops: int = Field(default=READING.hops, ge=1, le=4, description="hop budget L of the expansion")
    tau_e: float = Field(default=READING.tau_e, ge=0.0, le=1.0, description="expansion threshold (paper: 0.1; 0.02 tuned on "
                                                                   "MetaQA dev, docs/fog.md)")
    tau_p: float = Field(default=READING.tau_p, ge=0.0, le=1.0, description="potential-subgraph threshold")
    rounds: int = Field(default=2, ge=1, le=10, description="memory-manager rounds R (calls <= R + 1)")
    orientation: Literal["layered", "shortest"] = Field(default=READING.orientation, description="layered: the BFS unrolled "
                                                        "(ours); shortest: the paper's shortest-distance orientation")
    propagation: Literal["directed", "undirected", "none"] = Field(
        default="directed", description="directed: far-to-near FFP; undirected: the GNN ablation; none: w/o FFP")
    memory: bool = Field(default=True, description="False: w/o the memory subgraph manager (ablation)")
    foresight_expansion: bool = Field(default=True, description="False: plain BFS within the caps, then the scorer")
    seed_floor: bool = Field(default=READING.seed_floor,
                             description="when no triple at the topics passes tau_e, keep the best-scored relation "
                                         "there anyway (an empty first layer has no answer)")
    seed_fanout: int = Field(default=READING.caps.seed_fanout, ge=1,
                             description="neighbours per (entity, relation, direction) at a topic")
    fanout: int = Field(default=READING.caps.fanout, ge=1,
                        description="neighbours per (entity, relation, direction) further out")
    max_frontier: int = Field(default=READING.caps.max_frontier, ge=1,
                              description="frontier nodes expanded per layer (best-scored first)")
    node_fanout: int = Field(default=READING.caps.node_fanout, ge=1,
                             description="triples one non-topic node contributes in all")
    answer_ratio: float = Field(default=READING.ratio, gt=0.0, le=1.0, description="answers score at least this share of the "
                                                                       "best answer")
    answer_from: Literal["potential", "expanded"] = Field(
        default=READING.within, description="graph mode reads answers from the potential subgraph (s_t > tau_p) or from "
                                         "every re-scored edge of the expanded subgraph")
    path_score: Literal["product", "min", "min_last"] = Field(
        default=READING.combine, description="a path's score: the product of its edges' s_t, its weakest edge, or the "
                                        "geometric mean of its weakest and its last edge")
    simple_paths: bool = Field(default=READING.simple, description="answer paths never revisit an entity (False: only never "
                                                         "return to a topic entity)")
    rank_by_support: bool = Field(default=READING.by_support, description="rank answers by how many paths reach them, then score")
    rank_by_records: bool = Field(
        default=READING.by_records, description="break support's ties by how often the KG's source asserted each "
        "answer's facts (a fact true of both remakes that MetaQA merges into one title outranks one true of one)")
    continuation: Literal["path", "pattern"] = Field(
        default=READING.continuation, description="the answer pattern is the best walk's, each walk penalised by what "
        "leads on from its own end (path), or the pattern whose walks' ends lead on least on average (pattern: steadier "
        "with a weak propagation; docs/fog.md)")
    answer_types: str | None = Field(
        default=None, description="directory of an answer-type model (`kgqa train answer-types --out DIR`): graph "
        "reading weighs each answer pattern by P(its end's type | question) ** answer_type_weight (ours; None: off)")
    answer_type_weight: float = Field(default=1.0, ge=0.0, le=4.0,
                                      description="exponent of the answer-type prior (0: no effect; 1 chosen on "
                                                  "unseen MetaQA dev, docs/fog.md)")
    answer_type_topic: bool = Field(
        default=True, description="with answer_types whose model has a topic head: also weigh each pattern by P(the "
        "type where it starts | question) ** answer_type_weight (\"the movie X\": a film, not a person of that name)")
    answer_type_junctions: bool = Field(
        default=True, description="with answer_types whose model has junctions: also weigh each pattern by the share "
        "of entities that go on from one hop's end type by the next hop, where the two types differ, ** "
        "answer_type_weight (an actor named like a film is not that film)")
    typed_retry: bool = Field(
        default=True, description="with answer_types, graph mode: when the answer pattern ends on a type the question "
        "almost surely does not ask for (P < typed_retry_below), expand again keeping the triples of the likely types "
        f"(P >= {TYPED_RETRY_P}) below tau_e as last hops, and read that graph if a pattern with the same hops but the "
        "last ends on one (ours)")
    typed_retry_tau_e: float | None = Field(
        default=None, ge=0.0, le=1.0, description="with typed_retry: when the retry finds no pattern ending on a likely "
        "type either, expand once more at this tau_e keeping the best-scored group at every layer that "
        "keeps nothing, and read any pattern that ends on a likely type (the scorer cut an inner hop; ours; None: no "
        "second expansion)")
    typed_retry_below: float = Field(
        default=0.01, ge=0.0, le=TYPED_RETRY_P, description="the typed retry's trigger: P(type of the answer pattern's "
        "end) below this (0.01, set on unseen MetaQA dev: at 0.5 the classifier's confident mistakes, P 0.07, "
        "retried right readings into wrong ones; docs/fog.md)")
    max_answers: int = Field(default=100, ge=1, description="answers returned at most")
    max_potential: int = Field(default=30, ge=1, description="potential triples shown to the memory manager")
    max_sub_questions: int = Field(default=3, ge=1, le=8, description="sub-questions asked of the decomposition")
    max_evidence_paths: int = Field(default=20, ge=1, description="answer paths kept as evidence")
    decompose_tokens: int = Field(default=96, ge=16, description="max reply tokens of the decomposition")
    memory_tokens: int | None = Field(default=None, ge=16, description="max reply tokens of a memory-manager round "
                                                                       "(None: index 96 + 4 per triple shown, at most "
                                                                       "400; copy 64 + 20 per triple, at most 800)")
    selection: Literal["index", "copy"] = Field(
        default="index", description="index: candidates are numbered and the memory manager selects them by number "
                                     "(ours); copy: it copies each triple, as the paper")


    @field_validator("scorer")
    @classmethod
    def _scorer_dir(cls, value: str | None) -> str | None:
        return check_scorer_dir(value, what="FoG scorer", how_to_train=HOW_TO_TRAIN)

    @field_validator("answer_types")
    @classmethod
    def _answer_types_dir(cls, value: str | None) -> str | None:
        if value is None or not str(value).strip():
            return None
        try:
            model_file(value)  # a wrong directory is a one-line error before any question; read at the first one
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return str(value)


class SubQuestions(Reply):
    sub_questions: list[str] = Field(min_length=1)


class MemoryReply(Reply):
    selected_triplets: list[str | list[str]]
    predict_answer: list[str] | str
    subsequent_question: list[str] = Field(default_factory=list)


class MemoryIndexReply(Reply):
    """A reply cut off in its list of numbers is read as far as it got, so only the selection is required."""

    selected_triplets: list[int | str]
    predict_answer: list[str] | str = Field(default_factory=list)
    subsequent_question: list[str] = Field(default_factory=list)


def _spent(budget: int) -> LLMError:
    return LLMError(f"FoG's call budget is spent ({budget} calls = rounds + 1)")


@register_method("fog")
class FoG(KGQAMethod):
    """FoG with its trained foresight scorer (see the module docstring)."""

    name = "fog"
    summary = "Foresight-over-Graph: trained foresight triple scorer, far-to-near feedback propagation, LLM memory subgraph"
    Config: ClassVar[type[MethodConfig]] = FoGConfig
    trainers = TRAINERS
    config: FoGConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self._loader = ScorerLoader(self.config.scorer, method="fog", how_to_train=HOW_TO_TRAIN)
        self._types: tuple[AnswerTypes, Any] | None = None
        cfg = self.config
        self.reading = GraphReading(
            hops=cfg.hops, tau_e=cfg.tau_e, tau_p=cfg.tau_p, orientation=cfg.orientation,
            caps=Caps(seed_fanout=cfg.seed_fanout, fanout=cfg.fanout, max_frontier=cfg.max_frontier,
                      node_fanout=cfg.node_fanout),
            seed_floor=cfg.seed_floor, ratio=cfg.answer_ratio, within=cfg.answer_from, combine=cfg.path_score,
            simple=cfg.simple_paths, by_support=cfg.rank_by_support, continuation=cfg.continuation,
            by_records=cfg.rank_by_records)

    # -- the contract ----------------------------------------------------------------------------------------------

    def uses_llm(self, llm: str | None) -> bool:
        if self.config.mode == "auto":
            return bool(llm) and not is_local_spec(llm)
        return self.config.mode == "llm"

    def needs(self, llm: str | None = None) -> Needs:
        return Needs(kg=True, llm=self.uses_llm(llm), embedder=False, artifacts=("label-embeddings",))

    def explain(self, prediction: Prediction) -> Explanation:
        """The expansion and propagation numbers, the memory rounds, the answer pattern and the evidence path."""
        events = {e.get("step"): e for e in prediction.trace}
        rounds = [e for e in prediction.trace if e.get("step") == "fog.memory"]
        expansions = [e for e in prediction.trace if e.get("step") == "fog.expand"]
        answer = events.get("fog.answer", {})
        lines = []
        for e in expansions:
            cut = ", ".join(f"{k} {v}" for k, v in sorted((e.get("cut") or {}).items())) or "nothing"
            lines.append(f"expansion (round {e.get('round')}): {e.get('scored')} triples scored, {e.get('kept')} kept "
                         f"over {e.get('layers')} layers, {e.get('potential')} in the potential subgraph; cut: {cut}")
        for e in rounds:
            lines.append(f"memory round {e.get('round')}: {e.get('shown')} shown, {e.get('selected')} selected, "
                         f"{e.get('invented')} invented, answers {e.get('answers') or '-'}"
                         + (f", next: {e.get('next')}" if e.get("next") else ""))
        typed = events.get("fog.answer_types")
        if typed:
            odds = typed.get("p") or {}
            lines.append(f"answer type: {typed.get('best')} (p {odds.get(typed.get('best'), float('nan')):.2f}; "
                         "weighs each answer pattern by its end's type)")
            if typed.get("focus"):
                lines.append(f"focus phrase: \"{typed['focus']}\" (read beside the whole question)")
            if typed.get("topic"):
                topic_odds = typed.get("topic_p") or {}
                lines.append(f"topic type: {typed['topic']} (p {topic_odds.get(typed['topic'], float('nan')):.2f}; "
                             "weighs each answer pattern by the type it starts from)")
        retry = events.get("fog.typed_retry")
        if retry:
            lines.append(f"typed retry: {retry.get('before') or 'no answer'} (p {retry.get('p_before')}) -> "
                         f"{retry.get('after') or 'no answer'} (p {retry.get('p_after')}), "
                         + ("read" if retry.get("used") else "not read: the first reading stands"))
        if answer.get("pattern"):
            lines.append(f"answer pattern: {answer['pattern']} ({answer.get('source')})")
        for path in (answer.get("paths") or [])[:3]:
            lines.append("evidence path: " + path)
        if answer.get("fallback"):
            lines.append(f"fallback: {answer['fallback']}")
        fields = {"mode": answer.get("mode"), "pattern": answer.get("pattern"), "paths": answer.get("paths"),
                  "rounds": len(rounds), "source": answer.get("source"), "answer_type": typed.get("best") if typed
                  else None, "topic_type": typed.get("topic") if typed else None,
                  "typed_retry": retry.get("used") if retry else None}
        return Explanation(fields=fields, lines=lines)

    # -- loading ---------------------------------------------------------------------------------------------------

    def _load(self, ctx: MethodContext) -> tuple[Any, Any]:
        return self._loader.get(ctx)

    # -- one question ----------------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        trace = ctx.trace
        topics = [t.id for t in question.topic_entities]
        try:
            present = [t for t in topics if ctx.kg.has_entity(t)]
        except KGError as exc:
            trace.add("start", method=self.name, error=f"{type(exc).__name__}: {exc}")
            return Prediction(error=f"the KG failed while checking the topics: {exc}")
        trace.add("start", method=self.name, topics=present, missing_topics=[t for t in topics if t not in present])
        if not present:
            return Prediction(error="no topic entity of the question is in the KG")
        scorer, labels = self._load(ctx)
        if ctx.llm is None or not self.uses_llm(getattr(ctx.llm, "name", None) or "remote"):
            graph = self._expand(question.text, [question.text], present, scorer, labels, ctx, round_=1, skip=set())
            typing = self._answer_typing(question, labels, ctx)
            prior = typing.prior if typing else None
            ranked = self._rank(graph, ctx, prior)
            if typing is not None and self.config.typed_retry:
                graph, ranked = self._typed_retry(question, present, scorer, labels, ctx, typing, graph, ranked)
            return self._graph_answer(graph, ctx, source="graph mode", prior=prior, ranked=ranked)
        return self._with_llm(question, present, scorer, labels, ctx)

    def _typed_retry(self, question: Question, seeds: list[str], scorer: Any, labels: Any, ctx: MethodContext,
                     typing: _Typing, graph: ExpandedGraph, ranked: list[RankedAnswer]
                     ) -> tuple[ExpandedGraph, list[RankedAnswer]]:
        """When the answer pattern ends on a type the question almost surely does not ask for (or there is no
        answer), expand once more with the likely types' triples kept below tau_e as last hops
        (:func:`~kgqa.steps.foresight.graph.expand`'s ``typed_ends``), read it with only the patterns that keep
        the first reading's hops but the last and end on a likely type, and keep that reading if there is one. The
        scorer can cut the relation the question ends on outright (MetaQA: "the genre of Freedom Writers" scores
        has_genre 0.0000 and keeps written_by), which no prior over the kept patterns can undo. Only the last hop is
        re-read: a retry free to walk on past a right answer turned "We're No Angels was helmed by whom?" (directed_by,
        right; the classifier, wrongly, sure of films) into the films its directors wrote."""
        before = typing.end_p(ranked)
        likely = typing.types.likely_ends(typing.probabilities, TYPED_RETRY_P)
        if (ranked and (before is None or before >= self.config.typed_retry_below)) or not likely:
            return graph, ranked

        def attempt(prior: PatternPrior, **expansion: Any) -> tuple[ExpandedGraph, list[RankedAnswer], bool]:
            """Expand again with the likely types kept and read with ``prior``; used unless it ruled out every
            pattern there."""
            again = self._expand(question.text, [question.text], seeds, scorer, labels, ctx, round_=1, skip=set(),
                                 typed_ends=likely, **expansion)
            read = self._rank(again, ctx, prior)
            return again, read, bool(read) and prior(read[0].pattern) > 0

        retry, retried, used = attempt(typing.retry_prior(ranked[0].pattern[:-1] if ranked else None))
        deep: dict[str, Any] = {}
        tau_e = self.config.typed_retry_tau_e
        if not used and tau_e is not None:
            # the scorer may have cut an inner hop, not the last: expand again with a floor at every layer and read
            # any pattern ending on a likely type
            retry, retried, used = attempt(typing.retry_prior(None), tau_e=tau_e, floor_every_layer=True)
            deep = {"deep_tau_e": tau_e}
        after = typing.end_p(retried)
        ctx.trace.add("fog.typed_retry", used=used,
                      before=pattern_name(ranked[0].pattern) if ranked else None,
                      p_before=None if before is None else round(before, 4),
                      after=pattern_name(retried[0].pattern) if retried else None,
                      p_after=None if after is None else round(after, 4), **deep)
        return (retry, retried) if used else (graph, ranked)

    def _expand(self, question: str, sub_questions: list[str], seeds: list[str], scorer: Any, labels: Any,
                ctx: MethodContext, *, round_: int, skip: set[Triple],
                typed_ends: Collection[tuple[str, bool]] = (), tau_e: float | None = None,
                floor_every_layer: bool = False) -> ExpandedGraph:
        cfg = self.config
        started = time.perf_counter()
        texts = list(dict.fromkeys([question, *sub_questions]))
        vectors = scorer.questions(labels, texts)
        graph = self.reading.expand(ctx.kg, seeds, scorer.scorer_for(labels, vectors), skip=skip,
                                    filter_scores=cfg.foresight_expansion, typed_ends=typed_ends, tau_e=tau_e,
                                    floor_every_layer=floor_every_layer)
        expanded = time.perf_counter() - started
        if cfg.propagation != "none":
            scorer.propagate(graph, undirected=cfg.propagation == "undirected")
        potential = sum(1 for s in graph.scores if s > cfg.tau_p)
        ctx.trace.add("fog.expand", round=round_, typed=bool(typed_ends), sub_questions=texts, scored=graph.scored,
                      kept=len(graph), nodes=len(graph.node_entity), layers=max(graph.layers, default=0), cut=dict(graph.cut),
                      potential=potential, propagation=cfg.propagation, expand_s=round(expanded, 4),
                      total_s=round(time.perf_counter() - started, 4), **({} if tau_e is None else {"tau_e": tau_e}))
        return graph

    def _answer_prior(self, question: Question, labels: Any, ctx: MethodContext) -> PatternPrior | None:
        """The answer-type prior of this question (``answer_types``), or None; the trace records the types' odds."""
        typing = self._answer_typing(question, labels, ctx)
        return typing.prior if typing else None

    def _answer_typing(self, question: Question, labels: Any, ctx: MethodContext) -> _Typing | None:
        cfg = self.config
        if cfg.answer_types is None or cfg.answer_type_weight == 0:
            return None
        types, embedder = self._answer_types(labels.embedder)
        mentions = [t.name for t in question.topic_entities if t.name]
        answer_rows, topic_rows = types.read(embedder, [question.text], [mentions])
        probabilities = answer_rows[0]
        topic = topic_rows[0] if topic_rows is not None and cfg.answer_type_topic else None
        extra: dict[str, Any] = {}
        focus = types.focus(question.text, mentions)
        if focus is not None:
            extra["focus"] = focus
        if topic is not None and types.topic_classes is not None:
            extra["topic"] = types.topic_classes[int(topic.argmax())]
            extra["topic_p"] = {c: round(float(p), 4) for c, p in zip(types.topic_classes, topic, strict=True)}
        if types.reader is not None:
            extra["reader"] = True  # the answer type read by the fine-tuned encoder, not the answer head
        ctx.trace.add("fog.answer_types", best=types.classes[int(probabilities.argmax())],
                      p={c: round(float(p), 4) for c, p in zip(types.classes, probabilities, strict=True)},
                      junctions=bool(types.junctions) and cfg.answer_type_junctions, **extra)
        return _Typing(types, probabilities, types.prior(probabilities, cfg.answer_type_weight, topic=topic,
                                                         junctions=cfg.answer_type_junctions))

    def _rank(self, graph: ExpandedGraph, ctx: MethodContext, prior: PatternPrior | None) -> list[RankedAnswer]:
        ranked, _ = self.reading.rank(graph, answerable=lambda ids: set(presentable(ctx.kg, ids)),
                                      pattern_prior=prior, statement_counts=ctx.kg.statement_counts)
        return ranked

    def _answer_types(self, scorer_embedder: Any) -> tuple[AnswerTypes, Any]:
        """The answer-type model and the embedder it reads with (the scorer's when it is the same one), loaded
        once."""
        if self._types is None:
            types = AnswerTypes.load(str(self.config.answer_types))
            same = getattr(scorer_embedder, "name", None) == types.embedder_name
            self._types = (types, scorer_embedder if same else load_embedder(types.encoder))
        return self._types

    def _graph_answer(self, graph: ExpandedGraph, ctx: MethodContext, *, source: str,
                      fallback: str | None = None, prior: PatternPrior | None = None,
                      ranked: list[RankedAnswer] | None = None) -> Prediction:
        cfg = self.config
        if ranked is None:
            ranked = self._rank(graph, ctx, prior)
        potential = sum(1 for s in graph.scores if s > self.reading.tau_p)
        ids = [a.entity for a in ranked]
        items = answer_items(ctx.kg, ids, limit=cfg.max_answers)
        evidence: list[list[str]] = []
        paths: list[str] = []
        names = ctx.kg.names(list({x for a in ranked[:cfg.max_evidence_paths] for e in a.path.edges
                                   for x in (graph.triples[e][0], graph.triples[e][2])}))
        for answer in ranked[:cfg.max_evidence_paths]:
            steps = []
            for e in answer.path.edges:
                triple = list(graph.triples[e])
                if triple not in evidence:
                    evidence.append(triple)
                h, r, t = graph.triples[e]
                steps.append(f"({names.get(h) or h}, {r}, {names.get(t) or t}) s={graph.scores[e]:.2f}")
            paths.append(" -> ".join(steps))
        pattern = pattern_name(ranked[0].pattern) if ranked else None
        ctx.trace.add("fog.answer", mode="graph", source=source, answers=[i.name for i in items][:20],
                      pattern=pattern, potential=potential, paths=paths[:5], fallback=fallback,
                      scores=[round(a.score, 4) for a in ranked[:10]], support=[a.support for a in ranked[:10]],
                      records=[a.records for a in ranked[:10]],
                      reason=None if items else "no path from a topic ends at a named entity or a value")
        if not items:  # nothing the KG supports: no answer, and no grounding credit for it
            return Prediction(grounding=Grounding.PARAMETRIC, evidence=evidence)
        return Prediction(answers=items, grounding=Grounding.STRUCTURED, evidence=evidence)

    # -- with the LLM: decomposition and memory rounds --------------------------------------------------------------

    def _with_llm(self, question: Question, seeds: list[str], scorer: Any, labels: Any, ctx: MethodContext) -> Prediction:
        cfg = self.config
        budget = cfg.rounds + 1
        llm = BudgetedModel(ctx.llm, budget, _spent)
        sub_questions = [question.text]
        try:
            reply = ask_reply(llm, PROMPTS, "decompose", SubQuestions, step="fog.decompose",
                              max_tokens=cfg.decompose_tokens, question=question.text,
                              max_sub_questions=cfg.max_sub_questions)
        except LLMError as exc:
            reply = None
            ctx.trace.add("fog.decompose", ok=False, failure=f"{type(exc).__name__}: {exc}")
        if reply is not None:
            dropped: list[str] = []
            if reply.ok and reply.value is not None:
                kept, dropped = _usable_questions(reply.value.sub_questions, cfg.max_sub_questions)
                sub_questions = kept or sub_questions
            ctx.trace.add("fog.decompose", ok=reply.ok, sub_questions=sub_questions, dropped=dropped,
                          failure=reply.failure)
        memory: list[Triple] = []
        rejected: set[Triple] = set()
        for round_ in range(1, cfg.rounds + 1):
            # absorbed triples stay walkable (the walk goes on through them) but are not shown again; rejected ones
            # are masked for good
            graph = self._expand(question.text, sub_questions, seeds, scorer, labels, ctx, round_=round_,
                                 skip=rejected)
            if not cfg.memory:
                return self._graph_answer(graph, ctx, source="w/o memory manager: read from the graph",
                                          prior=self._answer_prior(question, labels, ctx))
            if llm.calls >= budget:
                ctx.trace.add("fog.memory", round=round_, ok=False, skipped=True,
                              failure=f"call budget spent ({llm.calls} of rounds + 1 = {budget}, re-asks included)")
                break
            shown = _potential(graph, cfg.tau_p, cfg.max_potential, exclude=set(memory))
            display = _display(ctx.kg, memory + shown)
            by_index = cfg.selection == "index"
            try:
                if by_index:
                    budget_tokens = cfg.memory_tokens or min(400, 96 + 4 * len(shown))
                    candidates = "\n".join(f"{i}. {display[t]}" for i, t in enumerate(shown, 1))
                else:
                    budget_tokens = cfg.memory_tokens or min(800, 64 + 20 * len(shown))
                    candidates = "\n".join(display[t] for t in shown)
                step = ask_reply(llm, PROMPTS, "memory_index" if by_index else "memory",
                                 MemoryIndexReply if by_index else MemoryReply, step="fog.memory",
                                 max_tokens=budget_tokens, question=question.text,
                                 memory="\n".join(display[t] for t in memory) or "(none)",
                                 candidates=candidates or "(none)")
            except LLMError as exc:
                ctx.trace.add("fog.memory", round=round_, ok=False, failure=f"{type(exc).__name__}: {exc}")
                break
            if not step.ok or step.value is None:
                ctx.trace.add("fog.memory", round=round_, ok=False, shown=len(shown), failure=step.failure)
                continue
            value = step.value
            by_text = {_norm(display[t]): t for t in memory + shown}
            selected, invented = [], 0
            for item in value.selected_triplets:
                number = item if isinstance(item, int) else int(item) if (
                    isinstance(item, str) and item.strip().isdigit()) else None
                if number is not None:  # selected by its number (selection=index); out of range counts as invented
                    triple = shown[number - 1] if 1 <= number <= len(shown) else None
                else:
                    text = item if isinstance(item, str) else "(" + ", ".join(item) + ")"
                    triple = by_text.get(_norm(text))
                if triple is None:
                    invented += 1
                elif triple not in memory and triple not in selected:
                    selected.append(triple)
            memory.extend(t for t in selected if t in shown)
            rejected.update(t for t in shown if t not in selected)
            names = ctx.kg.names(list({x for t in memory for x in (t[0], t[2])}))
            entity_by_name: dict[str, str] = {}
            for t in memory:
                for node in (t[0], t[2]):
                    entity_by_name.setdefault(_norm(names.get(node) or node), node)
            raw_answers = [value.predict_answer] if isinstance(value.predict_answer, str) else value.predict_answer
            answers = [entity_by_name[_norm(a)] for a in raw_answers if a.strip() and _norm(a) in entity_by_name]
            answers = [a for a in dict.fromkeys(answers) if a not in seeds]
            invalid = [a for a in raw_answers if a.strip() and _norm(a) not in entity_by_name]
            next_questions, _ = _usable_questions(value.subsequent_question, 3)
            ctx.trace.add("fog.memory", round=round_, ok=True, shown=len(shown), selected=len(selected),
                          invented=invented, memory=len(memory), rejected=len(rejected),
                          answers=[names.get(a) or a for a in answers], invalid_answers=invalid, next=next_questions)
            if answers:
                items = answer_items(ctx.kg, answers, limit=cfg.max_answers)
                ctx.trace.add("fog.answer", mode="llm", source=f"memory manager, round {round_}",
                              answers=[i.name for i in items], pattern=None,
                              paths=[display[t] for t in memory][:5], fallback=None)
                return Prediction(answers=items, grounding=Grounding.SYNTHESIS, evidence=[list(t) for t in memory])
            if next_questions:
                sub_questions = next_questions
        # graph mode's own reading: a fresh expansion guided by the question alone (the rounds' graphs left out what
        # memory absorbed or masked, and a small model's sub-questions can steer the scorer off the question)
        graph = self._expand(question.text, [question.text], seeds, scorer, labels, ctx, round_=cfg.rounds + 1,
                             skip=set())
        return self._graph_answer(graph, ctx, source="graph reading after the memory rounds",
                                  prior=self._answer_prior(question, labels, ctx),
                                  fallback=f"no answer from the memory manager in {cfg.rounds} rounds "
                                           f"({llm.calls} calls)")


def _potential(graph: ExpandedGraph, tau_p: float, limit: int, exclude: set[Triple] | frozenset[Triple] = frozenset()
               ) -> list[Triple]:
    """The best-scored potential triples (s_t > tau_p) not already in memory, at most ``limit``; when none passes
    tau_p, the best-scored expanded triples, so a round never asks about an empty subgraph."""
    order = sorted((e for e in range(len(graph)) if graph.triples[e] not in exclude), key=lambda e: -graph.scores[e])
    passing = [e for e in order if graph.scores[e] > tau_p] or order
    shown: list[Triple] = []
    for e in passing:
        if len(shown) >= limit:
            break
        if graph.triples[e] not in shown:
            shown.append(graph.triples[e])
    return shown


@functools.cache
def _example_text() -> str:
    """Every prompt's own text (examples included), normalised: a sub-question found in it is an echo, not a question."""
    texts = [m["content"] for name in ("decompose", "memory", "memory_index")
             for m in PROMPTS.messages(name, question="", memory="", candidates="", max_sub_questions=3)]
    return _norm(" ".join(texts))



def _usable_questions(texts: list[str], limit: int) -> tuple[list[str], list[str]]:
    """(kept, dropped): sub-questions with at least two words that are not copied from a prompt's example or
    placeholders ("..."), each once, at most ``limit``. Small models echo the example and repeat themselves; an echoed
    sub-question steers the scorer toward the example's relations."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for text in texts:
        text = text.strip()
        norm = _norm(text)
        words = [w for w in norm.split() if any(c.isalpha() for c in w)]
        if len(words) < 2 or norm in _example_text():
            dropped.append(text)
        elif norm not in seen and len(kept) < limit:
            seen.add(norm)
            kept.append(text)
    return kept, dropped


def _display(kg: Any, triples: list[Triple]) -> dict[Triple, str]:
    names = kg.names(list({x for t in triples for x in (t[0], t[2])}))
    return {t: f"({names.get(t[0]) or t[0]}, {t[1]}, {names.get(t[2]) or t[2]})" for t in triples}


def _norm(text: str) -> str:
    return " ".join(text.strip().strip("\"'").lower().replace("(", " ").replace(")", " ").replace(",", " , ").split())
