"""CCoR (Compositional Chain-of-Relations) and its ablation CoR, after Liu, Zhou and Wang (arXiv 2608.22762).

Main chain (Sec. IV-B): relation-centric exploration from the topic entities; each popped chain is judged by two
hierarchical questions (is it correct and complete? have its entities reached the answer space?) into Forward, Backtrack,
Stop or Constraint. Stop and Constraint execute the chain on the KG, giving E_cand.

Constraint chain (Sec. IV-C): the LLM restates the unresolved constraint as a sub-question and picks its source among the
main chain's positions (the topic, an intermediate variable, or the candidates); the same engine explores from there with
Forward, Backtrack, Stop; on Stop the LLM picks a constraint target among the values the chain recalls and both chains
run jointly on the KG, giving E_con; E_final = E_cand intersected with E_con.

Fallback (Sec. IV-D): Global Entity Filtering by the LLM when the constraint chain fails (grounding ``synthesis``);
CoT direct generation when the main chain fails (grounding ``parametric``). Stage and cause are in the trace.

CoR (``cor``) is the ablation without the constraint chain: a Constraint action goes straight to Global Entity Filtering.

Where kgqa differs from the paper, and why:

* Temperature 0 (the paper uses 0.01, i.e. near-greedy) so runs repeat exactly and the request cache applies.
* The answer-space judgement sees a bounded view of the entities the chain reaches (a count and up to 5 names, nameless
  CVT nodes counted), because the paper's question "are the current target entities of the right type" needs some
  evidence of their type; intermediate entities are still never shown, named or pruned.
* One constraint chain per question, as in the paper's method description; a question with two constraints gets the
  second one only through the main chain or not at all.
* An empty E_final (the constraint chain ran but no candidate satisfied the target) counts as a constraint-chain failure
  and falls back to Global Entity Filtering, rather than answering nothing.
* A chain that reaches no entity at Stop/Constraint counts as a main-chain failure (direct generation).
* Relation pruning can be the LLM (the paper), an embedding scorer or a hybrid: ``pruner`` in the config.
* Depth: 3 by default and 4 for CWQ (the paper's setting); the iteration budget (``max_iterations``) is ours, so a
  confused model cannot loop: the paper states no such bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, ConstraintChain, format_chain, is_literal
from kgqa.llm.prompts import PromptBook
from kgqa.llm.structured import StructuredOutputError, ask_json
from kgqa.methods.base import AnswerItem, Grounding, MethodContext, Prediction, Question, register_method
from kgqa.methods.ccor.engine import Action, Judgement, RelationExplorer
from kgqa.steps.generate import generate_answers
from kgqa.steps.pruning import PruningConfig, RelationPruner
from kgqa.steps.relations import describe_chain, reached_view

PROMPTS = PromptBook.for_package("kgqa.methods.ccor")


class MainDecision(BaseModel):
    chain_status: Literal["complete", "inconsistent", "incomplete"]
    answer_space_reached: bool | None = None
    reason: str = ""


class ConstraintInit(BaseModel):
    constraint_query: str = Field(min_length=1)
    source_position: int = Field(ge=0)


class ConstraintDecision(BaseModel):
    chain_correct: bool
    target: int | None = None
    reason: str = ""


class FilterChoice(BaseModel):
    keep: list[int] = Field(default_factory=list)


@dataclass
class CCoRConfig:
    """Hyperparameters, defaulting to the paper's: top-k 3, depth 3 (4 on CWQ)."""

    constraint_chain: bool = True
    top_k: int = 3
    max_depth: int | None = None  # None: 4 for CWQ questions, 3 otherwise
    pruner: Literal["llm", "embedding", "hybrid"] = "llm"
    prefilter: int = 20
    max_iterations: int = 12
    backtracking: bool = True
    sample_names: int = 5
    max_options: int = 30  # recalled constraint values shown to the judge
    max_gef_candidates: int = 50
    max_answers: int = 100
    max_evidence_paths: int = 20
    extra: dict[str, object] = field(default_factory=dict)

    def depth_for(self, question: Question) -> int:
        if self.max_depth is not None:
            return self.max_depth
        return 4 if str(question.metadata.get("dataset", "")).lower().startswith("cwq") else 3


