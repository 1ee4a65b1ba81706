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
* Relation pruning can be the LLM (the paper), an embedding scorer or a hybrid: ``pruner`` in the config. Its default
  ``auto`` uses the embedding scorer with an offline local model (a 135M model cannot rank relations) and the LLM
  otherwise.
* Depth: 3 by default and 4 for CWQ (the paper's setting, given by the dataset's facts as ``max_depth``); the
  iteration budget (``max_iterations``) is ours, so a confused model cannot loop: the paper states no such bound.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from kgqa.core import AnswerItem, Grounding, MethodContext, Prediction, Question
from kgqa.kg.base import Chain, ConstraintChain, format_chain
from kgqa.llm.prompts import PromptBook
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, Needs
from kgqa.methods.llm_only import generate_answers
from kgqa.methods.registry import register_method
from kgqa.steps.answers import answer_items, chain_evidence, choose_candidates
from kgqa.steps.explore import Action, Judgement, RelationExplorer
from kgqa.steps.pruning import PrunerChoice, PruningConfig, RelationPruner, pruner_needs_embedder, resolve_pruner
from kgqa.steps.relations import describe_chain, reached_view
from kgqa.steps.reply import ask_reply

PROMPTS = PromptBook.for_package("kgqa.methods.ccor")
#: Depth when neither the config nor the dataset's facts (``max_depth`` in question metadata) say otherwise.
DEFAULT_DEPTH = 3


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


class CoRConfig(MethodConfig):
    """Hyperparameters, defaulting to the paper's: top-k 3, depth 3 (4 on CWQ, from the dataset's facts)."""

    top_k: int = Field(default=3, ge=1, description="relations kept per pruning step (the paper's k)")
    max_depth: int | None = Field(default=None, ge=1, description="chain depth; None: the dataset's max_depth, else 3")
    pruner: PrunerChoice = Field(default="auto", description="relation scorer; auto: embedding for local models, "
                                                             "llm otherwise")
    prefilter: int = Field(default=20, ge=1, description="hybrid pruner: candidates the embedding scorer passes on")
    max_iterations: int = Field(default=12, ge=1, description="judgements per exploration (ours; the paper has none)")
    backtracking: bool = Field(default=True, description="False: the w/o relation backtrack ablation")
    sample_names: int = Field(default=5, ge=0, description="names of reached entities shown to the judge")
    max_options: int = Field(default=30, ge=1, description="recalled constraint values shown to the judge")
    max_gef_candidates: int = Field(default=50, ge=1, description="candidates listed for Global Entity Filtering")
    max_answers: int = Field(default=100, ge=1, description="answers returned at most")
    max_evidence_paths: int = Field(default=20, ge=1, description="paths kept as evidence")

    def depth_for(self, question: Question) -> int:
        if self.max_depth is not None:
            return self.max_depth
        depth = question.metadata.get("max_depth")
        return int(depth) if isinstance(depth, int) and depth >= 1 else DEFAULT_DEPTH


class CCoRConfig(CoRConfig):
    """CCoR's settings: CoR's, the constraint chain on by default."""

    constraint_chain: bool = Field(default=True, description="False: CoR (constraints by Global Entity Filtering)")


