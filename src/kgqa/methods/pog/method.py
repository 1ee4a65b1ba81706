# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""PoG (Plan-on-Graph, Chen et al., NeurIPS 2024): sub-objectives, adaptive exploration, memory and reflection.

One call decomposes the question into sub-objectives. Then, per round (one hop, ``depth`` rounds at most): relation
selection for every frontier entity (every relation is listed, the hop back along the edge the path came by left out;
the model chooses as few as the question needs, at most ``max_relations``), entity selection per (entity, relation)
group, as PoG's code prunes (above ``prefilter_entities`` candidates in a group, the most similar to the question by
sentence embedding first; then the group's ``width`` best chosen, one call per group larger than ``width``, a candidate
scored zero dropped), a memory update (the LLM records each sub-objective's status and the evidence for it), a
reasoning step replying JSON (sufficient or not, answers, reason) and, when not sufficient, reflection: go on from the
frontier, add entities the selection left out, or go back to entities of earlier rounds (at most ``max_reverse``
times); adding or going back takes no extra round. A node seen on another path or in an earlier round may be reached
again (a second triple to it is evidence too). When a round finds nothing to explore (a dead end) the model answers
from the triples gathered (PoG's half stop); when the rounds are exhausted it answers alone (grounding ``parametric``).

The relation list, as ToG's (:mod:`kgqa.methods.tog.method`): every relation while the listing fits
``relation_budget`` tokens, else the embedder's best that fit; never cut by word overlap (the embedder is loaded with
any model, :meth:`PoG.needs`; without one the whole list is shown). A reply naming no listed relation, or unreadable, is
replaced by the embedder's ``max_relations`` best (PoG's code keeps none; see the table), and without an embedder that
entity opens no branch.

Defaults as the paper and its code: depth 4, width 3, 70 candidates before pruning, 5 reverse steps, temperature 0.3.

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| planning | one call splits the question into as few sub-objectives as possible | same (at most 5 kept) | no |
| relation list | every relation of the entity, less the one the path came by | every relation while the listing fits `relation_budget` (2,000 tokens), else the embedder's best that fit | yes: prompt budget (a 4,096-token local model); no topic of MetaQA or the Freebase pieces reaches it |
| relation selection | the LLM lists as few relevant relations as possible, any number | same, used as it is, at most `max_relations` (5); the `embedding` scorer keeps `width` | yes: a cap stops a rambling model's list |
| no listed relation named, or no readable reply | the entity adds no relation | the embedder's `max_relations` best stand in; none without an embedder (never word overlap) | yes: under the oracle, which names no relation away from the gold chains (a question's second, constraint topic), the stand-in reaches 23 more of 300 cwq-gog answers (hit 95.3 against 87.7); a small model's unreadable reply does not end the branch |
| entity selection | per (entity, relation) group: above 70, the 70 nearest by SBERT; the LLM lists the fewest entities needed | per group: above 70, the 70 nearest by the run's embedder; the LLM scores them, the `width` (3) best kept, one scored zero dropped (`pog.zero`) | yes: scores and a width bound the frontier a small model leaves |
| nameless (CVT) nodes | only named `m.` ids are kept | up to `width` a group join the frontier as `[mediator id]` | yes: paths through a CVT (film, performance, actor) |
| the hop back | the relation a path came by is dropped; seen nodes stay reachable | same where the KG names reverses (Freebase); offered on MetaQA (`walk_back`); a path never returns to its own nodes | yes: MetaQA names no reverses; a walk does not loop |
| memory | the LLM rewrites a free-text memory per sub-objective | the numbers of the sub-objectives solved and one sentence of what is known | yes: a short reply a small model fills |
| reasoning | JSON {A: {Sufficient, Answer}, R}: verdict first | JSON {sufficient, answers, reason}, the same order | no |
| reflection | "Add?" yes/no with a reason, then a second call picks entities to add among all seen; at most 5 times | one call: continue, add (left-out `A1..`) or backtrack (earlier `B1..`, replacing the frontier), at most `max_reverse` (5) | yes: one call instead of two |
| reflection after the last round | asked | not asked | yes: its choice could not be explored (one call fewer a question that reaches depth 4) |
| depth | 4 rounds; adding entities takes no extra round | same (`depth` bounds the rounds, going back included) | no |
| dead end, depth exhausted | a dead end: answer from the triples gathered (half stop); the depth exhausted: the LLM answers alone | same (alone: grounding `parametric`) | no |
| answer replies | the answer first, then the reason | reasoning first, then the answers (the answer steps of every kgqa method share one reply) | yes: one reply model for every method's answer step |
| temperature, replies | 0.3 every call; free-text replies | 0.3; JSON validated against a model, a budget per step, an unreadable reply read as "not sufficient" / "continue" | yes: replies a parser can check |
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
from kgqa.methods.llm_only import (
    ReasonedAnswer,
    Sufficiency,
    answer_alone,
    answer_from_evidence,
    generate_answers,
    judge_sufficiency,
)
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
    drop_zero_scored,
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
#: Tokens the relation listing of one selection prompt may take (as ToG's, :data:`kgqa.methods.tog.method.RELATION_BUDGET`).
RELATION_BUDGET = 2000


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
#: the dead end: the model answers from the triples gathered so far (PoG's half stop)
ANSWER_FROM_TRIPLES = Signature(PROMPTS, "answer_from_triples", ReasonedAnswer, "pog.answer", answer_from_evidence)
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
    #: why exploration stopped at a dead end (the model then answered from the triples gathered)
    half_stop: str | None = None
    fallback: str | None = None

    def round(self, number: int) -> PoGRound:
        """The account of round ``number``, made by its first step."""
        return self.round_of(self.rounds, number, PoGRound)


