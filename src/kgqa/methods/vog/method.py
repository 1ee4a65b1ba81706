"""VoG (Verify-on-Graph): plan, retrieve, verify each step against the KG, revise with a bandit-chosen context.

1. **Plan**: one call writes steps of Thought / Action (``Search[...]`` or ``Finish[...]``) / Predicted observation.
2. **Two-stage retrieval per step**: the relations of the current entities (both directions) -> the ones relevant to
   the step's action (``relation_selector``; above ``prefilter_above`` candidates an entropy-adaptive prefilter by
   embedding similarity keeps between 3 and 10, :func:`kgqa.steps.pruning.adaptive_width`); then the entities through
   the kept relations, selected 0/1 over at most 10 (``entity_selector``, the same prefilter above 10). The kept
   triples are the step's KG observation. A nameless CVT node is kept (it cannot be judged by name) and the
   observation shows its other facts, so a step that lands on a mediator (the paper's Costa Rica example) still
   says something the verifier can read.
3. **Verification**: one call compares the predicted observation with the KG observation and replies JSON
   ``{revise, reason, revised_observation}``; the second checker (``checker``) tests the prediction against the
   observation for contradiction; either one asks for a revision. An empty observation always does.
4. **Revision with a context bandit** (:mod:`kgqa.methods.vog.bandit`): arms Local (the step's KG observation), Lookahead
   (plus the relations the reached entities open), Global (the whole plan and every observation so far); UCB
   with the paper's bonuses and penalties; the revision rewrites the plan from the current step, which is retrieved
   and verified again; its reward (four embedding similarities, the checker, an empty revision) fused with the
   consistency of the candidate plans' answers updates the bandit. At most ``max_revisions`` (4) per step; the
   question stops past ``max_calls`` (60) calls or ``max_steps`` (15) executed steps.
5. **Answer** from the verified observations: one call; answers that are nodes the KG showed are linked to them,
   grounding ``structured`` (the issue's rule: the answer entity was observed on the KG), ``parametric`` otherwise.

The bandit's state and every arm choice are in the trace (``vog.bandit``); revisions per question and the arm
choices are statistics (``revisions``, ``arm_local`` / ``arm_lookahead`` / ``arm_global``) the run's summary averages.

Where kgqa differs from the paper and its code, and why:

* ``walk_back`` (``auto``): The reference code drops the relation a path came by, and on Freebase a path still reaches the
  siblings (a director's other films) by the relation's named reverse. On a KG that names no reverses (MetaQA's KB)
  that leaves no way there, so there the hop back is offered, never to the node just left
  (:func:`kgqa.steps.walks.walks_back`; ``never`` is the code's behaviour everywhere).
* The second checker: the paper uses DeBERTa-MNLI in both directions, which no offline package ships. The default is
  an embedding proxy (contradiction when prediction and observation are dissimilar, ``checker=embedding``); any
  cross-encoder NLI model can be named (``checker=nli:MODEL``), the paper's option.
* Relation and entity selection use kgqa's shared scorers: ``auto`` is the embedding scorer for an offline local
  model (a 135M model cannot rank relations) and the LLM otherwise; the LLM names relations (top ``relation_width``)
  and keeps entities by number (0/1 over at most 10), as VoG.
* The reward's fifth measure in the paper (efficiency: repeated or overlapping steps) is left out, as in the authors'
  code's four weights (0.3 / 0.3 / 0.2 / 0.2); ``D`` in the Lookahead bonus is the number of plan steps after the
  current one (the paper does not define it).
* A revision rewrites the plan from the current step (which is then retrieved and verified again), so "at most 4
  revisions per step" bounds a loop on one step; the paper rewrites from the next step.
* Every reply is JSON validated against a model, with a budget per step; an unreadable verification counts as
  "revise" (the step is not trusted), an unreadable revision as an empty revision.
* Temperature 0 on every call (the paper's code does not state one for VoG; greedy repeats and caches).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.errors import KGError
from kgqa.kg.base import Hop, KnowledgeGraph
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply, is_placeholder
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs
from kgqa.methods.llm_only import ReasonedAnswer, answer_alone, answer_from_evidence, generate_answers
from kgqa.methods.registry import register_method
from kgqa.steps.answers import FilterChoice, choose_candidates, keep_gold_candidates
from kgqa.steps.entities import resolve_entity_scorer, topics_in_kg
from kgqa.steps.losses import note_entities, note_relations, note_stop
from kgqa.steps.pruning import (
    PrunerChoice,
    PruningConfig,
    RelationChoice,
    RelationPruner,
    adaptive_width,
    choose_gold_relations,
    resolve_pruner,
    similarity_order,
)
from kgqa.steps.relations import describe_hop, verbalize_relation
from kgqa.steps.reply import BudgetedModel, ask_reply
from kgqa.steps.walks import (
    WalkBack,
    WalkPath,
    back_hop_to_skip,
    entity_hops,
    hop_neighbours,
    link_answers,
    linked_nodes,
    path_evidence,
    verbalize_triples,
    walk_back_field,
)

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

PROMPTS = PromptBook.for_package("kgqa.methods.vog")
_ACTION_RE = re.compile(r"^\s*(Search|Finish)\s*\[(.*)\]\s*$", re.S | re.I)
_OPEN_ACTION_RE = re.compile(r"^\s*(Search|Finish)\s*\[[^\]]*$", re.S | re.I)


class PlanStep(Reply):
    thought: str = ""
    action: str = Field(description="Search[what to look up] or Finish[the answer]")
    predicted: str = Field(default="", description="what the KG should show for this step")

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        text = str(value).strip()
        if _OPEN_ACTION_RE.match(text) and not _ACTION_RE.match(text):
            text += "]"  # "Finish[..." cut off before its bracket is still a Finish
        return text if _ACTION_RE.match(text) else f"Search[{text}]"

    @field_validator("thought", "predicted", mode="before")
    @classmethod
    def _no_placeholder(cls, value: Any) -> Any:
        return "" if value is None or is_placeholder(str(value)) else value

    @property
    def kind(self) -> str:
        found = _ACTION_RE.match(self.action)
        return found.group(1).lower() if found else "search"

    @property
    def target(self) -> str:
        """What the action names; "" when it is an echoed format placeholder ("Search[...]")."""
        found = _ACTION_RE.match(self.action)
        text = found.group(2).strip() if found else self.action
        return "" if is_placeholder(text) else text

    @property
    def empty(self) -> bool:
        """Nothing but the reply format echoed back: no target, no thought, no prediction."""
        return not (self.target or self.thought.strip() or self.predicted.strip())

    def render(self) -> str:
        return f"Thought: {self.thought}\nAction: {self.action}\nPredicted observation: {self.predicted}"


class Plan(Reply):
    steps: list[PlanStep]

    @field_validator("steps")
    @classmethod
    def _drop_empty(cls, steps: list[PlanStep]) -> list[PlanStep]:
        # The 135M model's plans were mostly "Search[...]" / "Finish[...]" copied from the format (e2 dev at 5a6d306:
        # 13 such steps on one question, each retrieved, verified and revised 4 times, 60 calls for nothing).
        return [step for step in steps if not step.empty]


class Verification(Reply):
    revise: bool
    reason: str = ""
    revised_observation: str = ""


def _gold_steps(ask: OracleAsk, start: int = 0) -> list[dict[str, str]]:
    """The oracle's plan from gold hop ``start`` on: one Search per hop of the (first) gold chain, then Finish (the
    answer is not known before the graph shows it, so Finish names none)."""
    chain = ask.gold.chains[0] if ask.gold.chains else ()
    steps = [{"thought": f"Follow {relation}{' backwards' if backward else ''}.", "action": f"Search[{relation}]",
              "predicted": ""} for relation, backward in chain[start:]]
    return [*steps, {"thought": "Answer from what the graph showed.", "action": "Finish[]", "predicted": ""}]


def _oracle_plan(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's plan: the gold chain's hops as searches, then Finish."""
    return {"steps": _gold_steps(ask)}


