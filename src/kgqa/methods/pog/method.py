"""PoG (Plan-on-Graph, Chen et al., NeurIPS 2024): sub-objectives, adaptive exploration, memory and reflection.

One call decomposes the question into sub-objectives. Then, per round: relation selection for every frontier entity
(the ``width`` relations most useful for the question and its sub-objectives), entity pruning per (entity, relation)
group, as PoG's code prunes (above ``prefilter_entities`` candidates in a group, the most similar to the question by
sentence embedding first; then the group's ``width`` most useful chosen, one call per group larger than ``width``), a
memory update (the LLM records each sub-objective's status and the
evidence for it), a reasoning step replying JSON (sufficient or not, answers, reason) and, when not sufficient,
reflection: go on from the frontier, add entities the pruning left out, or go back to entities of earlier rounds (at
most ``max_reverse`` times). When the rounds are exhausted the model answers alone (grounding ``parametric``).

Defaults as the paper and its code: depth 4, width 3, 70 candidates before pruning, 5 reverse steps, temperature 0.3.

Where kgqa differs from PoG's code, and why:

* ``walk_back`` (``auto``): PoG's code drops the relation a path came by, and on Freebase a path still reaches the
  siblings (a director's other films) by the relation's named reverse. On a KG that names no reverses (MetaQA's KB)
  that leaves no way there, so there the hop back is offered, never to the node just left
  (:func:`kgqa.steps.walks.walks_back`; ``never`` is the code's behaviour everywhere).
* Relation and entity pruning use kgqa's shared scorers: the model names the ``width`` best relations / scores the
  candidates (``relation_pruner`` and ``entity_pruner``: ``auto`` is the embedding scorer for an offline local model
  and the LLM otherwise, as for every kgqa method). PoG's model writes its selections in free text.
* The candidates above ``prefilter_entities`` are ranked by the run's embedder when there is one, else by word overlap;
  PoG uses SBERT.
* Nameless mediator (CVT) nodes among a group's candidates cannot be judged by name: up to ``width`` of them join the
  frontier as they are, shown as ``[mediator id]`` (PoG's code keeps only named ``m.`` ids).
* The memory is a short form: the numbers of the sub-objectives solved and one sentence of what is known, rendered
  as each sub-objective with its status (PoG's model rewrites a free-text memory per sub-objective; a 135M local model
  could not fill a per-objective list within a short reply budget).
* Memory, reasoning and reflection reply JSON validated against a model, with a budget per step (``memory_tokens``,
  ``reason_tokens``, ``reflect_tokens``); an unreadable reply is recorded and treated as "not sufficient" /
  "continue", never as an answer.
* Reflection is one call choosing ``continue``, ``add`` (entities left out by pruning this round) or ``backtrack``
  (entities reached in earlier rounds), the candidates numbered ``A1..`` and ``B1..``. Going back returns the walk to
  the depth of the chosen entities, so exploration can go deeper from there; ``max_rounds`` (ours) bounds the rounds.
* Answers are linked to the nodes the model was shown by name; grounding is ``synthesis`` when at least one is, else
  ``parametric`` (PoG reports no grounding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.errors import KGError
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs
from kgqa.methods.llm_only import ReasonedAnswer, Sufficiency, answer_alone, answer_from_evidence, judge_sufficiency
from kgqa.methods.registry import register_method
from kgqa.steps.entities import (
    Candidate,
    EntityPruner,
    EntityScorerChoice,
    EntityScores,
    resolve_entity_scorer,
    score_gold_entities,
    topics_in_kg,
)
from kgqa.steps.losses import note_answer_cap, note_entities, note_stop
from kgqa.steps.pruning import (
    PrunerChoice,
    PruningConfig,
    RelationChoice,
    RelationPruner,
    choose_gold_relations,
    pruner_needs_embedder,
    resolve_pruner,
    similarity_order,
)
from kgqa.steps.reply import ask_reply
from kgqa.steps.walks import (
    WalkBack,
    WalkPath,
    back_hop_to_skip,
    entity_hops,
    hop_neighbours,
    link_answers,
    linked_nodes,
    node_label,
    path_evidence,
    shown_triples,
    verbalize_triples,
    walk_back_field,
)

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

PROMPTS = PromptBook.for_package("kgqa.methods.pog")


class SubObjectives(Reply):
    subobjectives: list[str] = Field(description="short sub-objectives, in the order to solve them")


class Memory(Reply):
    """Which sub-objectives the triples solve, and what is known so far."""

    model_config = ConfigDict(coerce_numbers_to_str=True)

    solved: list[int] = Field(description="numbers of the sub-objectives solved")
    known: str = Field(default="", description="what the triples establish, one short sentence")


class Reflection(Reply):
    action: Literal["continue", "add", "backtrack"]
    entities: list[str] = Field(default_factory=list, description="labels such as A1 or B2 of the entities chosen")
    reason: str = ""


def _oracle_subobjectives(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's plan: the question itself is its one sub-objective (the relations come from the gold chain as the
    search chooses them)."""
    return {"subobjectives": [str(ask.inputs["question"])]}


