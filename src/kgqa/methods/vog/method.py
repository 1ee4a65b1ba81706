# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""VoG (Verify-on-Graph): plan, retrieve, verify each step against the KG, revise the plan with a bandit-chosen context.

1. **Plan**: one call writes steps of Thought / Action (``Search[...]`` or ``Finish[answer; ...]``) / Predicted
   observation (:mod:`kgqa.methods.vog.plan`).
2. **Two-stage retrieval per Search step**: the relations of the current entities (both directions) -> the ones
   relevant to the step (``relation_selector``; above ``prefilter_above`` candidates an entropy-adaptive prefilter by
   embedding similarity keeps between 3 and 10, :func:`kgqa.steps.pruning.adaptive_width`); then the entities through
   the kept relations, selected 0/1 over at most 10 (``entity_selector``, the same prefilter above 10). The kept
   triples are the step's KG observation. A nameless CVT node is kept (it cannot be judged by name) and the
   observation shows its other facts, so a step that lands on a mediator (the paper's Costa Rica example) still says
   something the verifier can read, and an answer read from those facts is linked to the KG (grounding
   ``structured``, the evidence running from the topic through the mediator).
   A step that reaches nothing ends the search (nothing to verify, nowhere to go on from): no verification, no
   revision, the plan's Finish answers, as in the authors' code.
3. **Verification**: one call compares the predicted observation with the KG observation and replies JSON
   ``{reasoning, revise, revised_observation}`` (reasoning first); the second checker (``checker``) tests the
   prediction against the observation for contradiction; either one asks for a revision.
4. **Revision** (:mod:`kgqa.methods.vog.bandit`): a revision is **one LLM call** that writes the revised plan from the
   step that disagreed: that step restated as the graph showed it, then the steps still needed, then Finish. The UCB
   bandit picks its context: Local (the step's KG observation and the verifier's reading), Lookahead (plus the
   relations the reached entities open, the prefilter's 3 to 10 likeliest for the next step), Global (the whole plan
   and every verified observation). Its reward (four embedding similarities and the checker on the restated step,
   fused with the consistency of the candidate plans' answers) updates the bandit and ranks the candidates. At most
   ``max_revisions`` (4) candidates per disagreeing step; the loop stops at the first whose reward reaches
   ``reward_threshold`` (0.73), and the best is kept. What follows takes no further call: the step's KG observation
   stands (it is not searched or verified again), the walk goes on from the entities it reached, and the next step of
   the revised plan is retrieved and verified in turn; a revised plan that reaches Finish is the answer.
5. **Answer**: the final plan's Finish step names the answers (no call); names that are nodes the KG showed are linked
   to them (grounding ``structured``, evidence the paths to them), others stay names (``parametric``). Only a plan
   whose Finish names nothing (the oracle's first plan, an echoed placeholder, a plan without Finish) takes one answer
   call over the verified observations. With ``verification=False`` (the paper's w/o Verify+Revise ablation) the
   answer is therefore the first plan's Finish, linked to what the retrieval showed.

The question stops past ``max_calls`` (60) calls or ``max_steps`` (15) executed steps and answers from the plan as it
stands. The bandit's state and every arm choice are in the trace (``vog.bandit``); revisions per question and the arm
choices are statistics (``revisions``, ``arm_local`` / ``arm_lookahead`` / ``arm_global``) the run's summary averages.
Every reply is JSON validated against a model with one re-ask when unreadable (kgqa's rule for every step); an
unreadable verdict counts as "revise", an unreadable revision as an empty one (reward -0.1).

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| plan | one call: Thought / Action (Search[] or Finish[]) / Observation steps | one call, the same steps as JSON | no |
| relation retrieval | relations of the current entities both ways; SBERT entropy-adaptive prefilter (3-10) above 10; the LLM picks | same; `auto` ranks by embedding for an offline local model, `llm` is the paper's | yes: a 135M model cannot rank relations |
| entity retrieval | the LLM keeps entities 0/1 over at most 10 per relation, SBERT above 10 | same; nameless CVTs kept and shown by their facts | yes: the code shows a CVT as its bare id, which no model can read |
| walk back | the code drops the relation a path came by | `walk_back=auto`: the hop back is offered on a KG without named reverses (MetaQA) | yes: there the siblings are reachable no other way |
| verification | LLM JSON {Revise, Reason, Revised Observation} + DeBERTa-MNLI both ways | reasoning-first JSON; second checker a MiniLM cosine proxy below 0.4 (`checker=nli:MODEL` for a cross-encoder) | yes: no NLI model ships offline |
| empty observation | the code ends the search and answers from the plan | same | no |
| revision | one call per candidate plan, context from the bandit, rewriting the plan after the step that disagreed | one call; the reply restates the step, then the rest; the step is not searched again | no |
| candidates per disagreement | at most 4, the best by fused reward kept, stop at reward >= 0.73 | same (`max_revisions`, `reward_threshold`) | yes: the code's adaptive threshold beyond depth 3 is left out |
| context bandit | UCB with entropy, repeated-entity and diversity terms over local / lookahead / global; the code: c 1.4, a lookahead bonus by depth, streak penalties | same formula, c 1.4; untried arms local, lookahead, global; penalties 0.2 / 0.05 / 0.1 (the code's order and penalties differ, docs/vog.md) | yes: the paper leaves D of the lookahead bonus undefined; kgqa takes the plan steps after the current one |
| reward | five lightweight-model measures, weights unstated; the code four at 0.3 / 0.3 / 0.2 / 0.2 | validation, quality, alignment, coherence at 0.3 / 0.3 / 0.2 / 0.2, -0.5 on a checker contradiction, -0.1 an empty revision | yes: efficiency left out, validation in its place |
| reward fusion | lambda = 0.4 exp(-H) between local reward and answer consistency | same (the code sets lambda 0 at H = 0) | no |
| answer | the final plan's Finish[...] | same; a Finish that names nothing takes one answer call over the verified observations | yes: the code returns the empty text |
| limits | stop past 60 calls or 15 steps | same | no |
| temperature | 0.3 in the code | 0 | yes: greedy repeats and caches |
| reply budgets | 4,096 tokens a call | plan 256, verify 128, revise 256, answer 192 tokens; text fields at most 160 characters in the schema, plans at most 10 steps (the authors' prompt's bound) | yes: a small local model fills any budget (docs/vog.md) |
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kgqa.core import MethodContext, Prediction, Question
from kgqa.errors import KGError
from kgqa.llm.base import LLMError
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, Needs
from kgqa.methods.llm_only import answer_alone
from kgqa.methods.registry import register_method
from kgqa.methods.vog.loop import Observed, Revised, Verified, VoGDetails, VoGRun
from kgqa.methods.vog.plan import GENERATE, SIGNATURES, Plan, PlanStep, Verification
from kgqa.steps.entities import topics_in_kg
from kgqa.steps.pruning import PrunerChoice
from kgqa.steps.walks import WalkBack, walk_back_field

__all__ = ["Observed", "Plan", "PlanStep", "Revised", "Verification", "Verified", "VoG", "VoGConfig", "VoGDetails"]


class VoGConfig(MethodConfig):
    """VoG's settings, defaulting to the paper's code (UCB c 1.4, 4 revised plans per step, 60 calls, 15 steps)."""

    relation_selector: PrunerChoice = Field(default="auto", description="relation choice; auto: embedding for local "
                                                                        "models, llm otherwise")
    entity_selector: Literal["auto", "llm", "embedding"] = Field(default="auto", description="entity choice (0/1 by "
                                                                                            "the LLM over <= 10)")
    relation_width: int = Field(default=3, ge=1, description="relations kept per step")
    entity_width: int = Field(default=3, ge=1, description="entities kept per relation by the embedding selector")
    prefilter_above: int = Field(default=10, ge=3, description="candidates above which the entropy-adaptive "
                                                               "prefilter (3 to 10) applies")
    checker: str = Field(default="embedding", description="second checker: embedding[:THRESHOLD] | nli:MODEL")
    verification: bool = Field(default=True, description="False: the w/o verification ablation (no revisions)")
    fixed_arm: Literal["local", "lookahead", "global"] | None = Field(default=None, description="ablation: always "
                                                                                                 "this context")
    max_revisions: int = Field(default=4, ge=0, description="revised plans (one call each) per disagreeing step, the "
                                                            "best kept")
    reward_threshold: float = Field(default=0.73, description="a revised plan whose fused reward reaches this ends the "
                                                              "revisions of its step")
    max_calls: int = Field(default=60, ge=1, description="LLM calls per question at most")
    max_steps: int = Field(default=15, ge=1, description="plan steps executed per question at most")
    neighbour_limit: int = Field(default=200, ge=1)
    observation_lines: int = Field(default=20, ge=1, description="triples of a step's observation shown to the "
                                                                 "verifier and the reviser")
    walk_back: WalkBack = walk_back_field()
    plan_tokens: int = Field(default=256, ge=32)
    verify_tokens: int = Field(default=128, ge=16)
    revise_tokens: int = Field(default=256, ge=32)
    answer_tokens: int = Field(default=192, ge=16)
    max_answers: int = Field(default=20, ge=1)


@register_method("vog")
class VoG(KGQAMethod):
    """Verify-on-Graph (see the module docstring)."""

    name = "vog"
    summary = "Verify-on-Graph: plan, two-stage retrieval, verification against the KG, bandit-chosen revisions"
    Config: ClassVar[type[MethodConfig]] = VoGConfig
    Details = VoGDetails
    signatures = SIGNATURES
    config: VoGConfig

    def needs(self, llm: str | None = None) -> Needs:
        del llm  # the embedder serves the prefilter, the checker proxy and the reward in every setting
        return Needs(kg=True, llm=True, embedder=True)

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.details = VoGDetails()
        topics, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return self._direct(question, ctx, cause)
        try:
            return VoGRun(self.config, question, ctx, [t.id for t in topics], [t.name for t in topics],
                          self.account(ctx)).run()
        except (KGError, LLMError) as exc:
            return self._direct(question, ctx, f"{type(exc).__name__} during the search: {exc}")

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        self.account(ctx).fallback = cause
        return answer_alone(question, ctx, GENERATE, cause=cause, max_tokens=self.config.answer_tokens,
                            max_answers=self.config.max_answers)

    def explain(self, prediction: Prediction) -> Explanation:
        details: VoGDetails = self.details_of(prediction)
        lines = ["plan: " + " | ".join(details.plan)] if details.plan else []
        for step in details.steps:
            if isinstance(step, Observed):
                lines.append(f"step {step.index} {step.action}: {step.triples} triples")
            elif isinstance(step, Verified):
                lines.append(f"  verified: {'revise' if step.revise else 'consistent'}"
                             + (f" ({step.reason})" if step.reason else ""))
            else:
                reward = f", reward {step.reward}" if step.reward is not None else ""
                lines.append(f"  revision {step.revision} with {step.arm} context ({step.reason}{reward})")
        for label, cause in (("vog.limit", details.limit), ("fallback", details.fallback)):
            if cause:
                lines.append(f"{label}: {cause}")
        return Explanation(fields={"revisions": prediction.stats.get("revisions")}, lines=lines)