def _oracle_revision(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's revision: the gold plan again from the hop the disagreeing step searched for."""
    current = str(ask.inputs.get("current", ""))
    chain = ask.gold.chains[0] if ask.gold.chains else ()
    start = next((i for i, (relation, _) in enumerate(chain) if f"Search[{relation}]" in current), 0)
    return {"steps": _gold_steps(ask, start)}


def _oracle_verification(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's verification: consistent when the observation shows a node of a gold walk, else revise."""
    observation = str(ask.inputs.get("observation", ""))
    revise = ask.judge(not ask.on_path(observation))
    return {"revise": revise, "reason": "the graph shows nothing on the way to the answer" if revise else
            "the graph shows the way on", "revised_observation": ""}


PLAN = Signature(PROMPTS, "plan", Plan, "vog.plan", _oracle_plan)
RELATIONS = Signature(PROMPTS, "prune_relations", RelationChoice, "vog.relations", choose_gold_relations)
SELECT_ENTITIES = Signature(PROMPTS, "select_entities", FilterChoice, "vog.entities", keep_gold_candidates)
VERIFY = Signature(PROMPTS, "verify", Verification, "vog.verify", _oracle_verification)
REVISE = Signature(PROMPTS, "revise", Plan, "vog.revise", _oracle_revision)
ANSWER = Signature(PROMPTS, "answer", ReasonedAnswer, "vog.answer", answer_from_evidence)
GENERATE = Signature(PROMPTS, "direct_generation", ReasonedAnswer, "vog.generate", answer_from_evidence)


class Observed(BaseModel):
    """A plan step retrieved: its action and how many triples the KG showed for it."""

    kind: Literal["observed"] = "observed"
    index: int
    action: str
    triples: int


class Verified(BaseModel):
    """The verification of a step's observation against its prediction."""

    kind: Literal["verified"] = "verified"
    index: int
    revise: bool
    reason: str | None = None


class Revised(BaseModel):
    """A revision of the plan from a step on, with the context the bandit chose for it."""

    kind: Literal["revised"] = "revised"
    index: int
    revision: int
    arm: str
    reason: str


class VoGDetails(MethodDetails):
    plan: list[str] = Field(default_factory=list)
    #: what happened to the plan's steps, in order
    steps: list[Annotated[Observed | Verified | Revised, Field(discriminator="kind")]] = Field(default_factory=list)
    #: the call or step limit that ended the loop
    limit: str | None = None
    fallback: str | None = None


class VoGConfig(MethodConfig):
    """VoG's settings, defaulting to the paper's code (UCB c 1.4, 4 revisions per step, 60 calls, 15 steps)."""

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
    max_revisions: int = Field(default=4, ge=0, description="revisions per step")
    max_calls: int = Field(default=60, ge=1, description="LLM calls per question at most")
    max_steps: int = Field(default=15, ge=1, description="plan steps executed per question at most")
    neighbour_limit: int = Field(default=200, ge=1)
    walk_back: WalkBack = walk_back_field()
    plan_tokens: int = Field(default=256, ge=32)
    verify_tokens: int = Field(default=96, ge=16)
    revise_tokens: int = Field(default=256, ge=32)
    answer_tokens: int = Field(default=192, ge=16)
    max_answers: int = Field(default=20, ge=1)


class _Budget(Exception):
    """The call or step limit was reached: answer from what is verified so far."""




@register_method("vog")
class VoG(KGQAMethod):
    """Verify-on-Graph (see the module docstring)."""

    name = "vog"
    summary = "Verify-on-Graph: plan, two-stage retrieval, verification against the KG, bandit-chosen revisions"
    Config: ClassVar[type[MethodConfig]] = VoGConfig
    Details = VoGDetails
    signatures = (PLAN, RELATIONS, SELECT_ENTITIES, VERIFY, REVISE, ANSWER, GENERATE)
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
            return _Run(self.config, question, ctx, [t.id for t in topics], [t.name for t in topics],
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
                lines.append(f"  revision {step.revision} with {step.arm} context ({step.reason})")
        for label, cause in (("vog.limit", details.limit), ("fallback", details.fallback)):
            if cause:
                lines.append(f"{label}: {cause}")
        return Explanation(fields={"revisions": prediction.stats.get("revisions")}, lines=lines)


class _Run:
    """One question's plan-retrieve-verify-revise loop (state kept here, not on the method, so runs are threadsafe)."""

    def __init__(self, cfg: VoGConfig, question: Question, ctx: MethodContext, topics: list[str],
                 topic_names: list[str], details: VoGDetails) -> None:
        from kgqa.methods.vog.bandit import BanditSettings, ContextBandit
        from kgqa.methods.vog.contradiction import load_checker

        # Every call goes through the budget (re-asks included); the answer call gets one call of its own on top.
        self.llm = BudgetedModel(ctx.llm, cfg.max_calls - 1,
                                 lambda _: _Budget(f"{cfg.max_calls} calls made (one kept for the answer)"))
        self.cfg, self.question, self.ctx = cfg, question, ctx
        self.details = details
        self.kg: KnowledgeGraph = ctx.kg
        self.topics, self.topic_names = topics, topic_names
        self.bandit = ContextBandit(BanditSettings(fixed_arm=cfg.fixed_arm))
        self.checker = load_checker(cfg.checker, embedder=ctx.embedder)
        self._repeats = False
        self._last_observation = ""
        self.observations: list[tuple[PlanStep, list[str]]] = []  # verified steps and their observations in words
        self.paths: list[WalkPath] = []  # every path kept, for evidence
        # the facts of mediator (CVT) nodes each observation showed: answers may be read from them too
        self.facts: list[tuple[str, str, str]] = []
        self._step_facts: list[tuple[str, str, str]] = []
        self.seen_entities: set[str] = set()
        self.candidate_answers: list[list[str]] = []
        self.revisions = 0
        self.arms: dict[str, int] = {"local": 0, "lookahead": 0, "global": 0}
        llm_name = getattr(ctx.llm, "name", None)
        self.relation_kind = resolve_pruner(cfg.relation_selector, llm_name)
        self.entity_kind = resolve_entity_scorer(cfg.entity_selector, llm_name)

    # -- the loop --------------------------------------------------------------------------------------------------

    def run(self) -> Prediction:
        cfg = self.cfg
        plan = self._plan()
        frontier = [WalkPath.start(t) for t in self.topics]
        index = 0
        executed = 0
        try:
            while index < len(plan):
                step = plan[index]
                if step.kind == "finish":
                    note_stop("vog.finish", "judge_stop")
                    break
                executed += 1
                if executed > cfg.max_steps:
                    raise _Budget(f"{cfg.max_steps} steps executed")
                kept, lines = self._retrieve(step, frontier, index)
                revisions_here = 0
                while cfg.verification and self._needs_revision(step, lines, index):
                    if revisions_here >= cfg.max_revisions:
                        self.ctx.trace.add("vog.revision_limit", index=index, revisions=revisions_here)
                        break
                    revised = self._revise(plan, index, lines, kept)
                    revisions_here += 1
                    if revised is None:
                        continue  # an empty revision: the bandit was told; try again within the limit
                    plan = plan[:index] + revised
                    step = plan[index]
                    if step.kind == "finish":
                        break
                    kept, lines = self._retrieve(step, frontier, index)
                if step.kind == "finish":
                    note_stop("vog.finish", "judge_stop")
                    break
                self.observations.append((step, lines))
                self.facts += self._step_facts
                if kept:
                    self.paths.extend(kept)
                    frontier = kept
                index += 1
            else:
                note_stop("vog.plan_end", "judge_stop")  # the plan ended without a Finish step
        except _Budget as stop:
            self.ctx.trace.add("vog.limit", cause=str(stop))
            self.details.limit = str(stop)
            note_stop("vog.limit", "budget_limit")
        return self._answer()

    def _ask(self, signature: Signature, max_tokens: int, **values: Any) -> Any:
        return ask_reply(self.llm, signature, max_tokens=max_tokens, seed=self.ctx.seed, question=self.question.text,
                         **values)

    def _plan(self) -> list[PlanStep]:
        reply = self._ask(PLAN, self.cfg.plan_tokens, topics=", ".join(self.topic_names))
        steps = list(reply.value.steps) if reply.ok and reply.value else []
        event = self.ctx.trace.add("vog.plan", actions=[s.action for s in steps])
        self.details.plan = [s.action for s in steps]
        if not steps:
            event["failure"] = reply.failure or "no step"
            steps = [PlanStep(thought="", action=f"Search[{self.question.text}]", predicted="")]
        self._note_candidate(steps)
        return steps

    # -- retrieval -------------------------------------------------------------------------------------------------

    def _retrieve(self, step: PlanStep, frontier: list[WalkPath], index: int) -> tuple[list[WalkPath], list[str]]:
        """Relations, then entities, for one step: the paths kept and the observation in words."""
        query = f"{step.target} {step.thought}".strip() or step.predicted or self.question.text
        hops = list(dict.fromkeys(h for p in frontier
                                  for h in entity_hops(self.kg, p.end, exclude=back_hop_to_skip(self.kg, p,
                                                                                                self.cfg.walk_back))))
        names = self.kg.names(list(dict.fromkeys(p.end for p in frontier)))
        chosen = self._relations(query, hops, [n for n in dict.fromkeys(names.values()) if n][:5] or ["(mediator)"],
                                 [p.end for p in frontier])
        kept: list[WalkPath] = []
        for hop in chosen:
            extensions = [p.extend(hop, n) for p in frontier
                          for n in hop_neighbours(self.kg, p.end, hop, limit=self.cfg.neighbour_limit,
                                                  visited=p.nodes)]
            kept += self._entities(query, extensions)
        triples = [p.triples[-1] for p in kept]
        self._step_facts = self._mediator_facts(kept)
        triples += self._step_facts
        lines = verbalize_triples(self.kg, list(dict.fromkeys(triples)))
        repeats = {p.end for p in kept} & self.seen_entities
        self.seen_entities.update(p.end for p in kept)
        self.ctx.trace.add("vog.observe", index=index, action=step.action, relations=[describe_hop(h) for h in chosen],
                           candidates=len(hops), observation=lines[:30], repeated=len(repeats))
        self.details.steps.append(Observed(index=index, action=step.action, triples=len(lines[:30])))
        self._repeats = bool(repeats)
        return kept, lines

    def _relations(self, query: str, hops: list[Hop], where: list[str], ends: list[str]) -> list[Hop]:
        """The relations kept of ``hops`` (leaving the frontier ``ends``, named ``where`` in the prompt)."""
        if not hops:
            return []
        shown = hops
        if len(hops) > self.cfg.prefilter_above:
            order, sims = similarity_order(self.ctx.embedder, query, [verbalize_relation(h) for h in hops])
            width = adaptive_width(sims)
            shown = [hops[i] for i in order[:width]]
            note_relations("vog.prefilter", hops, shown, at=ends)
        pruner = RelationPruner(PruningConfig(kind=self.relation_kind, top_k=min(self.cfg.relation_width, len(shown)),
                                              prefilter=max(len(shown), 1), fill=False),
                                llm=self.llm, embedder=self.ctx.embedder, signature=RELATIONS, seed=self.ctx.seed)
        result = pruner.prune(query, where, (), shown, trace=self.ctx.trace, at=ends)
        return [s.hop for s in result.value or []]

    def _entities(self, query: str, extensions: list[WalkPath]) -> list[WalkPath]:
        """Named candidates selected by the LLM (0/1 over at most 10) or by similarity; nameless CVTs kept."""
        if not extensions:
            return []
        names = self.kg.names([p.end for p in extensions])
        named = [p for p in extensions if names.get(p.end)]
        mediators = [p for p in extensions if not names.get(p.end)]
        note_entities("vog.mediators", [p.end for p in mediators], [p.end for p in mediators[:10]])
        mediators = mediators[:10]
        shown = named
        if len(named) > self.cfg.prefilter_above:
            order, sims = similarity_order(self.ctx.embedder, query, [names.get(p.end) or "" for p in named])
            width = adaptive_width(sims)
            shown = [named[i] for i in order[:width]]
            note_entities("vog.prefilter_entities", [p.end for p in named], [p.end for p in shown])
        if len(shown) <= 1 or self.entity_kind == "embedding":
            if len(shown) > self.cfg.entity_width:
                order, _ = similarity_order(self.ctx.embedder, query, [names.get(p.end) or "" for p in shown])
                note_entities("vog.entities", [p.end for p in shown], [shown[i].end for i in order[: self.cfg.entity_width]])
                shown = [shown[i] for i in order[: self.cfg.entity_width]]
            return shown + mediators
        ids = [p.end for p in shown]
        chosen = choose_candidates(self.llm, SELECT_ENTITIES, query, ids, names, max_shown=10)
        keep = set(chosen.value.kept if chosen.value is not None else [])
        if not keep:
            keep = set(ids[: self.cfg.entity_width])  # an empty or unreadable choice keeps the likeliest few
        note_entities("vog.entities", ids, keep)
        return [p for p in shown if p.end in keep] + mediators

    def _mediator_facts(self, kept: list[WalkPath]) -> list[tuple[str, str, str]]:
        """For a nameless CVT reached, its other facts (up to 5), so the observation reads as something."""
        facts: list[tuple[str, str, str]] = []
        names = self.kg.names([p.end for p in kept])
        for path in kept:
            if names.get(path.end):
                continue
            for hop in entity_hops(self.kg, path.end, exclude=path.back_hop())[:5]:
                for node in hop_neighbours(self.kg, path.end, hop, limit=1, visited=path.nodes):
                    facts.append(path.extend(hop, node).triples[-1])
        return facts

    # -- verification and revision ---------------------------------------------------------------------------------

    def _needs_revision(self, step: PlanStep, lines: list[str], index: int) -> bool:
        observation = "\n".join(lines) or "(nothing found)"
        reply = self._ask(VERIFY, self.cfg.verify_tokens, action=step.action,
                          predicted=step.predicted or "(no prediction)", observation=observation)
        llm_says = (not reply.ok or reply.value is None) or reply.value.revise
        checked = self.checker.check(observation, step.predicted) if lines and step.predicted else None
        revise = not lines or llm_says or bool(checked and checked.contradiction)
        self.ctx.trace.add("vog.verify", index=index, revise=revise, llm_revise=llm_says,
                           reason=(reply.value.reason if reply.ok and reply.value else reply.failure),
                           checker=None if checked is None else {"contradiction": checked.contradiction,
                                                                 "score": round(checked.score, 4),
                                                                 "detail": checked.detail},
                           empty=not lines)
        self.details.steps.append(Verified(index=index, revise=revise,
                                           reason=reply.value.reason if reply.ok and reply.value else reply.failure))
        self._last_observation = observation
        return revise

    def _revise(self, plan: list[PlanStep], index: int, lines: list[str], kept: list[WalkPath]) -> list[PlanStep] | None:
        from kgqa.methods.vog.bandit import answer_consistency, fuse_reward, normalized_entropy, revision_reward, reward_parts

        entropy = normalized_entropy(self.candidate_answers)
        choice = self.bandit.choose(entropy=entropy, entity_repeats=self._repeats,
                                    steps_ahead=max(len(plan) - index - 1, 0))
        context = self._context(choice.arm, plan, index, lines, kept)
        reply = self._ask(REVISE, self.cfg.revise_tokens, context=context,
                          current=plan[index].render())
        steps = list(reply.value.steps) if reply.ok and reply.value else []
        self.revisions += 1
        self.arms[choice.arm] += 1
        observation = "\n".join(lines) or "(nothing found)"
        if not steps:
            reward = revision_reward(None, checker_failed=False)
        else:
            first = steps[0]
            parts = reward_parts(self.ctx.embedder, kg_observation=observation, revised_observation=first.predicted,
                                 revised_step=first.render(), revised_action=first.action,
                                 revised_thought=first.thought, question=self.question.text)
            failed = bool(lines) and bool(first.predicted) and self.checker.check(observation, first.predicted).contradiction
            local = revision_reward(parts, checker_failed=failed)
            self._note_candidate(plan[:index] + steps)
            answers = _final_answers(plan[:index] + steps)
            reward = fuse_reward(local, answer_consistency(answers, self.candidate_answers), entropy)
        self.bandit.update(choice.arm, reward)
        self.ctx.trace.add("vog.bandit", index=index, revision=self.revisions, arm=choice.arm, reason=choice.reason,
                           scores={k: (round(v, 4) if v != float("inf") else "untried") for k, v in choice.scores.items()},
                           reward=round(reward, 4), entropy=round(entropy, 4), empty=not steps,
                           state=self.bandit.state())
        self.details.steps.append(Revised(index=index, revision=self.revisions, arm=choice.arm, reason=choice.reason))
        return steps or None

    def _context(self, arm: str, plan: list[PlanStep], index: int, lines: list[str], kept: list[WalkPath]) -> str:
        local = "KG observation of this step:\n" + ("\n".join(lines) or "(nothing found)")
        if arm == "local":
            return local
        if arm == "lookahead":
            hops = list(dict.fromkeys(h for p in kept for h in entity_hops(self.kg, p.end, exclude=p.back_hop())))
            return local + "\nRelations the reached entities open: " + (
                ", ".join(describe_hop(h) for h in hops[:30]) or "(none)")
        done = "\n".join(f"Step {i + 1}: {s.action}\nObservation:\n" + ("\n".join(obs) or "(nothing found)")
                         for i, (s, obs) in enumerate(self.observations))
        whole = "\n".join(f"{i + 1}. {s.action} (predicted: {s.predicted})" for i, s in enumerate(plan))
        return f"The whole plan:\n{whole}\nVerified steps so far:\n{done or '(none)'}\n{local}"

    def _note_candidate(self, steps: list[PlanStep]) -> None:
        self.candidate_answers.append(_final_answers(steps))

    # -- the answer ------------------------------------------------------------------------------------------------

    def _answer(self) -> Prediction:
        from kgqa.llm.structured import StructuredOutputError

        stats = {"revisions": float(self.revisions), **{f"arm_{k}": float(v) for k, v in self.arms.items()}}
        lines = [line for _, obs in self.observations for line in obs]
        if not lines:
            self.ctx.trace.add("vog.answer", cause="no verified observation")
        self.llm.budget += 1  # the answer's own call, kept back from the loop
        try:
            answers, reasoning = generate_answers(self.llm, ANSWER, self.question.text, max_tokens=self.cfg.answer_tokens,
                                                  observations="\n".join(lines[-60:]) or "(none)")
        except (StructuredOutputError, _Budget) as exc:
            answers, reasoning = [], f"no answer: {exc}"
        nodes = [n for p in self.paths for n in p.nodes] + [n for h, _, t in self.facts for n in (h, t)]
        items = link_answers(self.kg, answers, nodes)[: self.cfg.max_answers]
        linked = linked_nodes(items, nodes, self.kg)
        ends = linked - set(self.topics) or linked
        grounding = Grounding.STRUCTURED if ends else Grounding.PARAMETRIC
        evidence = path_evidence(self.paths, ends)
        evidence += [list(f) for f in dict.fromkeys(self.facts) if ends.intersection((f[0], f[2]))
                     and list(f) not in evidence]
        self.ctx.trace.add("answer", grounding=str(grounding), reasoning=reasoning, linked=len(ends),
                           answers=len(items), revisions=self.revisions, arms=dict(self.arms))
        return Prediction(answers=items, grounding=grounding, evidence=evidence, stats=stats)


def _final_answers(steps: list[PlanStep]) -> list[str]:
    """The answer a plan predicts: its Finish[...] target, else the last step's predicted observation."""
    for step in steps:
        if step.kind == "finish" and step.target:
            return [step.target]
    return [steps[-1].predicted] if steps and steps[-1].predicted else []