class CCoR:
    """See the module docstring."""

    def __init__(self, **config: object) -> None:
        try:
            self.config = CCoRConfig(**config)  # type: ignore[arg-type]
        except TypeError as exc:
            raise ConfigError(f"ccor: {exc}") from None
        self.name = "ccor" if self.config.constraint_chain else "cor"
        self.pruning = PruningConfig(kind=self.config.pruner, top_k=self.config.top_k, prefilter=self.config.prefilter)

    # -- the whole question ----------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        trace = ctx.trace
        kg = ctx.kg
        topics = [t.id for t in question.topic_entities if kg.has_entity(t.id)]
        topic_names = [t.name for t in question.topic_entities if t.id in topics]
        trace.add("start", method=self.name, topics=topics, missing_topics=[
            t.id for t in question.topic_entities if t.id not in topics])
        if not topics:
            return self._direct(question, ctx, "no topic entity of the question is in the KG")

        pruner = RelationPruner(self.pruning, llm=ctx.llm, embedder=ctx.embedder, prompts=PROMPTS,
                                step=f"{self.name}.prune")
        explorer = RelationExplorer(kg, pruner, topics=topics, max_depth=self.config.depth_for(question),
                                    max_iterations=self.config.max_iterations, trace=trace, label="main")
        outcome = explorer.run(question.text, topic_names, lambda chain, waiting: self._judge_main(
            question, topics, topic_names, chain, waiting, ctx), backtracking=self.config.backtracking)
        if outcome.chain is None or outcome.judgement is None:
            return self._direct(question, ctx, f"main chain failed: {outcome.failure}")

        main = outcome.chain
        candidates = kg.run_chain(topics, main, limit=self.config.max_answers * 10)
        trace.add("main.execute", chain=format_chain(main), candidates=len(candidates.entities),
                  truncated=candidates.truncated)
        if not candidates.entities:
            return self._direct(question, ctx, f"main chain {format_chain(main)} reaches no entity")

        if outcome.judgement.action is Action.STOP:
            return self._structured(question, ctx, topics, main, None, candidates.entities)
        if not self.config.constraint_chain:
            return self._global_filter(question, ctx, topics, main, candidates.entities, "cor: constraints go to GEF")
        return self._constraint(question, ctx, topics, topic_names, main, candidates.entities)

    # -- main chain reasoning --------------------------------------------------------------------------------------

    def _judge_main(self, question: Question, topics: list[str], topic_names: list[str], chain: Chain, waiting: int,
                    ctx: MethodContext) -> Judgement:
        reached = reached_view(ctx.kg, topics, chain, samples=self.config.sample_names)
        messages = PROMPTS.messages("main_reasoning", question=question.text, chain=describe_chain(topic_names, chain),
                                    reached=reached.describe(), alternatives=str(waiting))
        try:
            decision = ask_json(ctx.llm, messages, MainDecision, step=f"{self.name}.reason")
        except StructuredOutputError as exc:
            return Judgement(Action.BACKTRACK, f"unreadable judgement: {exc}")
        if reached.count == 0:
            # A chain that reaches nothing cannot hold the answer, whatever the judge says.
            return Judgement(Action.BACKTRACK, "the chain reaches no entity")
        if decision.chain_status == "complete":
            action = Action.STOP
        elif decision.chain_status == "inconsistent":
            action = Action.BACKTRACK
        else:
            action = Action.CONSTRAINT if decision.answer_space_reached else Action.FORWARD
        return Judgement(action, decision.reason)

    # -- constraint chain ------------------------------------------------------------------------------------------

    def _positions(self, ctx: MethodContext, topics: list[str], topic_names: list[str], main: Chain) -> str:
        lines = [f"0. the topic entities: {', '.join(topic_names)}"]
        for i in range(1, len(main) + 1):
            role = "the candidate answers" if i == len(main) else "intermediate entities"
            view = reached_view(ctx.kg, topics, main[:i], samples=3)
            lines.append(f"{i}. {role}, reached by {describe_chain(topic_names, main[:i])}: {view.describe()}")
        return "\n".join(lines)

    def _constraint(self, question: Question, ctx: MethodContext, topics: list[str], topic_names: list[str],
                    main: Chain, candidates: list[str]) -> Prediction:
        kg = ctx.kg
        messages = PROMPTS.messages("constraint_init", question=question.text,
                                    chain=describe_chain(topic_names, main),
                                    positions=self._positions(ctx, topics, topic_names, main))
        try:
            init = ask_json(ctx.llm, messages, ConstraintInit, step=f"{self.name}.constraint_init")
        except StructuredOutputError as exc:
            return self._global_filter(question, ctx, topics, main, candidates, f"constraint initialisation failed: {exc}")
        source = min(init.source_position, len(main))
        ctx.trace.add("constraint.init", constraint_query=init.constraint_query, source=source,
                      requested_source=init.source_position)

        source_label = [f"entities at position {source} of the main chain"]
        explorer = RelationExplorer(kg, RelationPruner(self.pruning, llm=ctx.llm, embedder=ctx.embedder, prompts=PROMPTS,
                                                       step=f"{self.name}.constraint_prune"),
                                    topics=topics, prefix=main[:source], max_depth=self.config.depth_for(question),
                                    max_iterations=self.config.max_iterations, trace=ctx.trace, label="constraint")
        targets: dict[tuple, str] = {}

        def judge(chain: Chain, waiting: int) -> Judgement:
            return self._judge_constraint(init.constraint_query, topics, main, source, source_label, chain, ctx, targets)

        outcome = explorer.run(init.constraint_query, source_label, judge,
                               prompt_context=f"(This chain checks a constraint of the question: {question.text})",
                               backtracking=self.config.backtracking)
        if outcome.chain is None:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       f"constraint chain failed: {outcome.failure}")
        constraint = ConstraintChain(source, outcome.chain, targets[outcome.chain])
        kept = kg.filter_by_constraint(topics, main, constraint, limit=len(candidates) + 1)
        allowed = set(kept.entities)
        final = [e for e in candidates if e in allowed]
        ctx.trace.add("constraint.execute", source=source, chain=format_chain(outcome.chain), target=constraint.target,
                      satisfied=len(kept.entities), final=len(final))
        if not final:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       "no candidate satisfies the constraint target")
        return self._structured(question, ctx, topics, main, constraint, final)

    def _judge_constraint(self, query: str, topics: list[str], main: Chain, source: int, source_label: list[str],
                          chain: Chain, ctx: MethodContext, targets: dict[tuple, str]) -> Judgement:
        recalled = ctx.kg.constraint_values(topics, main, ConstraintChain(source, chain),
                                            limit=self.config.max_options * 4)
        names = ctx.kg.names(recalled.entities)
        options = [e for e in recalled.entities if names.get(e)][: self.config.max_options]
        if not options:
            return Judgement(Action.FORWARD if recalled.entities else Action.BACKTRACK,
                             "the chain recalls only nameless nodes" if recalled.entities else "the chain recalls nothing")
        listing = "\n".join(f"{i}. {names[e]}" for i, e in enumerate(options, start=1))
        messages = PROMPTS.messages("constraint_reasoning", constraint_query=query,
                                    chain=describe_chain(source_label, chain), options=listing)
        try:
            decision = ask_json(ctx.llm, messages, ConstraintDecision, step=f"{self.name}.constraint_reason")
        except StructuredOutputError as exc:
            return Judgement(Action.BACKTRACK, f"unreadable judgement: {exc}")
        if not decision.chain_correct:
            return Judgement(Action.BACKTRACK, decision.reason)
        if decision.target is None or not 1 <= decision.target <= len(options):
            return Judgement(Action.FORWARD, decision.reason)
        target = options[decision.target - 1]
        targets[chain] = target
        return Judgement(Action.STOP, decision.reason, {"target": target, "target_name": names[target]})

    # -- answers and fallbacks -------------------------------------------------------------------------------------

    def _items(self, ctx: MethodContext, ids: list[str]) -> list[AnswerItem]:
        ids = ids[: self.config.max_answers]
        names = ctx.kg.names(ids)
        return [AnswerItem(id=None if is_literal(e) else e, name=names.get(e) or e) for e in ids]

    def _evidence(self, ctx: MethodContext, topics: list[str], main: Chain, answers: list[str]) -> list[list[str]]:
        result = ctx.kg.run_chain(topics, main, bindings=True, limit=1000)
        wanted = set(answers)
        evidence: list[list[str]] = []
        for path in result.paths or []:
            if path[-1] in wanted:
                for i, hop in enumerate(main):
                    head, tail = (path[i], path[i + 1]) if hop.direction.value == "out" else (path[i + 1], path[i])
                    triple = [head, hop.relation, tail]
                    if triple not in evidence:
                        evidence.append(triple)
            if len(evidence) >= self.config.max_evidence_paths * len(main):
                break
        return evidence

    def _structured(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                    constraint: ConstraintChain | None, final: list[str]) -> Prediction:
        ctx.trace.add("answer", grounding="structured", main_chain=format_chain(main),
                      constraint_chain=None if constraint is None else {
                          "source": constraint.source, "chain": format_chain(constraint.chain),
                          "target": constraint.target}, answers=len(final))
        evidence = self._evidence(ctx, topics, main, final)
        return Prediction(answers=self._items(ctx, final), grounding=Grounding.STRUCTURED, evidence=evidence,
                          trace=list(ctx.trace))

    def _global_filter(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                       candidates: list[str], cause: str) -> Prediction:
        """Layer 1: the LLM filters E_cand by the constraint it reads from the question (grounding: synthesis)."""
        shown = candidates[: self.config.max_gef_candidates]
        names = ctx.kg.names(shown)
        listing = "\n".join(f"{i}. {names.get(e) or e}" for i, e in enumerate(shown, start=1))
        messages = PROMPTS.messages("global_entity_filtering", question=question.text, candidates=listing)
        try:
            choice = ask_json(ctx.llm, messages, FilterChoice, step=f"{self.name}.gef")
            keep = [shown[i - 1] for i in dict.fromkeys(choice.keep) if 1 <= i <= len(shown)]
        except StructuredOutputError as exc:
            keep, cause = [], f"{cause}; filtering reply unreadable: {exc}"
        final = keep or shown  # an empty filter keeps the KG's candidates rather than answering nothing
        ctx.trace.add("fallback", layer=1, stage="global_entity_filtering", cause=cause, main_chain=format_chain(main),
                      candidates=len(candidates), kept=len(keep))
        return Prediction(answers=self._items(ctx, final), grounding=Grounding.SYNTHESIS,
                          evidence=self._evidence(ctx, topics, main, final), trace=list(ctx.trace))

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        """Layer 2: chain-of-thought generation from the LLM alone (grounding: parametric)."""
        try:
            answers, reasoning = generate_answers(ctx.llm, PROMPTS, "direct_generation", question.text, reasoning=True,
                                                  step=f"{self.name}.generate")
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        ctx.trace.add("fallback", layer=2, stage="direct_generation", cause=cause, reasoning=reasoning)
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC,
                          trace=list(ctx.trace))


@register_method("ccor")
def make_ccor(**config: object) -> CCoR:
    """CCoR with its constraint chain."""
    return CCoR(**config)


@register_method("cor")
def make_cor(**config: object) -> CCoR:
    """CoR: CCoR without the constraint chain (constraints through Global Entity Filtering)."""
    return CCoR(**{**config, "constraint_chain": False})