class PoGConfig(MethodConfig):
    """PoG's hyperparameters, defaulting to the paper's (depth 4, width 3, 70 candidates, 5 reverse steps, 0.3)."""

    depth: int = Field(default=4, ge=1, description="exploration rounds at most, one hop each (going back or adding "
                                                    "entities takes no extra round)")
    width: int = Field(default=3, ge=1, description="entities kept per (entity, relation) group; relations kept per "
                                                    "entity by the embedding scorer")
    max_relations: int = Field(default=5, ge=1, description="most relations the model may choose per entity (it is "
                                                            "asked for as few as the question needs)")
    prefilter_entities: int = Field(default=70, ge=1, description="above this many candidates, the most similar to "
                                                                  "the question are kept before pruning")
    max_reverse: int = Field(default=5, ge=0, description="times reflection may go back to earlier entities")
    relation_pruner: PrunerChoice = Field(default="auto", description="relation scorer; auto: embedding for local "
                                                                      "models, llm otherwise")
    entity_pruner: EntityScorerChoice = Field(default="auto", description="entity scorer; auto: embedding for local "
                                                                          "models, llm otherwise")
    relation_budget: int = Field(default=RELATION_BUDGET, ge=1, description="tokens the relation listing of one "
                                 "selection prompt may take: the whole list while it fits, else the embedder's best "
                                 "that fit (PoG lists every relation)")
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


def _ends(paths: list[WalkPath]) -> list[WalkPath]:
    """One path per end node (the first), in order: the entities a round goes on from."""
    first: dict[str, WalkPath] = {}
    for path in paths:
        first.setdefault(path.end, path)
    return list(first.values())


