"""The answering body CCoR and the composite ``chains`` method share (a whole strategy, as :mod:`kgqa.methods.llm_only`
is for IO and CoT): a relation chain per topic entity grown by :class:`kgqa.steps.explore.RelationExplorer`, executed on
the KG, then CCoR's constraint chain, Global Entity Filtering and direct generation. The mechanism, and where it differs
from the CCoR paper, is described in :mod:`kgqa.methods.ccor.method`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field

from kgqa.core import AnswerItem, Audit, Grounding, MethodContext, Prediction, Question
from kgqa.errors import KGError
from kgqa.kg.base import Chain, ConstraintChain, format_chain, is_literal, literal_value
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs
from kgqa.methods.llm_only import ReasonedAnswer, answer_from_evidence, generate_answers
from kgqa.steps.answers import (
    FilterChoice,
    answer_items,
    chain_evidence,
    choose_candidates,
    keep_gold_candidates,
    presentable,
    rank_by_mention,
)
from kgqa.steps.entities import topics_in_kg
from kgqa.steps.explore import Action, Judgement, RelationExplorer
from kgqa.steps.losses import note_answer_cap, note_answers, note_entities
from kgqa.steps.pruning import (
    PrunerChoice,
    PruningConfig,
    RelationChoice,
    RelationPruner,
    choose_gold_relations,
    pruner_needs_embedder,
    resolve_pruner,
)
from kgqa.steps.relations import describe_chain, reached_view
from kgqa.steps.reply import ask_reply
from kgqa.steps.walks import WalkBack, walk_back_field, walks_back

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

#: Depth when neither the config nor the dataset's facts (``max_depth`` in question metadata) say otherwise.
DEFAULT_DEPTH = 3
#: A question that asks for a number of things ("How many films ...", "What is the number of ...").
_COUNT_RE = re.compile(r"^\s*(how\s+many|what\s+(?:is|was)\s+the\s+(?:total\s+)?number\s+of|count\s+the)\b", re.I)
_NUMBER_RE = re.compile(r"^-?\d[\d,]*(?:\.\d+)?$")


class _ToDirectGeneration(Exception):
    """Raised inside the KG layers of CCoR to go to the second fallback layer (direct generation) with a cause, so
    that direct generation runs once, outside the handler that turns KG and LLM errors into that same fallback."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class MainDecision(Reply):
    #: the judge's reasoning on the two questions, written before its verdict (the paper's agent reasons, then acts)
    reason: str = ""
    chain_status: Literal["complete", "inconsistent", "incomplete"]
    answer_space_reached: bool | None = None


class ConstraintInit(Reply):
    constraint_query: str = Field(min_length=1)
    source_position: int = Field(ge=0)


class ConstraintDecision(Reply):
    #: the reasoning on the two questions, written before the verdict
    reason: str = ""
    chain_correct: bool
    target: int | None = None


@dataclass(frozen=True)
class ChainSignatures:
    """The prompts of the chain body (the method's book: ``prune_relations``, ``main_reasoning``, ``constraint_init``,
    ``constraint_reasoning``, ``global_entity_filtering``, ``direct_generation``), each with its reply model and a step
    under the method's name."""

    prune: Signature
    constraint_prune: Signature
    main: Signature
    constraint_init: Signature
    constraint: Signature
    gef: Signature
    generate: Signature

    def all(self) -> tuple[Signature, ...]:
        return (self.prune, self.constraint_prune, self.main, self.constraint_init, self.constraint, self.gef,
                self.generate)


def chain_signatures(book: PromptBook, method: str) -> ChainSignatures:
    """The chain body's signatures over ``book``, accounted under ``method`` (``ccor.reason``, ``cor.reason``, ...)."""
    prune = Signature(book, "prune_relations", RelationChoice, f"{method}.prune", choose_gold_relations)
    return ChainSignatures(
        prune=prune, constraint_prune=prune.labelled(f"{method}.constraint_prune"),
        main=Signature(book, "main_reasoning", MainDecision, f"{method}.reason", _oracle_main_decision),
        constraint_init=Signature(book, "constraint_init", ConstraintInit, f"{method}.constraint_init",
                                  _oracle_constraint_init),
        constraint=Signature(book, "constraint_reasoning", ConstraintDecision, f"{method}.constraint_reason",
                             _oracle_constraint_decision),
        gef=Signature(book, "global_entity_filtering", FilterChoice, f"{method}.gef", keep_gold_candidates),
        generate=Signature(book, "direct_generation", ReasonedAnswer, f"{method}.generate", answer_from_evidence))