@register_method("ccor")
class CCoR(KGQAMethod):
    """CCoR with its constraint chain (see the module docstring)."""

    name = "ccor"
    summary = "Compositional Chain-of-Relations: relation-centric main chain + constraint chain executed on the KG"
    Config: ClassVar[type[MethodConfig]] = CCoRConfig
    config: CoRConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self.constraint_chain = bool(getattr(self.config, "constraint_chain", False))
        self.name = "ccor" if self.constraint_chain else "cor"

    def needs(self, llm: str | None = None) -> Needs:
        # The LLM's spec decides what "auto" pruning means, so the embedder is needed only where it will be used.
        return Needs(kg=True, llm=True, embedder=pruner_needs_embedder(resolve_pruner(self.config.pruner, llm)))

    def _pruning(self, ctx: MethodContext) -> PruningConfig:
        kind = resolve_pruner(self.config.pruner, getattr(ctx.llm, "name", None))
        return PruningConfig(kind=kind, top_k=self.config.top_k, prefilter=self.config.prefilter)

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

        pruning = self._pruning(ctx)
        pruner = RelationPruner(pruning, llm=ctx.llm, embedder=ctx.embedder, prompts=PROMPTS, step=f"{self.name}.prune")
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
            return self._structured(ctx, topics, main, None, candidates.entities)
        if not self.constraint_chain:
            return self._global_filter(question, ctx, topics, main, candidates.entities, "cor: constraints go to GEF")
        return self._constraint(question, ctx, topics, topic_names, main, candidates.entities, pruning)

    def explain(self, prediction: Prediction) -> Explanation:
        """The chains behind the answer: main chain, constraint chain (source, chain, target), and any fallback."""
        answer = next((e for e in prediction.trace if e.get("step") == "answer"), None)
        fallback = next((e for e in prediction.trace if e.get("step") == "fallback"), None)
        main = (answer or {}).get("main_chain") or (fallback or {}).get("main_chain")
        constraint = (answer or {}).get("constraint_chain")
        fields: dict[str, Any] = {
            "main_chain": main, "constraint_chain": constraint,
            "fallback": None if fallback is None else {"layer": fallback.get("layer"), "stage": fallback.get("stage"),
                                                       "cause": fallback.get("cause")}}
        lines = [f"main chain: {main or '(none)'}",
                 "constraint chain: " + (f"from position {constraint['source']}: {constraint['chain']} = "
                                         f"{constraint['target']}" if constraint else "(none)")]
        if fallback is not None:
            lines.append(f"fallback: layer {fallback.get('layer')} ({fallback.get('stage')}): {fallback.get('cause')}")
        return Explanation(fields=fields, lines=lines)

    # -- main chain reasoning --------------------------------------------------------------------------------------

    def _judge_main(self, question: Question, topics: list[str], topic_names: list[str], chain: Chain, waiting: int,
                    ctx: MethodContext) -> Judgement:
        reached = reached_view(ctx.kg, topics, chain, samples=self.config.sample_names)
        reply = ask_reply(ctx.llm, PROMPTS, "main_reasoning", MainDecision, step=f"{self.name}.reason",
                          question=question.text, chain=describe_chain(topic_names, chain), reached=reached.describe(),
                          alternatives=str(waiting))
        if not reply.ok or reply.value is None:
            return Judgement(Action.BACKTRACK, f"unreadable judgement: {reply.failure}")
        decision = reply.value
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
                    main: Chain, candidates: list[str], pruning: PruningConfig) -> Prediction:
        kg = ctx.kg
        reply = ask_reply(ctx.llm, PROMPTS, "constraint_init", ConstraintInit, step=f"{self.name}.constraint_init",
                          question=question.text, chain=describe_chain(topic_names, main),
                          positions=self._positions(ctx, topics, topic_names, main))
        if not reply.ok or reply.value is None:
            return self._global_filter(question, ctx, topics, main, candidates,
                                       f"constraint initialisation failed: {reply.failure}")
        init = reply.value
        source = min(init.source_position, len(main))
        ctx.trace.add("constraint.init", constraint_query=init.constraint_query, source=source,
                      requested_source=init.source_position)

        source_label = [f"entities at position {source} of the main chain"]
        explorer = RelationExplorer(kg, RelationPruner(pruning, llm=ctx.llm, embedder=ctx.embedder, prompts=PROMPTS,
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
        return self._structured(ctx, topics, main, constraint, final)

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
        reply = ask_reply(ctx.llm, PROMPTS, "constraint_reasoning", ConstraintDecision,
                          step=f"{self.name}.constraint_reason", constraint_query=query,
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

    def _structured(self, ctx: MethodContext, topics: list[str], main: Chain, constraint: ConstraintChain | None,
                    final: list[str]) -> Prediction:
        ctx.trace.add("answer", grounding="structured", main_chain=format_chain(main),
                      constraint_chain=None if constraint is None else {
                          "source": constraint.source, "chain": format_chain(constraint.chain),
                          "target": constraint.target}, answers=len(final))
        return Prediction(answers=answer_items(ctx.kg, final, limit=self.config.max_answers),
                          grounding=Grounding.STRUCTURED,
                          evidence=chain_evidence(ctx.kg, topics, main, final, max_paths=self.config.max_evidence_paths))

    def _global_filter(self, question: Question, ctx: MethodContext, topics: list[str], main: Chain,
                       candidates: list[str], cause: str) -> Prediction:
        """Layer 1: the LLM filters E_cand by the constraint it reads from the question (grounding: synthesis)."""
        shown = candidates[: self.config.max_gef_candidates]
        chosen = choose_candidates(ctx.llm, PROMPTS, "global_entity_filtering", question.text, candidates,
                                   ctx.kg.names(shown), max_shown=self.config.max_gef_candidates, step=f"{self.name}.gef")
        keep = chosen.value.kept if chosen.value is not None else []
        if not chosen.ok:
            cause = f"{cause}; filtering reply unreadable: {chosen.failure}"
        final = keep or shown  # an empty filter keeps the KG's candidates rather than answering nothing
        ctx.trace.add("fallback", layer=1, stage="global_entity_filtering", cause=cause, main_chain=format_chain(main),
                      candidates=len(candidates), kept=len(keep))
        return Prediction(answers=answer_items(ctx.kg, final, limit=self.config.max_answers),
                          grounding=Grounding.SYNTHESIS,
                          evidence=chain_evidence(ctx.kg, topics, main, final, max_paths=self.config.max_evidence_paths))

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        """Layer 2: chain-of-thought generation from the LLM alone (grounding: parametric)."""
        from kgqa.llm.structured import StructuredOutputError

        try:
            answers, reasoning = generate_answers(ctx.llm, PROMPTS, "direct_generation", question.text, reasoning=True,
                                                  step=f"{self.name}.generate")
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        ctx.trace.add("fallback", layer=2, stage="direct_generation", cause=cause, reasoning=reasoning)
        return Prediction(answers=[AnswerItem(id=None, name=a) for a in answers], grounding=Grounding.PARAMETRIC)


@register_method("cor")
class CoR(CCoR):
    """CoR: CCoR without the constraint chain (constraints through Global Entity Filtering)."""

    name = "cor"
    summary = "Chain-of-Relations: CCoR's ablation without the constraint chain (constraints by LLM filtering)"
    Config = CoRConfig