def _oracle_memory(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's memory: every sub-objective solved once the triples shown hold a gold answer, with those answers."""
    answers = ask.answers_in(ask.text("triples"))
    solved = ask.judge(bool(answers))
    numbers = [n for n, _ in ask.numbered("subobjectives")]
    return {"solved": numbers if solved else [], "known": f"The answer is {'; '.join(answers)}." if solved else ""}


def _oracle_reflection(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's reflection: add the left-out entities on a gold walk, else go back to earlier ones on it when the
    current entities are off it, else continue."""
    def labelled(name: str, prefix: str) -> list[str]:
        return [f"{prefix}{n}" for n, text in ask.numbered(name) if ask.on_path(text)]

    add, back = labelled("left_out", "A"), labelled("earlier", "B")
    if add:
        action, chosen = "add", add
    elif back and not ask.on_path(str(ask.inputs.get("current", ""))):
        action, chosen = "backtrack", back
    else:
        action, chosen = "continue", []
    action = action if ask.judge(True) else ask.rng.choice(["continue", "add", "backtrack"])
    return {"action": action, "entities": chosen if action != "continue" else [],
            "reason": "the entities named lie on the way to the answer" if chosen else "the current entities lead on"}


DECOMPOSE = Signature(PROMPTS, "decompose", SubObjectives, "pog.decompose", _oracle_subobjectives)
RELATIONS = Signature(PROMPTS, "prune_relations", RelationChoice, "pog.relations", choose_gold_relations)
ENTITIES = Signature(PROMPTS, "prune_entities", EntityScores, "pog.entities", score_gold_entities)
UPDATE_MEMORY = Signature(PROMPTS, "update_memory", Memory, "pog.memory", _oracle_memory)
REASON = Signature(PROMPTS, "reason", Sufficiency, "pog.reason", judge_sufficiency)
REFLECT = Signature(PROMPTS, "reflect", Reflection, "pog.reflect", _oracle_reflection)
GENERATE = Signature(PROMPTS, "direct_generation", ReasonedAnswer, "pog.generate", answer_from_evidence)


class PoGRound(BaseModel):
    """One exploration round: the candidates and the triples selected, then the memory, the reasoning's verdict and
    the reflection's choice."""

    round: int
    candidates: int = 0
    selected: list[str] = Field(default_factory=list)
    memory: str | None = None
    sufficient: bool | None = None
    reason: str = ""
    reflection: str | None = None
    reflected_on: list[str] = Field(default_factory=list)


class PoGDetails(MethodDetails):
    subobjectives: list[str] = Field(default_factory=list)
    rounds: list[PoGRound] = Field(default_factory=list)
    fallback: str | None = None

    def round(self, number: int) -> PoGRound:
        """The account of round ``number``, made by its first step."""
        return self.round_of(self.rounds, number, PoGRound)


class PoGConfig(MethodConfig):
    """PoG's hyperparameters, defaulting to the paper's (depth 4, width 3, 70 candidates, 5 reverse steps, 0.3)."""

    depth: int = Field(default=4, ge=1, description="maximum exploration depth")
    width: int = Field(default=3, ge=1, description="relations kept per entity and entities kept per round")
    prefilter_entities: int = Field(default=70, ge=1, description="above this many candidates, the most similar to "
                                                                  "the question are kept before pruning")
    max_reverse: int = Field(default=5, ge=0, description="times reflection may go back to earlier entities")
    max_rounds: int = Field(default=8, ge=1, description="exploration rounds at most (ours; bounds add/backtrack)")
    relation_pruner: PrunerChoice = Field(default="auto", description="relation scorer; auto: embedding for local "
                                                                      "models, llm otherwise")
    entity_pruner: EntityScorerChoice = Field(default="auto", description="entity scorer; auto: embedding for local "
                                                                          "models, llm otherwise")
    prefilter: int = Field(default=30, ge=1, description="most relations one selection prompt lists")
    temperature: float = Field(default=0.3, ge=0.0, le=2.0, description="temperature of every call")
    neighbour_limit: int = Field(default=500, ge=1, description="neighbours read per (entity, relation)")
    walk_back: WalkBack = walk_back_field()
    decompose_tokens: int = Field(default=96, ge=16)
    relation_tokens: int | None = Field(default=None, ge=1, description="None: 16 + 24 per relation")
    entity_tokens: int = Field(default=200, ge=16)
    memory_tokens: int = Field(default=96, ge=16)
    reason_tokens: int = Field(default=128, ge=16)
    reflect_tokens: int = Field(default=64, ge=16)
    answer_tokens: int = Field(default=256, ge=16)
    max_triples_shown: int = Field(default=60, ge=1)
    max_options: int = Field(default=10, ge=1, description="entities offered per list to reflection")
    max_answers: int = Field(default=20, ge=1)


def _numbered(goals: list[str]) -> str:
    return "\n".join(f"{i}. {goal}" for i, goal in enumerate(goals, start=1))


@register_method("pog")
class PoG(KGQAMethod):
    """Plan-on-Graph (see the module docstring)."""

    name = "pog"
    summary = "Plan-on-Graph: sub-objectives, relation and entity pruning, memory, reasoning and reflection"
    Config: ClassVar[type[MethodConfig]] = PoGConfig
    Details = PoGDetails
    signatures = (DECOMPOSE, RELATIONS, ENTITIES, UPDATE_MEMORY, REASON, REFLECT, GENERATE)
    config: PoGConfig

    def needs(self, llm: str | None = None) -> Needs:
        relation = resolve_pruner(self.config.relation_pruner, llm)
        entity = resolve_entity_scorer(self.config.entity_pruner, llm)
        return Needs(kg=True, llm=True, embedder=pruner_needs_embedder(relation) or entity == "embedding")

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.details = PoGDetails()
        topics, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return self._direct(question, ctx, cause)
        try:
            return self._explore(question, ctx, [WalkPath.start(t.id) for t in topics])
        except (KGError, LLMError) as exc:
            return self._direct(question, ctx, f"{type(exc).__name__} during exploration: {exc}")

    # -- the loop --------------------------------------------------------------------------------------------------

    def _explore(self, question: Question, ctx: MethodContext, frontier: list[WalkPath]) -> Prediction:
        cfg = self.config
        subobjectives = self._decompose(question, ctx)
        llm_name = getattr(ctx.llm, "name", None)
        relations = RelationPruner(
            PruningConfig(kind=resolve_pruner(cfg.relation_pruner, llm_name), top_k=cfg.width,
                          prefilter=max(cfg.prefilter, cfg.width), max_tokens=cfg.relation_tokens),
            llm=ctx.llm, embedder=ctx.embedder, signature=RELATIONS, temperature=cfg.temperature, seed=ctx.seed)
        entities = EntityPruner(resolve_entity_scorer(cfg.entity_pruner, llm_name), top_k=cfg.width, llm=ctx.llm,
                                embedder=ctx.embedder, signature=ENTITIES, max_tokens=cfg.entity_tokens,
                                temperature=cfg.temperature, seed=ctx.seed)
        goals = _numbered(subobjectives)
        memory = "(empty)"
        gathered: list[WalkPath] = []  # every path selected in any round
        earlier: list[WalkPath] = []  # frontier paths of earlier rounds (reflection may go back to them)
        reverses = 0
        visited = {p.end for p in frontier}  # a node selected once is not offered again (going back explores anew)
        for round_no in range(1, cfg.max_rounds + 1):
            frontier = [p for p in frontier if len(p.hops) < cfg.depth]
            if not frontier:
                note_stop("pog.depth", "depth_limit", depth=cfg.depth)
                return self._direct(question, ctx, f"depth {cfg.depth} exhausted without sufficient knowledge")
            selected, left_out = self._expand(question, ctx, frontier, relations, entities, goals, round_no, visited)
            if not selected:
                ctx.trace.add("pog.dead_end", round=round_no)
                if not earlier or reverses >= cfg.max_reverse:
                    return self._direct(question, ctx, "no candidate entity left")
                # Nothing to go on from: go back to the latest earlier entities, as reflection would.
                reverses += 1
                frontier = earlier[-cfg.width:]
                continue
            gathered.extend(selected)
            visited.update(p.end for p in selected)
            memory = self._update_memory(question, ctx, subobjectives, memory, gathered, round_no)
            done = self._reason(question, ctx, memory, gathered, round_no)
            if done is not None:
                return done
            earlier.extend(frontier)
            frontier = selected
            action, chosen = self._reflect(question, ctx, goals, memory, selected, left_out, earlier,
                                           reverses < cfg.max_reverse, round_no)
            note_entities("pog.reflect", [p.end for p in chosen])  # a left-out or earlier node taken back
            if action == "add":
                frontier = selected + [p for p in chosen if p not in selected]
            elif action == "backtrack":
                reverses += 1
                frontier = chosen
        note_stop("pog.rounds", "budget_limit")
        return self._direct(question, ctx, f"{cfg.max_rounds} rounds without sufficient knowledge")

    def _decompose(self, question: Question, ctx: MethodContext) -> list[str]:
        reply = ask_reply(ctx.llm, DECOMPOSE, max_tokens=self.config.decompose_tokens, temperature=self.config.temperature,
                          seed=ctx.seed, question=question.text)
        goals = [s.strip() for s in (reply.value.subobjectives if reply.ok and reply.value else []) if s.strip()][:5]
        event = ctx.trace.add("pog.decompose", subobjectives=goals)
        self.account(ctx).subobjectives = list(goals)
        if not goals:
            event["failure"] = reply.failure or "no sub-objective"
            goals = [question.text]  # the question itself is the one objective
        return goals

    def _expand(self, question: Question, ctx: MethodContext, frontier: list[WalkPath], relations: RelationPruner,
                entities: EntityPruner, goals: str, round_no: int, visited: set[str],
                ) -> tuple[list[WalkPath], list[WalkPath]]:
        """One round of relation selection and entity pruning: the paths kept, and the named ones left out."""
        cfg = self.config
        kg = ctx.kg
        names = kg.names([p.end for p in frontier])
        candidates: dict[str, WalkPath] = {}
        groups: list[list[str]] = []  # per (entity, relation): the nodes it reaches
        for path in frontier:
            hops = entity_hops(kg, path.end, exclude=back_hop_to_skip(kg, path, cfg.walk_back))
            if not hops:
                continue
            label = names.get(path.end) or path.end
            kept = relations.prune(question.text, [label], (), hops, trace=ctx.trace, at=path.end,
                                   depth=len(path.hops) + 1, entity=label, subobjectives=goals).value or []
            for scored in kept:
                group = []
                for node in hop_neighbours(kg, path.end, scored.hop, limit=cfg.neighbour_limit,
                                           visited=visited.union(path.nodes)):
                    candidates.setdefault(node, path.extend(scored.hop, node))
                    group.append(node)
                if group:
                    groups.append(group)
        node_names = kg.names(list(candidates))
        kept_ids: dict[str, None] = {}  # insertion-ordered, each node once
        left_out_ids: dict[str, None] = {}
        prefiltered = 0
        for group in groups:  # PoG prunes each (entity, relation)'s neighbours on their own
            named = [n for n in group if node_names.get(n)]
            nameless = [n for n in group if not node_names.get(n)]
            note_entities("pog.nameless", nameless, nameless[: cfg.width])
            shown = named
            if len(named) > cfg.prefilter_entities:
                order, _ = similarity_order(ctx.embedder, question.text, [node_names.get(n) or "" for n in named])
                shown = [named[i] for i in order[: cfg.prefilter_entities]]
                note_entities("pog.prefilter", named, shown)
                prefiltered += len(shown)
            chosen = list(shown)
            if len(shown) > cfg.width:
                result = entities.prune(question.text, [Candidate(n, node_names.get(n)) for n in shown],
                                        trace=ctx.trace, subobjectives=goals)
                chosen = [e.id for e in result.value or []]
            kept_ids.update(dict.fromkeys([*chosen, *nameless[: cfg.width]]))
            left_out_ids.update(dict.fromkeys(n for n in shown if n not in chosen))
        selected = [candidates[n] for n in kept_ids]
        left_out = [candidates[n] for n in left_out_ids if n not in kept_ids]
        account = self.account(ctx).round(round_no)
        account.candidates, account.selected = len(candidates), verbalize_triples(kg, [p.triples[-1] for p in selected])
        ctx.trace.add("pog.round", round=round_no, frontier=[p.end for p in frontier], candidates=len(candidates),
                      prefiltered=prefiltered or None,
                      selected=account.selected, left_out=len(left_out))
        return selected, left_out

    def _update_memory(self, question: Question, ctx: MethodContext, goals: list[str], memory: str,
                       gathered: list[WalkPath], round_no: int) -> str:
        lines, _ = shown_triples(ctx.kg, gathered, self.config.max_triples_shown)
        reply = ask_reply(ctx.llm, UPDATE_MEMORY, max_tokens=self.config.memory_tokens,
                          temperature=self.config.temperature, seed=ctx.seed, question=question.text,
                          subobjectives=_numbered(goals), memory=memory, triples="\n".join(lines))
        event = ctx.trace.add("pog.memory", round=round_no)
        if not reply.ok or reply.value is None:
            event["failure"] = reply.failure
            return memory  # the old memory stands; the triples are shown to reasoning anyway
        solved = set(reply.value.solved)
        text = "\n".join(f"{i}. {goal}: {'solved' if i in solved else 'open'}" for i, goal in enumerate(goals, start=1))
        if reply.value.known.strip():
            text += f"\nKnown: {reply.value.known.strip()}"
        event["memory"] = text
        self.account(ctx).round(round_no).memory = text
        return text

    def _reason(self, question: Question, ctx: MethodContext, memory: str, gathered: list[WalkPath],
                round_no: int) -> Prediction | None:
        lines, nodes = shown_triples(ctx.kg, gathered, self.config.max_triples_shown)
        note_answer_cap("pog.reason", [n for p in gathered for n in p.nodes], nodes)
        reply = ask_reply(ctx.llm, REASON, max_tokens=self.config.reason_tokens, temperature=self.config.temperature,
                          seed=ctx.seed, question=question.text, memory=memory, triples="\n".join(lines))
        event = ctx.trace.add("pog.reason", round=round_no)
        account = self.account(ctx).round(round_no)
        if not reply.ok or reply.value is None:
            event.update(sufficient=False, failure=reply.failure)
            account.sufficient = False
            return None
        event.update(sufficient=reply.value.sufficient, answers=reply.value.answers, reason=reply.value.reason)
        account.sufficient, account.reason = reply.value.sufficient, reply.value.reason
        if not reply.value.sufficient or not reply.value.answers:
            return None
        note_stop("pog.reason", "judge_stop")
        items = link_answers(ctx.kg, reply.value.answers, nodes)[: self.config.max_answers]
        ends = linked_nodes(items, nodes, ctx.kg)
        grounding = Grounding.SYNTHESIS if ends else Grounding.PARAMETRIC
        ctx.trace.add("answer", stage="reasoning", grounding=str(grounding), linked=len(ends), answers=len(items))
        return Prediction(answers=items, grounding=grounding, evidence=path_evidence(gathered, ends))

    def _reflect(self, question: Question, ctx: MethodContext, goals: str, memory: str, selected: list[WalkPath],
                 left_out: list[WalkPath], earlier: list[WalkPath], may_reverse: bool,
                 round_no: int) -> tuple[str, list[WalkPath]]:
        cfg = self.config
        add = left_out[: cfg.max_options]
        back = list({p.end: p for p in earlier}.values())[-cfg.max_options:] if may_reverse else []
        names = ctx.kg.names([p.end for p in [*selected, *add, *back]])

        def listing(prefix: str, paths: list[WalkPath]) -> str:
            return "\n".join(f"{prefix}{i}. {node_label(p.end, names)}" for i, p in enumerate(paths, start=1)) or "(none)"

        reply = ask_reply(ctx.llm, REFLECT, max_tokens=cfg.reflect_tokens, temperature=cfg.temperature, seed=ctx.seed,
                          question=question.text, subobjectives=goals, memory=memory,
                          current=", ".join(node_label(p.end, names) for p in selected),
                          left_out=listing("A", add), earlier=listing("B", back))
        event = ctx.trace.add("pog.reflect", round=round_no)
        account = self.account(ctx).round(round_no)
        account.reflection = "continue"
        if not reply.ok or reply.value is None:
            event.update(action="continue", failure=reply.failure)
            return "continue", []
        action = reply.value.action
        pool = {f"A{i}": p for i, p in enumerate(add, start=1)} if action == "add" else (
            {f"B{i}": p for i, p in enumerate(back, start=1)} if action == "backtrack" else {})
        chosen = [pool[label] for label in dict.fromkeys(x.strip().upper() for x in reply.value.entities) if label in pool]
        if action != "continue" and not chosen:
            event.update(action="continue", asked=action, ignored=reply.value.entities[:5], reason=reply.value.reason)
            return "continue", []
        event.update(action=action, entities=[p.end for p in chosen], reason=reply.value.reason)
        account.reflection, account.reflected_on = action, [p.end for p in chosen]
        return action, chosen

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        self.account(ctx).fallback = cause
        return answer_alone(question, ctx, GENERATE, cause=cause, max_tokens=self.config.answer_tokens,
                            max_answers=self.config.max_answers)

    def explain(self, prediction: Prediction) -> Explanation:
        details: PoGDetails = self.details_of(prediction)
        lines = ["sub-objectives: " + "; ".join(details.subobjectives or ["(none)"])]
        for r in details.rounds:
            lines.append(f"round {r.round}: {r.candidates} candidates, kept " + "; ".join(r.selected))
            if r.memory:
                lines.append("memory: " + r.memory.replace("\n", " "))
            if r.sufficient is not None:
                lines.append(f"reasoning: {'sufficient' if r.sufficient else 'not sufficient'}"
                             + (f" ({r.reason})" if r.reason else ""))
            if r.reflection is not None:
                lines.append(f"reflection: {r.reflection}" + (f" {r.reflected_on}" if r.reflected_on else ""))
        if details.fallback:
            lines.append(f"fallback: {details.fallback}")
        fields: dict[str, Any] = {"subobjectives": details.subobjectives,
                                  "rounds": [{"round": r.round, "selected": r.selected} for r in details.rounds]}
        return Explanation(fields=fields, lines=lines)