def _shown_hops(chain_text: str) -> tuple[tuple[str, bool], ...]:
    """The hops of a chain as :func:`~kgqa.steps.relations.describe_chain` writes it (``[Start] -> rel -> rel
    (incoming)``): (relation, backward) each."""
    _, sep, hops = chain_text.partition("] -> ")
    if not sep:
        return ()
    return tuple((h.strip().removesuffix(" (incoming)"), h.strip().endswith(" (incoming)")) for h in hops.split(" -> "))


def _oracle_main_decision(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's judge of a main chain: complete when it is a gold chain (incomplete with the answer space reached
    when the question has a constraint too), incomplete when it is a gold chain's beginning, inconsistent otherwise."""
    hops = _shown_hops(str(ask.inputs["chain"]))
    whole = any(hops == chain for chain in ask.gold.chains)
    begun = any(hops == chain[: len(hops)] for chain in ask.gold.chains)
    status = ("incomplete" if ask.gold.constraints else "complete") if whole else (
        "incomplete" if begun else "inconsistent")
    options = ["complete", "incomplete", "inconsistent"]
    status = ask.choose(options, [status])[0]
    return {"reason": "the chain is the question's" if whole else ("the chain is on the way" if begun else
                                                                   "the chain leads elsewhere"),
            "chain_status": status, "answer_space_reached": whole and status == "incomplete"}


