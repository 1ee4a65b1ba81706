"""One question's VoG loop: plan, retrieve each Search step, verify it, revise the plan with bandit-chosen contexts, and
answer from the plan's Finish step (the module docstring of :mod:`kgqa.methods.vog.method` says what follows what).

State is kept on a :class:`VoGRun` per question, not on the method, so runs are threadsafe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.kg.base import Hop, KnowledgeGraph
from kgqa.llm.prompts import Signature
from kgqa.llm.structured import StructuredOutputError
from kgqa.methods.base import MethodDetails
from kgqa.methods.llm_only import generate_answers
from kgqa.methods.vog.bandit import (
    BanditSettings,
    ContextBandit,
    answer_consistency,
    fuse_reward,
    normalized_entropy,
    revision_reward,
    reward_parts,
)
from kgqa.methods.vog.contradiction import load_checker
from kgqa.methods.vog.plan import (
    ANSWER,
    PLAN,
    RELATIONS,
    REVISE,
    SELECT_ENTITIES,
    VERIFY,
    PlanStep,
    candidate_answers,
    finish_answers,
)
from kgqa.steps.answers import choose_candidates
from kgqa.steps.entities import resolve_entity_scorer
from kgqa.steps.losses import note_entities, note_relations, note_stop
from kgqa.steps.pruning import PruningConfig, RelationPruner, adaptive_width, resolve_pruner, similarity_order
from kgqa.steps.relations import describe_hop, verbalize_relation
from kgqa.steps.reply import BudgetedModel, ask_reply
from kgqa.steps.walks import (
    WalkPath,
    back_hop_to_skip,
    entity_hops,
    hop_neighbours,
    link_answers,
    linked_nodes,
    path_evidence,
    verbalize_triples,
)

if TYPE_CHECKING:
    from kgqa.methods.vog.method import VoGConfig

Triple = tuple[str, str, str]
#: Neighbours shown per relation of a nameless mediator (a marriage CVT holds both spouses under one relation).
MEDIATOR_VALUES = 2
#: Relations of a nameless mediator whose values are shown.
MEDIATOR_RELATIONS = 5


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
    """One revised plan from a step on, with the context the bandit chose for it and its fused reward."""

    kind: Literal["revised"] = "revised"
    index: int
    revision: int
    arm: str
    reason: str
    reward: float | None = None


class VoGDetails(MethodDetails):
    plan: list[str] = Field(default_factory=list)
    #: what happened to the plan's steps, in order
    steps: list[Annotated[Observed | Verified | Revised, Field(discriminator="kind")]] = Field(default_factory=list)
    #: the call or step limit that ended the loop
    limit: str | None = None
    fallback: str | None = None


class Budget(Exception):
    """The call or step limit was reached: answer from the plan as it stands."""


class VoGRun:
    """One question's plan-retrieve-verify-revise loop."""

    def __init__(self, cfg: VoGConfig, question: Question, ctx: MethodContext, topics: list[str],
                 topic_names: list[str], details: VoGDetails) -> None:
        # Every call goes through the budget (re-asks included); a fallback answer call gets one call of its own.
        self.llm = BudgetedModel(ctx.llm, cfg.max_calls - 1,
                                 lambda _: Budget(f"{cfg.max_calls} calls made (one kept for the answer)"))
        self.cfg, self.question, self.ctx = cfg, question, ctx
        self.details = details
        self.kg: KnowledgeGraph = ctx.kg
        self.topics, self.topic_names = topics, topic_names
        self.bandit = ContextBandit(BanditSettings(fixed_arm=cfg.fixed_arm))
        self.checker = load_checker(cfg.checker, embedder=ctx.embedder)
        self.observations: list[tuple[PlanStep, list[str]]] = []  # verified steps and their observations in words
        self.paths: list[WalkPath] = []  # every path kept, for evidence
        # the facts of mediator (CVT) nodes each observation showed, and the path to each such mediator: answers may be
        # read from them, and their evidence runs from the topic through the mediator
        self.facts: list[Triple] = []
        self.mediator_paths: dict[str, WalkPath] = {}
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
        index = executed = 0
        try:
            while index < len(plan):
                step = plan[index]
                if step.kind == "finish":
                    note_stop("vog.finish", "judge_stop")
                    break
                executed += 1
                if executed > cfg.max_steps:
                    raise Budget(f"{cfg.max_steps} steps executed")
                kept, lines, facts, repeats = self._retrieve(step, frontier, index)
                if not kept:
                    # Nothing to verify against and nowhere to go on from: the search ends here, as in the authors'
                    # code, and the plan's Finish answers (no verification, no revision).
                    self.ctx.trace.add("vog.empty", index=index, action=step.action)
                    note_stop("vog.empty", "judge_stop")
                    break
                spent: Budget | None = None
                if cfg.verification:
                    verdict = self._verify(step, lines, index)
                    if verdict is not None:
                        plan, spent = self._revise(plan, index, lines, kept, verdict, repeats)
                self.observations.append((step, lines))
                self.facts += facts
                self.paths.extend(kept)
                frontier = kept
                index += 1
                if spent is not None:
                    raise spent  # the budget ran out among the revisions: the best so far was kept
            else:
                note_stop("vog.plan_end", "judge_stop")  # the plan ended without a Finish step
        except Budget as stop:
            self.ctx.trace.add("vog.limit", cause=str(stop))
            self.details.limit = str(stop)
            note_stop("vog.limit", "budget_limit")
        return self._answer(plan[index:])

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
        self.candidate_answers.append(candidate_answers(steps))
        return steps

    # -- retrieval -------------------------------------------------------------------------------------------------

    def _retrieve(self, step: PlanStep, frontier: list[WalkPath],
                  index: int) -> tuple[list[WalkPath], list[str], list[Triple], bool]:
        """Relations, then entities, for one step: the paths kept, the observation in words, the mediator facts it
        shows and whether it reached an entity an earlier step reached."""
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
        facts = self._mediator_facts(kept)
        triples = list(dict.fromkeys([p.triples[-1] for p in kept] + facts))
        lines = verbalize_triples(self.kg, triples)
        repeats = {p.end for p in kept} & self.seen_entities
        self.seen_entities.update(p.end for p in kept)
        self.ctx.trace.add("vog.observe", index=index, action=step.action, relations=[describe_hop(h) for h in chosen],
                           candidates=len(hops), observation=lines[:30], repeated=len(repeats))
        self.details.steps.append(Observed(index=index, action=step.action, triples=len(lines)))
        return kept, lines, facts, bool(repeats)

    def _relations(self, query: str, hops: list[Hop], where: list[str], ends: list[str]) -> list[Hop]:
        """The relations kept of ``hops`` (leaving the frontier ``ends``, named ``where`` in the prompt)."""
        if not hops:
            return []
        shown = hops
        if len(hops) > self.cfg.prefilter_above:
            order, sims = similarity_order(self.ctx.embedder, query, [verbalize_relation(h) for h in hops])
            shown = [hops[i] for i in order[:adaptive_width(sims)]]
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
            shown = [named[i] for i in order[:adaptive_width(sims)]]
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

    def _mediator_facts(self, kept: list[WalkPath]) -> list[Triple]:
        """For each nameless CVT reached, its other facts: up to :data:`MEDIATOR_RELATIONS` relations, up to
        :data:`MEDIATOR_VALUES` values each (the node the walk came from left out, so a marriage shows the other
        spouse), a fact already shown the other way round left out. Each mediator's path is kept for evidence."""
        facts: list[Triple] = []
        names = self.kg.names([p.end for p in kept])
        for path in kept:
            if names.get(path.end):
                continue
            self.mediator_paths.setdefault(path.end, path)
            pairs: set[frozenset[str]] = set()
            for hop in entity_hops(self.kg, path.end, exclude=path.back_hop())[:MEDIATOR_RELATIONS]:
                values = [n for n in self.kg.neighbors(path.end, hop.relation, hop.direction,
                                                       limit=len(path.nodes) + MEDIATOR_VALUES)
                          if n not in path.nodes][:MEDIATOR_VALUES]
                for node in values:
                    if frozenset((path.end, node)) in pairs:
                        continue  # (X, film.actor.film, cvt) says again what (cvt, film.performance.actor, X) said
                    pairs.add(frozenset((path.end, node)))
                    facts.append(path.extend(hop, node).triples[-1])
        return facts

    # -- verification and revision ---------------------------------------------------------------------------------

    def _observation(self, lines: list[str]) -> str:
        return "\n".join(lines[: self.cfg.observation_lines]) or "(nothing found)"

    def _verify(self, step: PlanStep, lines: list[str], index: int) -> dict[str, str] | None:
        """The verifier's verdict, and the second checker's: None when the step stands, else what the verifier said
        (its reasoning and the observation the graph supports) for the revision to read."""
        observation = self._observation(lines)
        reply = self._ask(VERIFY, self.cfg.verify_tokens, action=step.action,
                          predicted=step.predicted or "(no prediction)", observation=observation)
        value = reply.value if reply.ok else None
        llm_says = value is None or value.revise  # an unreadable verdict: the step is not trusted
        checked = self.checker.check(observation, step.predicted) if step.predicted else None
        revise = llm_says or bool(checked and checked.contradiction)
        reason = value.reasoning if value is not None else reply.failure
        self.ctx.trace.add("vog.verify", index=index, revise=revise, llm_revise=llm_says, reason=reason,
                           checker=None if checked is None else {"contradiction": checked.contradiction,
                                                                 "score": round(checked.score, 4),
                                                                 "detail": checked.detail})
        self.details.steps.append(Verified(index=index, revise=revise, reason=reason))
        if not revise:
            return None
        return {"reasoning": reason or "", "supported": value.revised_observation if value is not None else ""}

    def _revise(self, plan: list[PlanStep], index: int, lines: list[str], kept: list[WalkPath],
                verdict: dict[str, str], repeats: bool) -> tuple[list[PlanStep], Budget | None]:
        """Up to ``max_revisions`` revised plans, one call each, the context of each chosen by the bandit; the best by
        fused reward is kept, and the loop stops at the first whose reward reaches ``reward_threshold``. Returns the
        plan and, when the call budget ran out on the way, the exception to raise once the step is recorded."""
        observation = self._observation(lines)
        best: list[PlanStep] | None = None
        best_reward = float("-inf")
        spent: Budget | None = None
        for attempt in range(1, self.cfg.max_revisions + 1):
            entropy = normalized_entropy(self.candidate_answers)
            choice = self.bandit.choose(entropy=entropy, entity_repeats=repeats,
                                        steps_ahead=max(len(plan) - index - 1, 0))
            try:
                reply = self._ask(REVISE, self.cfg.revise_tokens, current=plan[index].render(),
                                  context=self._context(choice.arm, plan, index, lines, kept, verdict))
            except Budget as exc:
                spent = exc
                break
            steps = list(reply.value.steps) if reply.ok and reply.value else []
            self.revisions += 1
            self.arms[choice.arm] += 1
            if not steps:
                reward = revision_reward(None, checker_failed=False)
            else:
                first = steps[0]
                parts = reward_parts(self.ctx.embedder, kg_observation=observation, revised_observation=first.predicted,
                                     revised_step=first.render(), revised_action=first.action,
                                     revised_thought=first.thought, question=self.question.text)
                failed = bool(first.predicted) and self.checker.check(observation, first.predicted).contradiction
                answers = candidate_answers(plan[:index] + steps)
                self.candidate_answers.append(answers)
                reward = fuse_reward(revision_reward(parts, checker_failed=failed),
                                     answer_consistency(answers, self.candidate_answers), entropy)
                if reward > best_reward:
                    best, best_reward = steps, reward
            self.bandit.update(choice.arm, reward)
            self.ctx.trace.add("vog.bandit", index=index, revision=self.revisions, candidate=attempt, arm=choice.arm,
                               reason=choice.reason, reward=round(reward, 4), best=round(best_reward, 4)
                               if best is not None else None, entropy=round(entropy, 4), empty=not steps,
                               scores={k: (round(v, 4) if v != float("inf") else "untried")
                                       for k, v in choice.scores.items()}, state=self.bandit.state())
            self.details.steps.append(Revised(index=index, revision=self.revisions, arm=choice.arm, reason=choice.reason,
                                              reward=round(reward, 4)))
            if best_reward >= self.cfg.reward_threshold:
                break
        else:
            self.ctx.trace.add("vog.revision_limit", index=index, revisions=self.cfg.max_revisions,
                               best=None if best is None else round(best_reward, 4))
        if best is None:
            return plan, spent  # every revision empty: the plan stands
        # The revised plan starts at this step, restated as the graph showed it (its observation stands, it is not
        # searched again); a revision that opens with Finish answers right after this step.
        return (plan[:index] + best if best[0].kind == "search" else plan[: index + 1] + best), spent

    def _context(self, arm: str, plan: list[PlanStep], index: int, lines: list[str], kept: list[WalkPath],
                 verdict: dict[str, str]) -> str:
        said = f"The checker says: {verdict['reasoning']}".rstrip() if verdict.get("reasoning") else ""
        if verdict.get("supported"):
            said += f"\nThe graph supports: {verdict['supported']}"
        local = f"KG observation of this step:\n{self._observation(lines)}" + (f"\n{said}" if said else "")
        if arm == "local":
            return local
        if arm == "lookahead":
            return local + "\nRelations the reached entities open: " + (", ".join(self._lookahead(plan, index, kept))
                                                                        or "(none)")
        done = "\n".join(f"Step {i + 1}: {s.action}\nObservation:\n" + ("\n".join(obs[:10]) or "(nothing found)")
                         for i, (s, obs) in enumerate(self.observations))
        whole = "\n".join(f"{i + 1}. {s.action} (predicted: {s.predicted or '-'})" for i, s in enumerate(plan))
        return f"The whole plan:\n{whole}\nVerified steps so far:\n{done or '(none)'}\n{local}"

    def _lookahead(self, plan: list[PlanStep], index: int, kept: list[WalkPath]) -> list[str]:
        """The relations the reached entities open, the likeliest for the next step first (3 to 10, the prefilter)."""
        hops = list(dict.fromkeys(h for p in kept for h in entity_hops(self.kg, p.end, exclude=p.back_hop())))
        if len(hops) > self.cfg.prefilter_above:
            following = plan[index + 1] if index + 1 < len(plan) else None
            query = f"{following.target} {following.thought}".strip() if following else ""
            order, sims = similarity_order(self.ctx.embedder, query or self.question.text,
                                           [verbalize_relation(h) for h in hops])
            hops = [hops[i] for i in order[:adaptive_width(sims)]]
        return [describe_hop(h) for h in hops]

    # -- the answer ------------------------------------------------------------------------------------------------

    def _answer(self, rest: list[PlanStep]) -> Prediction:
        """The plan's Finish answers; one answer call over the verified observations only when the Finish names none."""
        stats = {"revisions": float(self.revisions), **{f"arm_{k}": float(v) for k, v in self.arms.items()}}
        lines = [line for _, obs in self.observations for line in obs]
        answers, source, reasoning = finish_answers(rest), "finish", ""
        if not answers and lines:
            source = "answer call"
            self.llm.budget += 1  # the answer's own call, kept back from the loop
            try:
                answers, reasoning = generate_answers(self.llm, ANSWER, self.question.text,
                                                      max_tokens=self.cfg.answer_tokens,
                                                      observations="\n".join(lines[-60:]))
            except (StructuredOutputError, Budget) as exc:
                answers, reasoning = [], f"no answer: {exc}"
        elif not answers:
            source = "none"
        nodes = [n for p in self.paths for n in p.nodes] + [n for h, _, t in self.facts for n in (h, t)]
        items = link_answers(self.kg, answers, nodes)[: self.cfg.max_answers]
        linked = linked_nodes(items, nodes, self.kg)
        ends = linked - set(self.topics) or linked
        grounding = Grounding.STRUCTURED if ends else Grounding.PARAMETRIC
        evidence = path_evidence(self.paths, ends)
        for fact in dict.fromkeys(self.facts):
            if ends.intersection((fact[0], fact[2])):
                mediator = fact[0] if fact[0] in self.mediator_paths else fact[2]
                route = self.mediator_paths.get(mediator)
                for triple in [*(route.triples if route else ()), fact]:
                    if list(triple) not in evidence:
                        evidence.append(list(triple))
        self.ctx.trace.add("answer", grounding=str(grounding), source=source, reasoning=reasoning, linked=len(ends),
                           answers=len(items), revisions=self.revisions, arms=dict(self.arms))
        return Prediction(answers=items, grounding=grounding, evidence=evidence, stats=stats)