@register_method("pog")
class PoG(KGQAMethod):
    """Plan-on-Graph (see the module docstring)."""

    name = "pog"
    summary = "Plan-on-Graph: sub-objectives, relation and entity pruning, memory, reasoning and reflection"
    Config: ClassVar[type[MethodConfig]] = PoGConfig
    Details = PoGDetails
    signatures = (DECOMPOSE, RELATIONS, ENTITIES, UPDATE_MEMORY, REASON, REFLECT, ANSWER_FROM_TRIPLES, GENERATE)
    config: PoGConfig

    def needs(self, llm: str | None = None) -> Needs:
        """The KG, the LLM and the embedder, with any model: the embedder ranks a relation list over the prompt's
        budget and a group of more than ``prefilter_entities`` candidates (PoG's SBERT), and is the ``embedding``
        scorers' and the local models' ``auto`` scorer."""
        return Needs(kg=True, llm=True, embedder=True)

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
        kind = resolve_pruner(cfg.relation_pruner, llm_name)
        relations = RelationPruner(
            PruningConfig(kind=kind, top_k=cfg.width if kind == "embedding" else cfg.max_relations,
                          max_tokens=cfg.relation_tokens, budget=cfg.relation_budget, fill=False),
            llm=ctx.llm, embedder=ctx.embedder, signature=RELATIONS, temperature=cfg.temperature, seed=ctx.seed)
        entities = EntityPruner(resolve_entity_scorer(cfg.entity_pruner, llm_name), top_k=cfg.width, llm=ctx.llm,
                                embedder=ctx.embedder, signature=ENTITIES, max_tokens=cfg.entity_tokens,
                                temperature=cfg.temperature, seed=ctx.seed)
        goals = _numbered(subobjectives)
        memory = "(empty)"
        gathered: list[WalkPath] = []  # every path selected in any round
        earlier: list[WalkPath] = []  # frontier paths of earlier rounds (reflection may go back to them)
        reverses = 0
        for round_no in range(1, cfg.depth + 1):  # one hop a round; adding or going back takes no extra round
            selected, left_out = self._expand(question, ctx, frontier, relations, entities, goals, round_no)
            if not selected:
                ctx.trace.add("pog.dead_end", round=round_no)
                return self._from_triples(question, ctx, gathered, f"no candidate entity left in round {round_no}")
            gathered.extend(selected)
            memory = self._update_memory(question, ctx, subobjectives, memory, gathered, round_no)
            done = self._reason(question, ctx, memory, gathered, round_no)
            if done is not None:
                return done
            if round_no == cfg.depth:
                break  # a reflection now could not be explored
            earlier.extend(frontier)
            frontier = _ends(selected)
            action, chosen = self._reflect(question, ctx, goals, memory, frontier, left_out, earlier,
                                           reverses < cfg.max_reverse, round_no)
            note_entities("pog.reflect", [p.end for p in chosen])  # a left-out or earlier node taken back
            if action == "add":
                frontier = _ends(frontier + chosen)
            elif action == "backtrack":
                reverses += 1
                frontier = chosen
        note_stop("pog.depth", "depth_limit", depth=cfg.depth)
        return self._direct(question, ctx, f"depth {cfg.depth} exhausted without sufficient knowledge")

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
                entities: EntityPruner, goals: str, round_no: int) -> tuple[list[WalkPath], list[WalkPath]]:
        """One round of relation selection and entity pruning: the paths kept (a node reached by two groups once per
        group: each triple is evidence), and the named ones left out.

        At each frontier entity every hop is offered but the step straight back along the edge it came by (under
        ``walk_back``, as ToG); a node seen on another path or in an earlier round may be reached again."""
        cfg = self.config
        kg = ctx.kg
        names = kg.names([p.end for p in frontier])
        groups: list[list[WalkPath]] = []  # per (entity, relation): the paths one hop on, to the nodes it reaches
        for path in frontier:
            hops = entity_hops(kg, path.end, exclude=back_hop_to_skip(kg, path, cfg.walk_back))
            if not hops:
                continue
            label = names.get(path.end) or path.end
            kept = relations.prune(question.text, [label], (), hops, trace=ctx.trace, at=path.end,
                                   depth=len(path.hops) + 1, entity=label, subobjectives=goals).value or []
            for scored in kept:
                group = [path.extend(scored.hop, node) for node in
                         hop_neighbours(kg, path.end, scored.hop, limit=cfg.neighbour_limit, visited=path.nodes)]
                if group:
                    groups.append(group)
        node_names = kg.names(list({p.end: None for group in groups for p in group}))
        selected: list[WalkPath] = []
        left_out: list[WalkPath] = []
        prefiltered = 0
        for group in groups:  # PoG prunes each (entity, relation)'s neighbours on their own
            named = [p for p in group if node_names.get(p.end)]
            nameless = [p.end for p in group if not node_names.get(p.end)]
            note_entities("pog.nameless", nameless, nameless[: cfg.width])
            shown = named
            if len(named) > cfg.prefilter_entities:
                order, _ = similarity_order(ctx.embedder, question.text, [node_names.get(p.end) or "" for p in named])
                shown = [named[i] for i in order[: cfg.prefilter_entities]]
                note_entities("pog.prefilter", [p.end for p in named], [p.end for p in shown])
                prefiltered += len(shown)
            chosen = list(shown)
            if len(shown) > cfg.width:
                result = entities.prune(question.text, [Candidate(p.end, node_names.get(p.end)) for p in shown],
                                        trace=ctx.trace, subobjectives=goals)
                # as PoG's code (the model lists the entities it keeps): one scored zero is not kept
                scored = drop_zero_scored("pog.zero", result.value or [], score=lambda e: e.score,
                                          node=lambda e: e.id, depth=len(group[0].hops))
                by_end = {p.end: p for p in shown}
                chosen = [by_end[e.id] for e in scored]
            selected += [*chosen, *(p for p in group if p.end in nameless[: cfg.width])]
            left_out += [p for p in shown if p not in chosen]
        taken = {p.end for p in selected}
        left_out = [p for p in _ends(left_out) if p.end not in taken]
        account = self.account(ctx).round(round_no)
        candidates = len({p.end for group in groups for p in group})
        account.candidates, account.selected = candidates, verbalize_triples(kg, [p.triples[-1] for p in selected])
        ctx.trace.add("pog.round", round=round_no, frontier=[p.end for p in frontier], candidates=candidates,
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
        return self._prediction(ctx, reply.value.answers, gathered, nodes, "reasoning")

    def _from_triples(self, question: Question, ctx: MethodContext, gathered: list[WalkPath], cause: str) -> Prediction:
        """PoG's half stop: exploration can go no further, and the model answers from the triples gathered so far."""
        self.account(ctx).half_stop = cause
        if not gathered:
            return self._direct(question, ctx, cause)
        from kgqa.llm.structured import StructuredOutputError

        lines, nodes = shown_triples(ctx.kg, gathered, self.config.max_triples_shown)
        note_answer_cap("pog.answer", [n for p in gathered for n in p.nodes], nodes)
        try:
            answers, reasoning = generate_answers(ctx.llm, ANSWER_FROM_TRIPLES, question.text,
                                                  max_tokens=self.config.answer_tokens, triples="\n".join(lines))
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        ctx.trace.add("pog.answer", cause=cause, reasoning=reasoning, answers=answers)
        return self._prediction(ctx, answers, gathered, nodes, "half stop")

    def _prediction(self, ctx: MethodContext, answers: list[str], gathered: list[WalkPath], nodes: list[str],
                    stage: str) -> Prediction:
        items = link_answers(ctx.kg, answers, nodes)[: self.config.max_answers]
        ends = linked_nodes(items, nodes, ctx.kg)
        grounding = Grounding.SYNTHESIS if ends else Grounding.PARAMETRIC
        ctx.trace.add("answer", stage=stage, grounding=str(grounding), linked=len(ends), answers=len(items))
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
        if details.half_stop:
            lines.append(f"pog.half_stop: {details.half_stop}")
        if details.fallback:
            lines.append(f"fallback: {details.fallback}")
        fields: dict[str, Any] = {"subobjectives": details.subobjectives,
                                  "rounds": [{"round": r.round, "selected": r.selected} for r in details.rounds]}
        return Explanation(fields=fields, lines=lines)