def _oracle_constraint_init(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's constraint: the gold constraint's relation as the sub-question, at its position of the chain."""
    positions = [n for n, _ in ask.numbered("positions")]
    constraint = ask.gold.constraints[0] if ask.gold.constraints else (max(positions, default=0), (), None)
    position = min(constraint[0], max(positions, default=0))
    relation = constraint[1][0][0] if constraint[1] else "property"
    return {"constraint_query": f"Which of these entities has the right {relation}?",
            "source_position": ask.choose(positions, [position])[0] if positions else position}


def _oracle_constraint_decision(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's constraint judge: the chain is right when it is a gold constraint's relations or their beginning;
    the target is the recalled value that is the constraint's (none until the chain is whole)."""
    hops = _shown_hops(str(ask.inputs["chain"]))
    right = any(hops == c[1][: len(hops)] for c in ask.gold.constraints)
    whole = any(hops == c[1] for c in ask.gold.constraints)
    correct = ask.judge(right)
    listed = ask.numbered("options")
    targets = [n for n, name in listed if whole and ask.shows(name, ask.gold.constraint_names)]
    target = ask.choose([n for n, _ in listed], targets[:1]) if correct else []
    return {"reason": "the chain reaches the constraint's value" if correct else "the chain misses the constraint",
            "chain_correct": correct, "target": target[0] if target else None}


class ConstraintAccount(BaseModel):
    """The constraint chain of an answer: from which position of the main chain, which relations, to which target."""

    source: int
    chain: str
    target: str


class FallbackAccount(BaseModel):
    """The first fallback layer a question reached (1: Global Entity Filtering, 2: direct generation) and why."""

    layer: int
    stage: str
    cause: str


class JudgeClaim(BaseModel):
    """One judgement of the main chain: whether it claims the answers are among the ``nodes`` the chain reaches."""

    claim: bool
    nodes: list[str]
    iteration: int


class ChainDetails(MethodDetails):
    main_chain: str | None = None
    constraint_chain: ConstraintAccount | None = None
    fallback: FallbackAccount | None = None
    #: the main chain's judgements, turned into audits (not stored: the audits keep the nodes)
    judgements: list[JudgeClaim] = Field(default_factory=list, exclude=True)

    def note_fallback(self, layer: int, stage: str, cause: str) -> None:
        if self.fallback is None:
            self.fallback = FallbackAccount(layer=layer, stage=stage, cause=cause)


class CoRConfig(MethodConfig):
    """Hyperparameters, defaulting to the paper's: top-k 3, depth 3 (4 on CWQ, from the dataset's facts)."""

    top_k: int = Field(default=3, ge=1, description="relations kept per pruning step (the paper's k)")
    max_depth: int | None = Field(default=None, ge=1, description="chain depth; None: the dataset's max_depth, else 3")
    pruner: PrunerChoice = Field(default="auto", description="relation scorer; auto: embedding for local models, "
                                                             "llm otherwise")
    prefilter: int = Field(default=30, ge=1, description="most candidate relations one pruning prompt lists; longer "
                                                         "lists keep those most similar to the question (embedder, "
                                                         "else word overlap)")
    prune_tokens: int | None = Field(default=None, ge=1, description="max reply tokens of relation pruning (None: "
                                                                     "16 + 24 per relation kept)")
    max_iterations: int = Field(default=12, ge=1, description="judgements per exploration (ours; the paper has none)")
    backtracking: bool = Field(default=True, description="False: the w/o relation backtrack ablation")
    walk_back: WalkBack = walk_back_field()
    sample_names: int = Field(default=5, ge=1, description="names of reached entities shown to the judge")
    max_options: int = Field(default=30, ge=1, description="recalled constraint values shown to the judge (the most "
                                                           "mentioned in the sub-question first)")
    max_values: int = Field(default=1000, ge=1, description="constraint values recalled and ranked per judgement")
    max_gef_candidates: int = Field(default=50, ge=1, description="candidates listed for Global Entity Filtering (the "
                                                                  "most mentioned in the question first)")
    max_answers: int = Field(default=100, ge=1, description="answers returned at most")
    max_candidates: int = Field(default=1000, ge=1, description="E_cand and E_final are computed up to this many")
    count_questions: bool = Field(default=True, description="answer a 'how many' question with the count of E_final")
    # Reply budgets per step: a judgement is a short JSON object, not a paragraph; tiny local models stop early.
    judge_tokens: int = Field(default=96, ge=16, description="max reply tokens of a chain judgement")
    init_tokens: int = Field(default=96, ge=16, description="max reply tokens of the constraint initialisation")
    gef_tokens: int = Field(default=160, ge=16, description="max reply tokens of Global Entity Filtering")
    answer_tokens: int = Field(default=256, ge=16, description="max reply tokens of direct generation (reasons first)")
    max_evidence_paths: int = Field(default=20, ge=1, description="paths kept as evidence")

    def depth_for(self, question: Question) -> int:
        if self.max_depth is not None:
            return self.max_depth
        depth = question.metadata.get("max_depth")
        return int(depth) if isinstance(depth, int) and depth >= 1 else DEFAULT_DEPTH


class ChainMethod(KGQAMethod):
    """CCoR's answering body: main chain per topic entity, constraint chain, Global Entity Filtering and direct
    generation (see :mod:`kgqa.methods.ccor.method` for the mechanism and its deviations from the paper).

    A subclass brings its prompt book (entries ``prune_relations``, ``main_reasoning``, ``constraint_init``,
    ``constraint_reasoning``, ``global_entity_filtering``, ``direct_generation``) and may replace how the main chain
    is pruned (:meth:`_main_pruner`) and judged (:meth:`_judge_main`); everything after the main chain is shared.
    """

    prompts: ClassVar[PromptBook]
    Details: ClassVar[type[MethodDetails]] = ChainDetails
    config: CoRConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self.constraint_chain = bool(getattr(self.config, "constraint_chain", False))

    def needs(self, llm: str | None = None) -> Needs:
        # The LLM's spec decides what "auto" pruning means, so the embedder is needed only where it will be used.
        return Needs(kg=True, llm=True, embedder=pruner_needs_embedder(resolve_pruner(self.config.pruner, llm)))

    @functools.cached_property
    def asks(self) -> ChainSignatures:
        """This configured method's signatures (CCoR without its constraint chain is accounted as ``cor``)."""
        return chain_signatures(self.prompts, self.name)

    def _pruning(self, ctx: MethodContext) -> PruningConfig:
        kind = resolve_pruner(self.config.pruner, getattr(ctx.llm, "name", None))
        return PruningConfig(kind=kind, top_k=self.config.top_k, prefilter=self.config.prefilter,
                             max_tokens=self.config.prune_tokens)

    # -- the whole question ----------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        details = ctx.details = self.Details()
        prediction = self._answer(question, ctx)
        # The main chain's judgements, recorded as they were made, become audits the harness scores against gold.
        audits = [Audit(check=f"{self.name}.judge", claim=j.claim, nodes=j.nodes, step=j.iteration)
                  for j in details.judgements]  # type: ignore[attr-defined]
        return prediction.model_copy(update={"audits": audits or prediction.audits, "details": details,
                                             "topics": prediction.topics or list(ctx.topics)})

    def _answer(self, question: Question, ctx: MethodContext) -> Prediction:
        present, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return self._direct(question, ctx, cause)
        try:
            return self._from_topics(question, ctx, present)
        except _ToDirectGeneration as fallback:
            cause = fallback.cause
        except (KGError, LLMError) as exc:
            # A KG timeout or a dead model mid-question is the paper's second fallback layer, not a failed question.
            cause = f"{type(exc).__name__} during exploration: {exc}"
        return self._direct(question, ctx, cause)

    def _from_topics(self, question: Question, ctx: MethodContext, present: list) -> Prediction:
        """One main chain per topic entity, in the question's order, until one succeeds; the other topics stay
        available as constraint targets."""
        pruning = self._pruning(ctx)
        failures: list[str] = []
        for topic in present:
            topics, topic_names = [topic.id], [topic.name]
            others = [t.id for t in present if t.id != topic.id]
            pruner = self._main_pruner(question, ctx, pruning, topics)
            explorer = RelationExplorer(ctx.kg, pruner, topics=topics, max_depth=self.config.depth_for(question),
                                        max_iterations=self.config.max_iterations, trace=ctx.trace, label="main",
                                        walk_back=walks_back(ctx.kg, self.config.walk_back))
            outcome = explorer.run(question.text, topic_names, lambda chain, waiting, t=topics, n=topic_names:
                                   self._judge_main(question, t, n, chain, waiting, ctx),
                                   backtracking=self.config.backtracking)
            if outcome.chain is None or outcome.judgement is None:
                failures.append(f"from {topic.name}: {outcome.failure}")
                continue
            main = outcome.chain
            candidates = self._execute(ctx, topics, main)
            ctx.trace.add("main.execute", topic=topic.id, chain=format_chain(main), candidates=len(candidates.entities),
                          truncated=candidates.truncated)
            note_answers("main.execute", candidates.entities)
            if not candidates.entities:
                failures.append(f"main chain {format_chain(main)} reaches no entity")
                continue
            if outcome.judgement.action is Action.STOP:
                return self._structured(question, ctx, topics, main, None, candidates.entities)
            if not self.constraint_chain:
                return self._global_filter(question, ctx, topics, main, candidates.entities,
                                           "cor: constraints go to GEF")
            return self._constraint(question, ctx, topics, topic_names, main, candidates.entities, pruning, others)
        raise _ToDirectGeneration("main chain failed: " + "; ".join(failures))

    def _execute(self, ctx: MethodContext, topics: list[str], chain: Chain) -> Any:
        """E_cand: the main chain run on the KG from the topic entities."""
        return ctx.kg.run_chain(topics, chain, limit=self.config.max_candidates)

    def _main_pruner(self, question: Question, ctx: MethodContext, pruning: PruningConfig, topics: list[str]) -> Any:
        """What ranks the relations that extend the main chain (CCoR: the configured LLM/embedding pruner)."""
        return RelationPruner(pruning, llm=ctx.llm, embedder=ctx.embedder, signature=self.asks.prune)

    def explain(self, prediction: Prediction) -> Explanation:
        """The chains behind the answer: main chain, constraint chain (source, chain, target), and any fallback."""
        details: ChainDetails = self.details_of(prediction)
        constraint, fallback = details.constraint_chain, details.fallback
        fields: dict[str, Any] = {
            "main_chain": details.main_chain,
            "constraint_chain": None if constraint is None else constraint.model_dump(),
            "fallback": None if fallback is None else fallback.model_dump()}
        lines = [f"main chain: {details.main_chain or '(none)'}",
                 "constraint chain: " + (f"from position {constraint.source}: {constraint.chain} = {constraint.target}"
                                         if constraint else "(none)")]
        if fallback is not None:
            lines.append(f"fallback: layer {fallback.layer} ({fallback.stage}): {fallback.cause}")
        return Explanation(fields=fields, lines=lines)

    # -- main chain reasoning --------------------------------------------------------------------------------------

    def _judge_main(self, question: Question, topics: list[str], topic_names: list[str], chain: Chain, waiting: int,
                    ctx: MethodContext) -> Judgement:
        reached = reached_view(ctx.kg, topics, chain, samples=self.config.sample_names)
        if reached.count == 0:
            # A chain that reaches nothing cannot hold the answer: no model call is spent on it.
            return Judgement(Action.BACKTRACK, "the chain reaches no entity")
        if reached.only_start:
            # It walked back to where it started (through a mediator node): no model call is spent on it either.
            return Judgement(Action.BACKTRACK, "the chain leads back to the topic entity")
        reply = ask_reply(ctx.llm, self.asks.main, max_tokens=self.config.judge_tokens, question=question.text,
                          chain=describe_chain(topic_names, chain), reached=reached.describe(),
                          alternatives=str(waiting))
        if not reply.ok or reply.value is None:
            return Judgement(Action.BACKTRACK, f"unreadable judgement: {reply.failure}")
        decision = reply.value
        if decision.chain_status == "complete":
            action = Action.STOP
        elif decision.chain_status == "inconsistent":
            action = Action.BACKTRACK
        else:
            action = Action.CONSTRAINT if decision.answer_space_reached else Action.FORWARD
        if action in (Action.STOP, Action.CONSTRAINT) and reached.nameless and not reached.samples:
            # Nameless mediator (CVT) nodes are not answers: the chain goes on through them.
            action, reason = Action.FORWARD, f"the chain ends on nameless mediator nodes ({decision.reason})"
        else:
            reason = decision.reason
        self._note_claim(ctx, action, reached.entities)
        return Judgement(action, reason)

    def _note_claim(self, ctx: MethodContext, action: Action, reached: list[str]) -> None:
        """Record a main-chain judgement: Stop and Constraint claim the answers are among the ``reached`` entities,
        Forward and Backtrack that they are not (yet). The harness checks the claim against gold, never the method."""
        judgements = self.account(ctx).judgements
        claim = JudgeClaim(claim=action in (Action.STOP, Action.CONSTRAINT), nodes=reached, iteration=len(judgements))
        judgements.append(claim)
        # the trace keeps the count; the audit keeps the nodes
        ctx.trace.add("main.judge_audit", claim=claim.claim, nodes=len(claim.nodes), iteration=claim.iteration)

    # -- constraint chain ------------------------------------------------------------------------------------------

    def _positions(self, ctx: MethodContext, topics: list[str], topic_names: list[str], main: Chain) -> str:
        lines = [f"0. the topic entities: {', '.join(topic_names)}"]
        for i in range(1, len(main) + 1):
            role = "the candidate answers" if i == len(main) else "intermediate entities"
            view = reached_view(ctx.kg, topics, main[:i], samples=3)
            lines.append(f"{i}. {role}, reached by {describe_chain(topic_names, main[:i])}: {view.describe()}")
        return "\n".join(lines)

    def _constraint(self, question: Question, ctx: MethodContext, topics: list[str], topic_names: list[str],
                    main: Chain, candidates: list[str], pruning: PruningConfig, others: list[str]) -> Prediction:
        kg = ctx.kg
        reply = ask_reply(ctx.llm, self.asks.constraint_init, max_tokens=self.config.init_tokens, question=question.text,
                          chain=describe_chain(topic_names, main),
                          positions=self._positions(ctx, topics, topic_names, main))
        if not reply.ok or reply.value is None:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       f"constraint initialisation failed: {reply.failure}")
        init = reply.value
        source = min(init.source_position, len(main))
        ctx.trace.add("constraint.init", constraint_query=init.constraint_query, source=source,
                      requested_source=init.source_position)

        source_label = [f"entities at position {source} of the main chain"]
        explorer = RelationExplorer(kg, RelationPruner(pruning, llm=ctx.llm, embedder=ctx.embedder,
                                                       signature=self.asks.constraint_prune),
                                    topics=topics, prefix=main[:source], max_depth=self.config.depth_for(question),
                                    max_iterations=self.config.max_iterations, trace=ctx.trace, label="constraint")
        targets: dict[tuple, str] = {}
        mentions = f"{init.constraint_query} {question.text}"

        def judge(chain: Chain, waiting: int) -> Judgement:
            return self._judge_constraint(init.constraint_query, mentions, others, topics, main, source, source_label,
                                          chain, ctx, targets)

        outcome = explorer.run(init.constraint_query, source_label, judge,
                               prompt_context=f"(This chain checks a constraint of the question: {question.text})",
                               backtracking=self.config.backtracking)
        if outcome.chain is None:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       f"constraint chain failed: {outcome.failure}")
        constraint = ConstraintChain(source, outcome.chain, targets[outcome.chain])
        # E_final is the constraint run as a filter over the main chain's candidates, jointly on the KG (no
        # intersection of two separately capped sets, which could miss each other).
        kept = kg.filter_by_constraint(topics, main, constraint, limit=self.config.max_candidates)
        final = kept.entities
        note_answer_cap("constraint.execute", candidates, final, loss="answer_step")
        ctx.trace.add("constraint.execute", source=source, chain=format_chain(outcome.chain), target=constraint.target,
                      final=len(final), truncated=kept.truncated)
        if not final:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       "no candidate satisfies the constraint target")
        return self._structured(question, ctx, topics, main, constraint, final)

    def _judge_constraint(self, query: str, mentions: str, others: list[str], topics: list[str], main: Chain,
                          source: int, source_label: list[str], chain: Chain, ctx: MethodContext,
                          targets: dict[tuple, str]) -> Judgement:
        recalled = ctx.kg.constraint_values(topics, main, ConstraintChain(source, chain), limit=self.config.max_values)
        names = ctx.kg.names(recalled.entities)
        named = [e for e in recalled.entities if names.get(e)]
        if not named:
            return Judgement(Action.FORWARD if recalled.entities else Action.BACKTRACK,
                             "the chain recalls only nameless nodes" if recalled.entities else "the chain recalls nothing")
        # The values the sub-question or the question mention come first ("2010" finds the year 2010 among 120 years),
        # and another topic entity of the question before anything else: it is the likeliest constraint target.
        ranked = rank_by_mention(mentions, named, names)
        ranked = [e for e in ranked if e in others] + [e for e in ranked if e not in others]
        options = ranked[: self.config.max_options]
        listing = "\n".join(f"{i}. {names[e]}" for i, e in enumerate(options, start=1))
        ctx.trace.add(f"{self.name}.constraint_options", chain=format_chain(chain), recalled=len(recalled.entities),
                      named=len(named), shown=len(options), truncated=recalled.truncated)
        reply = ask_reply(ctx.llm, self.asks.constraint, max_tokens=self.config.judge_tokens, constraint_query=query,
                          chain=describe_chain(source_label, chain), options=listing)
        if not reply.ok or reply.value is None:
            return Judgement(Action.BACKTRACK, f"unreadable judgement: {reply.failure}")
        decision = reply.value
        if not decision.chain_correct:
            return Judgement(Action.BACKTRACK, decision.reason)
        if decision.target is None or not 1 <= decision.target <= len(options):
            return Judgement(Action.FORWARD, decision.reason)
        target = options[decision.target - 1]
        targets[chain] = target
        return Judgement(Action.STOP, decision.reason, {"target": target, "target_name": names[target]})

    # -- answers and fallbacks -------------------------------------------------------------------------------------

    def _structured(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                    constraint: ConstraintChain | None, final: list[str]) -> Prediction:
        shown = presentable(ctx.kg, final)
        if not shown:
            raise _ToDirectGeneration(f"the chain {format_chain(main)} ends on nameless mediator nodes only")
        # The topic entity is not its own answer ("who starred with DiCaprio" reaches DiCaprio too), unless it is all
        # the chain reaches.
        shown = [e for e in shown if e not in topics] or shown
        details: ChainDetails = self.account(ctx)
        details.main_chain = format_chain(main)
        details.constraint_chain = None if constraint is None else ConstraintAccount(
            source=constraint.source, chain=format_chain(constraint.chain), target=constraint.target)
        ctx.trace.add("answer", grounding="structured", main_chain=details.main_chain,
                      constraint_chain=None if details.constraint_chain is None else details.constraint_chain.model_dump(),
                      answers=len(shown), nameless_dropped=len(final) - len(shown))
        evidence = self._evidence(ctx, topics, main, shown)
        counted = self._count(question, ctx, shown)
        if counted is not None:
            return Prediction(answers=[counted], grounding=Grounding.STRUCTURED, evidence=evidence)
        note_answer_cap("answer.max_answers", shown, shown[: self.config.max_answers])
        return Prediction(answers=answer_items(ctx.kg, shown, limit=self.config.max_answers),
                          grounding=Grounding.STRUCTURED, evidence=evidence)

    def _count(self, question: Question, ctx: MethodContext, final: list[str]) -> AnswerItem | None:
        """For a "how many" question, the count of E_final, unless the KG already holds the number (one numeric
        literal, e.g. a population): then that literal is the answer and nothing is counted."""
        if not self.config.count_questions or not _COUNT_RE.match(question.text):
            return None
        if all(is_literal(e) for e in final):
            # The KG holds the number (a population, dated values of one): those values are the answer, not counted.
            numbers = sum(1 for e in final if _NUMBER_RE.match(literal_value(e).strip()))
            ctx.trace.add("aggregate", kind="count", counted=False, reason=f"the chain reaches values ({numbers} numeric)")
            return None
        # A count that reached the max_candidates cap is a lower bound: the trace says so.
        ctx.trace.add("aggregate", kind="count", counted=True, of=len(final), capped=len(final) >= self.config.max_candidates)
        return AnswerItem(id=None, name=str(len(final)))

    def _global_filter(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                       candidates: list[str], cause: str) -> Prediction:
        """Layer 1: the LLM filters E_cand by the constraint it reads from the question (grounding: synthesis).

        Candidates are ranked by how much the question mentions their names before the first
        ``max_gef_candidates`` are listed; how many were offered and shown is in the trace.
        """
        offered = presentable(ctx.kg, candidates)
        names = ctx.kg.names(offered)
        ranked = rank_by_mention(question.text, offered, names)
        shown = ranked[: self.config.max_gef_candidates]
        note_entities("gef.shown", ranked, shown)
        chosen = choose_candidates(ctx.llm, self.asks.gef, question.text, ranked, names,
                                   max_shown=self.config.max_gef_candidates, max_tokens=self.config.gef_tokens)
        keep = chosen.value.kept if chosen.value is not None else []
        if not chosen.ok:
            cause = f"{cause}; filtering reply unreadable: {chosen.failure}"
        final = keep or shown  # an empty filter keeps the KG's candidates rather than answering nothing
        ctx.trace.add("fallback", layer=1, stage="global_entity_filtering", cause=cause, main_chain=format_chain(main),
                      candidates=len(candidates), offered=len(offered), shown=len(shown), kept=len(keep))
        details: ChainDetails = self.account(ctx)
        details.main_chain = details.main_chain or format_chain(main)
        details.note_fallback(1, "global_entity_filtering", cause)
        if not final:
            raise _ToDirectGeneration(f"{cause}; no candidate has a name")
        evidence = self._evidence(ctx, topics, main, final)
        # Only what the LLM kept is counted: the unfiltered list shown is capped at max_gef_candidates.
        counted = self._count(question, ctx, final) if keep else None
        answers = [counted] if counted is not None else answer_items(ctx.kg, final, limit=self.config.max_answers)
        return Prediction(answers=answers, grounding=Grounding.SYNTHESIS, evidence=evidence)

    def _evidence(self, ctx: MethodContext, topics: list[str], main: Chain, answers: list[str]) -> list[list[str]]:
        """The chain's triples behind ``answers``; a KG error here costs the evidence, never the answers found."""
        try:
            return chain_evidence(ctx.kg, topics, main, answers, max_paths=self.config.max_evidence_paths)
        except KGError as exc:
            ctx.trace.add("evidence", error=f"{type(exc).__name__}: {exc}")
            return []

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        """Layer 2: chain-of-thought generation from the LLM alone (grounding: parametric)."""
        from kgqa.llm.structured import StructuredOutputError

        try:
            answers, reasoning = generate_answers(ctx.llm, self.asks.generate, question.text,
                                                  max_tokens=self.config.answer_tokens)
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        ctx.trace.add("fallback", layer=2, stage="direct_generation", cause=cause, reasoning=reasoning)
        self.account(ctx).note_fallback(2, "direct_generation", cause)
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC)
