# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""``chains``: CCoR's relation chains steered by FoG's trained foresight scorer, each hop checked as VoG checks a step.

No paper has this method (issue 18). It is built from shared parts and imports no other method:

* **Graph side first.** One foresight expansion per question (:func:`kgqa.steps.foresight.graph.expand`, hop budget the
  chain depth, tau_e) and far-to-near feedback propagation (:meth:`ForesightScorer.propagate`): every triple within
  reach of the topic entities gets a score that has seen past its own hop.
* **Relation pruning at the chain end** by the scorer (:class:`kgqa.methods.chains.steering.ForesightPruner`): a
  candidate relation is followed only if the scorer kept one of the triples it opens (above ``min_hop_score``), and
  candidates are ranked by the best reading the chain extended by them reaches within the depth (below), so the
  scorer's foresight decides which branch is tried first; the top k go on CCoR's memory stack
  (:class:`kgqa.steps.explore.RelationExplorer`). ``steering=llm`` uses CCoR's pruner instead (``pruner``).
* **FoG's reading steers first.** FoG's graph-mode reading of the whole subgraph (the relation pattern of its best
  answer path, :func:`kgqa.steps.foresight.graph.rank_answers`) is the chain tried first: the pruner puts the hop
  that continues it on top of the stack, and the judge goes forward along it and finishes at its end, unless a hop
  fails verification; every other chain is judged by the rule below. The answers of a finished chain are ordered as
  FoG orders its answers (the best path along the chain to each). With an answer-type model (``answer_types``, or
  the one a scorer directory carries in ``answer_types/``, as the demo scorer does) the reading weighs each pattern
  by P(the type of its end | question) ** ``answer_type_weight``, as FoG's graph mode does: "When was Inception
  released?" then starts on the release date, not the producers (the first-use benchmark's tuning sets: 15 of 32
  without the prior, 20 with it; issue 52's closing note). When the pattern still ends on a type the question
  is not likely to ask for (P < ``typed_retry_below``, 0.5: no likely type), a typed retry expands again keeping the
  likely types' triples below tau_e and steers by a pattern that keeps the first one's hops but the last and ends on
  a likely type, one hop further at most (FoG's typed retry, which only replaces the last hop); with
  ``typed_retry_bridges`` it also keeps the triples of the ends that commonly lead on to a likely one (the films
  before their directors), so "Who directed the films Harrison Ford starred in?" reaches the directors through the
  films the scorer cut. The hops kept for their type are not re-verified by the scorer that cut them, nor is a hop
  kept by the seed floor as the only way on ("What films did Cillian Murphy act in?" ends on the films, not the
  characters; "Who won the Oscar for Best Supporting Actor in 2010?" goes through the award's CVTs). Chosen on the
  first-use benchmark's tuning sets (32 questions, issue 52's closing note): 23 right before, 26 with the bridges,
  the floored-hop rule, the trigger at 0.5 and the demo prior's focus reading.
* **Forward / stop by the scorer** (``judge=scorer``). A chain is read as FoG reads a path, at the level of relations:
  its *value* is the geometric mean of its weakest and its last hop's best propagated triple, times 1 - the best
  triple leading on from its typical end (the median over the entities it reached; an entity a relevant triple leads
  on from is an intermediate, not an answer). The rule:

  - the chain arrived by no supported triple (<= ``min_hop_score``): Backtrack;
  - the hop fails its verification (below): Backtrack;
  - some extension of the chain within the depth has a higher value: Forward;
  - otherwise the chain is finished.

  This is not the issue's example rule ("stop when the best incoming triple scores above tau_p and no outgoing
  relation scores higher"), which we measured first: after propagation both numbers sit near 1.0 on MetaQA, so it
  stopped many chains one hop early (MetaQA dev, 100 seeded questions per hop, walking back on: Hits@1 88 / 74 on
  2 / 3 hops with it; the closing note of issue 18 has the commands and the figures of this rule). A finished chain
  is Stop, or Constraint when the question has a second topic entity in the KG or names a year or an ordering
  ("first", "before", "the largest", ...): the scorer cannot check a constraint, so CCoR's constraint chain (LLM)
  takes over. ``judge=llm`` uses CCoR's LLM judge.
* **Walking back.** Unlike CCoR's relation search, the main chain may walk back along its last relation to the
  siblings of where it stands (MetaQA's "films that share actors with X": film -> actors -> their films), and its
  candidates never pass back through a topic entity (FoG's paths never return to a topic), so X is not among the
  films that share actors with X.
* **Verification after each hop**, as VoG checks each step of its plan against what the KG shows: the hop's best
  triples are re-scored against the question's current sub-goal alone, with no propagation, so nothing beyond the
  hop can lift them; below ``verify_threshold`` the hop does not show what its sub-goal predicts and the chain
  backtracks through the memory stack. Sub-goals come from one decomposition call (``decompose``; ``auto``: only with
  a remote model, since a 135M model's sub-goals are noise), else the question is every hop's sub-goal.
* **CCoR's constraint chain and fallbacks** (:class:`kgqa.methods.chain_body.ChainMethod`): constraint
  sub-question, constraint chain, Global Entity Filtering, direct generation; the last only with a remote model
  (``direct_generation=auto``): the 135M local model's answers from memory were invented names ("2010; Bong Joon-ho;
  Saoirse Ronan" for an Oscar it could not find), which a new user reads as answers.
* **At most ``max_calls`` LLM calls** (3; re-asks count). When the budget is spent during the constraint chain, the
  main chain's candidates are the answer (the trace says the constraint was not checked); direct generation is then
  skipped rather than over budget.

Where it stands against its parts: relation choice and stopping are trained, not prompted, so a small model does the
least; the answers are those of a relation chain executed on the KG, so they are traceable like CCoR's. The scorer
must be trained for the KG (``kgqa train fog``; the demo KG has its own).

``chains`` is kgqa's own method, so in its fidelity table "paper" is the method each part comes from (CCoR, FoG, VoG)
and "departs" says where ``chains`` uses that part otherwise.

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| relation search | CCoR: the relations leaving the chain's end | same; the chain may always walk back along its last relation (`walk_back=always`) and never passes back through a topic | yes: MetaQA's "films that share actors with X" walks back; X is not its own answer |
| graph side | FoG: one foresight expansion, far-to-near propagation | same, the chain depth as hop budget, FoG's tau_e 0.02, tau_p 0.7 and hub caps | no |
| relation pruning | CCoR: the LLM keeps its top k = 3 | the trained scorer: a relation is followed only if a triple it opens was kept (> `min_hop_score`), ranked by the best reading within the depth; top 3 on CCoR's stack (`steering=llm` is CCoR's) | yes: trained, not prompted, so a small model does the least |
| first chain tried | FoG: graph mode's answer pattern (kgqa's reading) | that pattern, weighed by the answer-type prior when one is given or the scorer carries one (`answer_types`, `answer_type_weight`), goes on top of the stack and the judge follows it to its end unless a hop fails verification; a pattern ending on a type that is not likely is read again with the likely types kept (`typed_retry`, one hop further at most; `typed_retry_bridges` keeps the ends that lead on to a likely type too) | yes: the scorer's foresight picks the branch first tried; the answer types and the typed retry are kgqa's (FoG's graph mode has them too) |
| forward / stop | CCoR: the LLM's two hierarchical questions | the scorer's rule: a chain's value (weakest and last hop, discounted by what leads on) against its extensions (`judge=llm` is CCoR's) | yes: the rule the issue proposed stopped many chains a hop early on MetaQA |
| hop verification | VoG: each step checked against what the KG shows | the hop's best triples re-scored against its sub-goal alone, no propagation; below `verify_threshold` (0.02) the chain backtracks | yes: the scorer checks, not an LLM |
| sub-goals | FoG: the LLM decomposes the question | one decomposition call with a remote model (`decompose=auto`), else the question is every hop's sub-goal | yes: a 135M model's sub-goals are noise |
| constraints | CCoR: the LLM's Constraint action starts a constraint chain | a finished chain is Constraint when the question has a second topic or names a year or an ordering; the graph first keeps candidates whose path touches them (`mention_constraint`; at a nameless mediator on the path when one is linked: the year of an award honour, not the film's release), then CCoR's constraint chain | yes: the scorer cannot see a constraint |
| fallbacks | CCoR: Global Entity Filtering, then direct generation | same; direct generation only with a remote model (`direct_generation=auto`) | yes: a local model's remembered answers are invented names |
| call budget | CCoR: none stated | at most `max_calls` (3), re-asks included; spent in the constraint chain, the main chain's candidates answer | yes: kgqa's bound, so the cost per question is known |
| answer order | CCoR: a set | ordered as FoG orders its answers (the best path along the chain to each) | yes: Hits@1 reads the first answer |
| judgement replies | CCoR: the judge reasons, then gives the verdict | same reply models as CCoR, the reason first | no |
| prompts | CCoR: at most five in-context examples | shorter prompts, 3 worked examples each, written for kgqa | no |
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Collection
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.kg.base import Chain, ChainResult, Direction, Hop, format_chain, is_literal, literal_value
from kgqa.llm import is_local_spec
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply
from kgqa.methods.base import Explanation, MethodConfig, Needs
from kgqa.methods.chain_body import ChainDetails, ChainMethod, CoRConfig, chain_signatures
from kgqa.methods.chains.steering import ChainSteering, ForesightPruner, verify_hop
from kgqa.methods.registry import register_method
from kgqa.steps.answers import presentable
from kgqa.steps.explore import Action, Judgement
from kgqa.steps.foresight.answer_types import LIKELY_TYPE, QuestionTyping, bundled_model, check_answer_types_dir
from kgqa.steps.foresight.graph import Caps, expand, rank_answers
from kgqa.steps.foresight.loading import ScorerLoader, check_scorer_dir, load_answer_types
from kgqa.steps.losses import note_answer_cap
from kgqa.steps.pruning import PruningConfig, pruner_needs_embedder, resolve_pruner
from kgqa.steps.relations import reached_view
from kgqa.steps.reply import BudgetedModel, ask_reply
from kgqa.steps.walks import WalkBack, walk_back_field

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

PROMPTS = PromptBook.for_package("kgqa.methods.chains")
#: How a user gets a scorer for a KG that has none (the end of the errors that say so).
HOW_TO_TRAIN = ("train one with `kgqa train fog --dataset NAME --split dev --kg KG --out MODELDIR` (a KG with no "
                "labelled questions: `kgqa train fog --synthetic --kg KG --out MODELDIR`) and pass "
                "`--method-config scorer=MODELDIR`")
#: Words of a question that ask for a constraint the scorer cannot check (a year, an ordering, a comparison).
#: A year or number written in the question (a constraint value the graph can check without the LLM).
_NUMBER_MENTION = re.compile(r"\b\d{4}\b")
_CONSTRAINT_CUE = re.compile(r"\b(1[5-9]\d\d|20\d\d|first|last|latest|earliest|oldest|youngest|largest|biggest|"
                             r"smallest|highest|lowest|most|least|before|after|during|since|until)\b", re.I)


class SubGoals(Reply):
    sub_questions: list[str] = Field(min_length=1)


def _oracle_sub_goals(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's decomposition: the question is its own sub-goal."""
    return {"sub_questions": [str(ask.inputs["question"])]}


DECOMPOSE = Signature(PROMPTS, "decompose", SubGoals, "chains.decompose", _oracle_sub_goals)


class HopReading(BaseModel):
    """The scorer's reading of one judged main-chain hop, its verification against the hop's sub-goal, and the
    judgement."""

    chain: str
    arrival: float
    onward: float
    per_hop: list[float] = Field(default_factory=list)
    verified: float | None = None
    sub_goal: str | None = None
    action: str = ""


class ChainsDetails(ChainDetails):
    hops: list[HopReading] = Field(default_factory=list)


class ChainsConfig(CoRConfig):
    """The composite's settings: CCoR's (top-k 3, depth), FoG's expansion (tau_e 0.02, tau_p 0.7, hub caps) and ours."""

    constraint_chain: bool = Field(default=True, description="False: constraints by Global Entity Filtering (as CoR)")
    # MetaQA's "share actors with" walks movie -> actor -> the actor's other movies: back along the same relation, and
    # FoG's paths walk back on any KG.
    walk_back: WalkBack = walk_back_field("always")
    scorer: str | None = Field(default=None, description="directory of a trained foresight scorer (`kgqa train fog`); "
                                                         "None: the demo KG's own scorer on the demo KG")
    steering: Literal["scorer", "llm"] = Field(default="scorer", description="relation pruning of the main chain: the "
                                               "trained scorer, or CCoR's pruner (`pruner`)")
    judge: Literal["scorer", "llm"] = Field(default="scorer", description="forward/stop judgement of the main chain: "
                                            "the scorer's rule, or CCoR's LLM judge")
    verify: bool = Field(default=True, description="check each hop against the current sub-goal (backtrack on a "
                                                   "mismatch)")
    verify_threshold: float = Field(default=0.02, ge=0.0, le=1.0, description="a hop whose best triples score below "
                                    "this against its sub-goal is a mismatch (default: tau_e, what the expansion keeps)")
    decompose: Literal["auto", "on", "off"] = Field(default="auto", description="sub-goals from one LLM call; auto: on "
                                                    "with a remote model, off with a local one")
    max_sub_questions: int = Field(default=3, ge=1, le=6, description="sub-goals asked of the decomposition")
    tau_e: float = Field(default=0.02, ge=0.0, le=1.0, description="expansion threshold (FoG's, tuned on MetaQA dev)")
    tau_p: float = Field(default=0.7, ge=0.0, le=1.0, description="FoG's potential threshold")
    min_hop_score: float = Field(default=0.0, ge=0.0, le=1.0, description="relations and hops scoring at most this "
                                 "are never followed (default: anything the expansion kept above tau_e)")
    constraint_cues: bool = Field(default=True, description="a finished chain is Constraint when the question has a "
                                                            "second topic or a year/ordering word")
    max_calls: int = Field(default=3, ge=1, description="LLM calls per question at most (re-asks count)")
    mention_constraint: bool = Field(default=True, description="check a constraint on the graph first: keep the "
                                     "candidates whose path touches another topic entity or a year the question names")
    max_mention_paths: int = Field(default=500, ge=1, description="chain paths (and their entities) the graph-side "
                                                                 "constraint check reads")
    seed_fanout: int = Field(default=2000, ge=1, description="expansion: neighbours per (entity, relation) at a topic")
    fanout: int = Field(default=200, ge=1, description="expansion: neighbours per (entity, relation) further out")
    max_frontier: int = Field(default=500, ge=1, description="expansion: frontier nodes per layer")
    node_fanout: int = Field(default=1000, ge=1, description="expansion: triples one non-topic node contributes")
    decompose_tokens: int = Field(default=96, ge=16, description="max reply tokens of the decomposition")
    direct_generation: Literal["auto", "on", "off"] = Field(
        default="auto", description="the last fallback, an answer from the model's memory; auto: on with a remote "
        "model, off with a local one (a 135M model's remembered answers are invented names)")
    answer_types: str | None = Field(default=None, description="directory of an answer-type model (`kgqa train "
                                     "answer-types --out DIR`) weighing the answer pattern tried first; None: the "
                                     "one the scorer directory carries, if any (the demo scorer does)")
    typed_retry: bool = Field(default=True, description="with answer types: when the reading's pattern ends on a "
                              "type the question is not likely to ask for, read again with the likely types' "
                              "triples kept, one hop further or with another last hop (FoG's typed retry, extended)")
    typed_retry_below: float = Field(default=0.5, ge=0.0, le=0.5, description="the typed retry's trigger: P(type "
                                     "of the pattern's end | question) below this")
    typed_retry_bridges: bool = Field(default=True, description="the typed retry also keeps the triples of ends "
                                      "that commonly lead on to a likely type (the films before their directors), so "
                                      "it can go one hop further where the scorer cut the hop before the typed one")
    answer_type_weight: float = Field(default=1.0, ge=0.0, le=10.0, description="exponent on P(the pattern's "
                                      "answer type | question); 0: no answer-type prior")

    @field_validator("scorer")
    @classmethod
    def _scorer_dir(cls, value: str | None) -> str | None:
        return check_scorer_dir(value, what="foresight scorer", how_to_train=HOW_TO_TRAIN)

    @field_validator("answer_types")
    @classmethod
    def _answer_types_dir(cls, value: str | None) -> str | None:
        return check_answer_types_dir(value)


@dataclass
class _Question:
    """What one question's judgements read (a context variable: questions run in parallel threads)."""

    steering: ChainSteering
    scorer: Any
    labels: Any
    sub_goals: list[str]
    constraint: bool
    pattern: Chain = ()
    #: the pattern's hops from this one on were kept for their answer type (the typed retry: the typed last hop and
    #: the bridge before it), not by the scorer; None: every hop was the scorer's
    typed_from: int | None = None


_STATE: ContextVar[_Question | None] = ContextVar("kgqa_chains_question", default=None)


def _hops(pattern: tuple[tuple[str, bool], ...]) -> Chain:
    return tuple(Hop(relation, Direction.IN if back else Direction.OUT) for relation, back in pattern)


def _around(kg: Any, node: str, limit: int = 50) -> list[str]:
    """The neighbours of ``node`` over every relation, both directions, at most ``limit`` per relation."""
    out: list[str] = []
    for direction in (Direction.OUT, Direction.IN):
        for relation in kg.relations(node, direction):
            out += kg.neighbors(node, relation, direction, limit=limit)
    return out


def _spent(budget: int) -> LLMError:
    return LLMError(f"chains' call budget is spent ({budget} calls)")


@register_method("chains")
class Chains(ChainMethod):
    """CCoR's chains steered by the foresight scorer and verified hop by hop (see the module docstring)."""

    name = "chains"
    summary = "Composite: CCoR's relation chains steered by FoG's trained scorer, each hop verified as VoG does"
    Config: ClassVar[type[MethodConfig]] = ChainsConfig
    prompts: ClassVar[PromptBook] = PROMPTS
    signatures = (DECOMPOSE, *chain_signatures(PROMPTS, "chains").all())
    Details = ChainsDetails
    config: ChainsConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self._loader = ScorerLoader(self.config.scorer, method="chains", how_to_train=HOW_TO_TRAIN)
        self._types: tuple[Any, Any] | None = None
        self._types_lock = threading.Lock()

    def check_ready(self, ctx: MethodContext) -> None:
        self._loader.get(ctx)  # a KG with no scorer is refused before any question (and the scorer is loaded once)

    def needs(self, llm: str | None = None) -> Needs:
        # CCoR's pruner still prunes the constraint chain (and the main chain with steering=llm).
        return Needs(kg=True, llm=True, embedder=pruner_needs_embedder(resolve_pruner(self.config.pruner, llm)),
                     artifacts=("label-embeddings",))

    # -- the question ------------------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        budgeted = replace(ctx, llm=BudgetedModel(ctx.llm, self.config.max_calls, _spent)) if ctx.llm is not None \
            else ctx
        token = _STATE.set(None)
        try:
            return super().answer(question, budgeted)
        finally:
            _STATE.reset(token)

    def _from_topics(self, question: Question, ctx: MethodContext, present: list) -> Prediction:
        cfg = self.config
        scorer, labels = self._loader.get(ctx)
        sub_goals = self._sub_goals(question, ctx)
        started = time.perf_counter()
        seeds = [t.id for t in present]
        texts = list(dict.fromkeys([question.text, *sub_goals]))
        caps = Caps(seed_fanout=cfg.seed_fanout, fanout=cfg.fanout, max_frontier=cfg.max_frontier,
                    node_fanout=cfg.node_fanout)
        typing = self._answer_typing(question, scorer, labels, ctx)
        score_batch = scorer.scorer_for(labels, scorer.questions(labels, texts))

        def read(typed_ends: Collection[tuple[str, bool]] = (), prior: Any = None,
                 bridge_ends: Collection[tuple[str, bool]] = ()) -> tuple[Any, list[Any]]:
            graph = expand(ctx.kg, seeds, score_batch, hops=min(4, cfg.depth_for(question)), tau_e=cfg.tau_e,
                           caps=caps, seed_floor=True, typed_ends=typed_ends, bridge_ends=bridge_ends)
            scorer.propagate(graph)
            # FoG's reading of the whole subgraph: the relation pattern of its best answer path steers the chain
            ranked, _ = rank_answers(graph, cfg.tau_p, answerable=lambda ids: set(presentable(ctx.kg, ids)),
                                     within="expanded", combine="min_last", simple=False, pattern_prior=prior)
            return graph, ranked

        graph, ranked = read(prior=typing.prior if typing else None)
        typed_from = None
        if typing is not None and cfg.typed_retry:
            graph, ranked, typed_from = self._typed_retry(typing, graph, ranked, read, ctx)
        pattern = _hops(ranked[0].pattern) if ranked else ()
        ctx.trace.add("chains.expand", sub_goals=texts, scored=graph.scored, kept=len(graph), cut=dict(graph.cut),
                      potential=sum(1 for s in graph.scores if s > cfg.tau_p), pattern=format_chain(pattern),
                      seconds=round(time.perf_counter() - started, 4))
        constraint = cfg.constraint_chain and cfg.constraint_cues and (
            len(present) > 1 or bool(_CONSTRAINT_CUE.search(question.text)))
        _STATE.set(_Question(ChainSteering(graph), scorer, labels, sub_goals, constraint, pattern, typed_from))
        return super()._from_topics(question, ctx, present)

    def _answer_typing(self, question: Question, scorer: Any, labels: Any, ctx: MethodContext
                       ) -> QuestionTyping | None:
        """The question's answer types (``answer_types``, else the model the scorer carries) and their prior on
        patterns, or None; the trace says which type the question reads as."""
        if self.config.answer_type_weight == 0:
            return None
        loaded = self._answer_types(scorer, labels)
        if loaded is None:
            return None
        types, embedder = loaded
        typing = QuestionTyping.read(types, embedder, question.text, [t.name for t in question.topic_entities if t.name],
                                     self.config.answer_type_weight)
        best = int(typing.probabilities.argmax())
        ctx.trace.add("chains.answer_types", best=types.classes[best], p=round(float(typing.probabilities[best]), 4))
        return typing

    def _typed_retry(self, typing: QuestionTyping, graph: Any, ranked: list[Any], read: Any, ctx: MethodContext
                     ) -> tuple[Any, list[Any], int | None]:
        """When the reading's pattern ends on a type the question is not likely to ask for (P below
        ``typed_retry_below``), expand again keeping the triples of its likely types (P >= :data:`LIKELY_TYPE`)
        below tau_e, and read a pattern that keeps the first one's hops but the last, then goes on by one or two hops
        and ends on a likely type. FoG's typed retry, with the extension: the chain a small scorer stops one hop
        short ("the director of Jaws" for "When was the director of Jaws born?") is the miss it is for; with
        ``typed_retry_bridges`` the ends one hop before a likely one are kept too, so "who directed the films X
        starred in" can reach the directors through the films the scorer cut. Returns the graph and reading to steer
        by, and the number of hops of the retry's pattern the scorer chose (the rest were kept for their type), or
        None when the retry gave nothing."""
        likely = typing.types.likely_ends(typing.probabilities, LIKELY_TYPE)
        first = ranked[0].pattern if ranked else None
        before = typing.end_p(first)
        if not likely or (first is not None and (before is None or before >= self.config.typed_retry_below)):
            return graph, ranked, None
        prior = typing.retry_prior(first[:-1] if first else None, max_extra=1)
        bridges = typing.bridge_ends(likely) if self.config.typed_retry_bridges else set()
        again, retried = read(typed_ends=likely, prior=prior, bridge_ends=bridges)
        used = bool(retried) and prior(retried[0].pattern) > 0
        ctx.trace.add("chains.typed_retry", used=used, p_before=None if before is None else round(before, 4),
                      before=format_chain(_hops(first)) if first else None,
                      after=format_chain(_hops(retried[0].pattern)) if retried else None)
        return (again, retried, len(first) - 1 if first else 0) if used else (graph, ranked, None)

    def _answer_types(self, scorer: Any, labels: Any) -> tuple[Any, Any] | None:
        """(answer-type model, the embedder it reads with), loaded once; None when neither the config nor the
        scorer names one."""
        with self._types_lock:
            if self._types is None:
                where = self.config.answer_types or bundled_model(getattr(scorer, "path", None))
                self._types = (None, None) if where is None else load_answer_types(where, labels.embedder)
            types, embedder = self._types
        return None if types is None else (types, embedder)

    def _sub_goals(self, question: Question, ctx: MethodContext) -> list[str]:
        """The decomposition's sub-goals (one call) when ``decompose`` asks for it; the question otherwise."""
        cfg = self.config
        wanted = cfg.decompose == "on" or (cfg.decompose == "auto" and ctx.llm is not None
                                           and not is_local_spec(getattr(ctx.llm, "name", None)))
        if not wanted or ctx.llm is None:
            return [question.text]
        try:
            reply = ask_reply(ctx.llm, DECOMPOSE, max_tokens=cfg.decompose_tokens, question=question.text,
                              max_sub_questions=cfg.max_sub_questions)
        except LLMError as exc:
            ctx.trace.add("chains.decompose", ok=False, failure=f"{type(exc).__name__}: {exc}")
            return [question.text]
        goals = [s.strip() for s in (reply.value.sub_questions if reply.ok and reply.value else []) if s.strip()]
        ctx.trace.add("chains.decompose", ok=reply.ok, sub_goals=goals, failure=reply.failure)
        return goals[: cfg.max_sub_questions] or [question.text]

    # -- main chain: the scorer prunes and judges ----------------------------------------------------------------------

    def _main_pruner(self, question: Question, ctx: MethodContext, pruning: PruningConfig, topics: list[str]) -> Any:
        state = _STATE.get()
        if self.config.steering == "llm" or state is None:
            return super()._main_pruner(question, ctx, pruning, topics)
        return ForesightPruner(state.steering, top_k=self.config.top_k, min_score=self.config.min_hop_score,
                               step="chains.prune", max_depth=self.config.depth_for(question), pattern=state.pattern)

    def _judge_main(self, question: Question, topics: list[str], topic_names: list[str], chain: Chain, waiting: int,
                    ctx: MethodContext) -> Judgement:
        state = _STATE.get()
        if self.config.judge == "llm" or state is None:
            return super()._judge_main(question, topics, topic_names, chain, waiting, ctx)
        cfg = self.config
        reached = reached_view(ctx.kg, topics, chain, samples=cfg.sample_names)
        if reached.count == 0:
            return Judgement(Action.BACKTRACK, "the chain reaches no entity")
        if reached.only_start:
            return Judgement(Action.BACKTRACK, "the chain leads back to the topic entity")
        depth_left = max(0, cfg.depth_for(question) - len(chain))
        reading = state.steering.read(chain, depth_left=depth_left, floor=cfg.min_hop_score)
        event: dict[str, Any] = {"chain": format_chain(chain), "arrival": round(reading.arrival, 4),
                                 "onward": round(reading.onward, 4), "per_hop": [round(s, 4) for s in reading.per_hop],
                                 "here": round(reading.here, 4), "beyond": round(reading.beyond, 4),
                                 "reached": reached.count}
        verified: float | None = None
        if reading.arrival <= cfg.min_hop_score:
            action, reason = Action.BACKTRACK, "the scorer supports no triple of this hop"
        else:
            # kept for its type by the typed retry or as the only way on by a floor, not because the scorer rated
            # it above tau_e: re-verifying it by that scorer (whose threshold is tau_e) would always refuse it
            typed_hop = (state.typed_from is not None and len(chain) > state.typed_from
                         and tuple(chain) == state.pattern[: len(chain)])
            last = chain[-1]
            floored_hop = (len(chain), last.relation, last.direction is Direction.IN) in state.steering.graph.floored
            if cfg.verify and not typed_hop and not floored_hop:
                goal = state.sub_goals[min(len(chain), len(state.sub_goals)) - 1]
                verified = verify_hop(state.scorer, state.labels, goal, state.steering, reading.last_edges)
                event.update(sub_goal=goal, verified=round(verified, 4))
            if verified is not None and verified < cfg.verify_threshold:
                action, reason = Action.BACKTRACK, (f"verification: the hop's best triple scores {verified:.3f} against "
                                                    f"its sub-goal, below {cfg.verify_threshold}")
            elif tuple(chain) == state.pattern:
                action = Action.CONSTRAINT if state.constraint else Action.STOP
                reason = "the chain is the scorer's best reading of the subgraph (FoG's answer pattern)"
            elif len(chain) < len(state.pattern) and tuple(chain) == state.pattern[: len(chain)]:
                action, reason = Action.FORWARD, "the chain is a prefix of the scorer's best reading of the subgraph"
            elif reading.beyond > reading.here:
                action, reason = Action.FORWARD, (f"an extension reads {reading.beyond:.3f}, better than stopping here "
                                                  f"({reading.here:.3f})")
            else:
                action = Action.CONSTRAINT if state.constraint else Action.STOP
                reason = f"no extension reads better than stopping here ({reading.here:.3f})"
        if action in (Action.STOP, Action.CONSTRAINT) and reached.nameless and not reached.samples:
            action, reason = Action.FORWARD, "the chain ends on nameless mediator nodes"
        event.update(action=action.value)
        ctx.trace.add("chains.hop", **event)
        self.account(ctx).hops.append(HopReading(**{k: v for k, v in event.items()
                                              if k in HopReading.model_fields}))
        self._note_claim(ctx, action, reached.entities)
        return Judgement(action, reason)

    def _execute(self, ctx: MethodContext, topics: list[str], chain: Chain) -> Any:
        """E_cand as FoG reads a path: the chain run hop by hop on the KG, never passing back through a topic entity
        (MetaQA's "films that share actors with X" are the actors' other films, not X)."""
        limit = self.config.max_candidates
        frontier, seen_topics, truncated = list(topics), set(topics), False
        for hop in chain:
            found = ctx.kg.neighbors_many(frontier, hop.relation, hop.direction, limit_per_entity=limit)
            reached = [e for e in dict.fromkeys(x for xs in found.values() for x in xs) if e not in seen_topics]
            truncated = truncated or any(len(xs) >= limit for xs in found.values()) or len(reached) > limit
            frontier = reached[:limit]
        return ChainResult(frontier, None, truncated)

    def _structured(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                    constraint: Any, final: list[str]) -> Prediction:
        """CCoR's structured answer, the answers in the scorer's order (the best path along the chain to each, as FoG
        ranks its answers); entities the expansion did not keep follow in the KG's order."""
        state = _STATE.get()
        if state is not None and len(final) > 1:
            scores = state.steering.end_scores(main)
            final = sorted(final, key=lambda e: -scores.get(e, -1.0))
            ctx.trace.add("chains.rank", ranked=sum(1 for e in final if e in scores), of=len(final))
        return super()._structured(question, ctx, topics, main, constraint, final)

    # -- the call budget ---------------------------------------------------------------------------------------------

    def _constraint(self, question: Question, ctx: MethodContext, topics: list[str], topic_names: list[str],
                    main: Chain, candidates: list[str], pruning: PruningConfig, others: list[str]) -> Prediction:
        if self.config.mention_constraint:
            kept = self._by_mention(question, ctx, topics, main, others)
            if kept:
                return self._structured(question, ctx, topics, main, None, kept)
        try:
            return super()._constraint(question, ctx, topics, topic_names, main, candidates, pruning, others)
        except LLMError as exc:
            ctx.trace.add("chains.constraint_unchecked", cause=f"{type(exc).__name__}: {exc}")
            return self._structured(question, ctx, topics, main, None, candidates)

    def _by_mention(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                    others: list[str]) -> list[str]:
        """The graph-side constraint check, before the LLM's: the candidates on a path of the main chain one of whose
        entities is linked to what the question names besides its topic (another topic entity, or a year or number
        written in the question, as a value or in a name). Empty when nothing is named or nothing (or everything)
        passes, so the constraint goes on to CCoR's constraint chain."""
        numbers = set(_NUMBER_MENTION.findall(question.text))
        wanted = set(others)
        if not numbers and not wanted:
            return []
        result = ctx.kg.run_chain(topics, main, bindings=True, limit=self.config.max_candidates,
                                  max_paths=self.config.max_mention_paths)
        nodes = list(dict.fromkeys(n for path in (result.paths or []) for n in path[1:]))[: self.config.max_mention_paths]
        linked: set[str] = set()
        for node in nodes:
            if is_literal(node):
                if any(literal_value(node).startswith(n) for n in numbers):
                    linked.add(node)
                continue
            neighbours = _around(ctx.kg, node)
            names = ctx.kg.names([n for n in neighbours if not is_literal(n)])
            # through a nameless mediator (CVT) node one step further: a film's cast is film -> performance -> actor
            mediators = [n for n in neighbours if not is_literal(n) and not names.get(n)][:20]
            for mediator in mediators:
                neighbours += _around(ctx.kg, mediator)
            names = ctx.kg.names([n for n in neighbours if not is_literal(n)])
            for n in neighbours:
                text = literal_value(n) if is_literal(n) else (names.get(n) or "")
                if n in wanted or any(text.startswith(x) or f" {x}" in text for x in numbers if text):
                    linked.add(node)
                    break
        # A nameless mediator on the chain is an n-ary fact (an award honour, a performance): what the question names
        # qualifies that fact when it can ("won Best Picture in 2015" is the honour's year, not the film's release).
        unnamed = ctx.kg.names([n for n in linked if not is_literal(n)])
        at_mediator = {n for n in linked if not is_literal(n) and not unnamed.get(n)}
        if at_mediator:
            linked = at_mediator
        final = list(dict.fromkeys(path[-1] for path in (result.paths or []) if any(n in linked for n in path[1:])))
        ctx.trace.add("chains.mention_constraint", named=sorted(numbers) + [str(o) for o in others], nodes=len(nodes),
                      linked=len(linked), at_mediator=bool(at_mediator), kept=len(final), of=len(result.entities))
        if not final or len(final) >= len(result.entities):
            return []
        note_answer_cap("chains.mention_constraint", result.entities, final, loss="answer_step")
        return final

    def _global_filter(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                       candidates: list[str], cause: str) -> Prediction:
        try:
            return super()._global_filter(question, ctx, topics, main, candidates, cause)
        except LLMError as exc:
            ctx.trace.add("chains.constraint_unchecked", cause=f"{cause}; {type(exc).__name__}: {exc}")
            return self._structured(question, ctx, topics, main, None, candidates)

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        llm = ctx.llm
        mode = self.config.direct_generation
        skipped = None
        if mode == "off" or (mode == "auto" and is_local_spec(getattr(llm, "name", None))):
            # a tiny local model's answer from memory is invented names a new user reads as answers: none is honest
            skipped = f"direct_generation={mode}" + (" and the model is a local one" if mode == "auto" else "")
        elif isinstance(llm, BudgetedModel) and llm.calls >= llm.budget:
            skipped = f"the call budget ({llm.budget}) is spent"
        if skipped is None:
            return super()._direct(question, ctx, cause)
        ctx.trace.add("fallback", layer=2, stage="direct_generation", cause=f"{cause}; skipped: {skipped}", reasoning="")
        return Prediction(grounding=Grounding.PARAMETRIC)

    # -- what it did -------------------------------------------------------------------------------------------------

    def explain(self, prediction: Prediction) -> Explanation:
        """CCoR's chains and fallbacks, plus the scorer's numbers and the verification at each judged hop."""
        base = super().explain(prediction)
        hops = self.details_of(prediction).hops
        lines = list(base.lines)
        for hop in hops:
            check = f", verified {hop.verified} against {hop.sub_goal!r}" if hop.verified is not None else ""
            lines.append(f"hop {hop.chain}: arrival {hop.arrival}, onward {hop.onward}, per hop {hop.per_hop}{check} "
                         f"-> {hop.action}")
        return Explanation(fields={**base.fields, "hops": [hop.model_dump() for hop in hops]}, lines=lines)
