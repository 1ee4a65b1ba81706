# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""ToG (Think-on-Graph, Sun et al., ICLR 2024): beam search over the KG with the LLM as the agent.

Per depth, for every entity at the end of a beam path: relation exploration (the hops the entity opens, all listed to
the model, which names up to ``width``; scored by rank and normalised to sum to 1), entity exploration (the
neighbours each kept relation reaches; with ``sample_above`` or more, ``retain`` of them drawn at random; scored by the
entity scorer, normalised to sum to 1), then every candidate path is scored relation score x entity score and the
``width`` best form the next beam; a candidate scored zero is pruned even when the beam has room, as in ToG's code
(``tog.zero`` in the loss log). A reasoning step then reads every triple gathered so far and says whether they
suffice; if so its answers are the prediction (grounding ``synthesis`` when they name nodes it was shown). When no
candidate is left the model answers from the triples gathered (ToG's half stop); when the depth is exhausted, from its
own knowledge (ToG's fallback, grounding ``parametric``, the cause in the trace).

The relation list: ToG's code shows the model every relation of the entity. kgqa does too while the listing fits
``relation_budget`` tokens (2,000, about 150 Freebase relations; estimated by
:func:`kgqa.steps.pruning.listing_tokens`); a longer list is ranked by the embedder and cut to the best that fit
(``tog.relations.prefilter`` in the loss log). Word overlap never cuts it: the embedder is loaded with any model
(:meth:`ToG.needs`), and without one the whole list is shown (the trace event says ``over_budget``). The model's choice
is used as it is: fewer than ``width`` names explore fewer relations (nothing tops them up). A reply that names no
listed relation, or cannot be read, is replaced by the embedder's ``width`` best (ToG's code keeps none: a departure,
see the table); without an embedder that entity opens no branch.

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| search | beam search, width 3, depth 3 | same (`width`, `depth`) | no |
| relation list | every relation of the entity, both directions, sorted | every relation while the listing fits `relation_budget` (2,000 tokens), else the embedder's best that fit | yes: prompt budget (a 4,096-token local model); no topic of MetaQA or the Freebase pieces reaches it |
| relation pruning | the LLM names `width` relations with scores summing to 1 | the LLM names up to `width` relations best first, scored by rank and normalised | yes: names alone are a shorter reply that a small model writes reliably |
| fewer relations named than `width` | explored as named | same (no top-up to `width`) | no |
| no listed relation named, or no readable reply | the entity adds no relation | the embedder's `width` best stand in; none without an embedder (never word overlap) | yes: under the oracle, which names no relation away from the gold chains (a question's second, constraint topic), the stand-in reaches 33 more of 300 cwq-gog answers (hit 85.0 against 74.0); a small model's unreadable reply does not end the branch |
| scorers | llm (default), bm25, sentence-BERT | `relation_pruner` llm, embedding, hybrid; `entity_pruner` llm, bm25, embedding; `auto`: embedding for an offline local model | yes: a 135M local model cannot rank relations |
| entity sampling | 5 drawn at random from 20 or more neighbours, unseeded | the same, seeded by the run's seed and the question id | yes: runs repeat |
| entity scoring | the LLM scores a relation's neighbours, summing to 1; path score = relation x entity | same | no |
| zero-scored candidates | pruned even when the beam has room | same (`tog.zero`) | no |
| nameless (CVT) nodes | dropped | kept as `[mediator id]`, an equal share of the relation's score | yes: paths through a CVT (film, performance, actor) |
| the hop back | the relation a path came by is dropped | same where the KG names reverses (Freebase); offered on MetaQA, never to the node just left (`walk_back`) | yes: MetaQA's KB names no reverses, so dropping it leaves no way to the siblings |
| head lookups | the head query's arguments are swapped | looked up the right way round | yes: a bug in ToG's code |
| reasoning | free text: {Yes} or {No} first, then why and the answer | JSON {sufficient, answers, reason}: the verdict first, as the paper | yes: a JSON reply, in the paper's order |
| half stop and fallback | no candidate left: answer from the triples; depth exhausted: answer alone | same | no |
| temperatures, replies, neighbours | 0.4 exploring, 0 reasoning; 256 tokens every reply; every neighbour read | same temperatures; a reply budget per step; up to `neighbour_limit` (500) neighbours a hop | yes: a rambling small model stops early; KG queries stay bounded |
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.errors import KGError
from kgqa.kg.base import Hop
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
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
)
from kgqa.steps.relations import describe_hop
from kgqa.steps.reply import ask_reply
from kgqa.steps.walks import (
    WalkBack,
    WalkPath,
    back_hop_to_skip,
    entity_hops,
    hop_neighbours,
    link_answers,
    linked_nodes,
    path_evidence,
    seeded_sample,
    shown_triples,
    verbalize_triples,
    walk_back_field,
)

PROMPTS = PromptBook.for_package("kgqa.methods.tog")
#: Tokens the relation listing of one pruning prompt may take (:class:`~kgqa.steps.pruning.PruningConfig` ``budget``):
#: about 150 Freebase relations (13 tokens each), which fits a 4,096-token local model beside the prompt's ~700 tokens
#: of instructions and examples; the offline Freebase pieces' topics (72 relations at most) and MetaQA's always fit.
RELATION_BUDGET = 2000
RELATIONS = Signature(PROMPTS, "prune_relations", RelationChoice, "tog.relations", choose_gold_relations)
ENTITIES = Signature(PROMPTS, "prune_entities", EntityScores, "tog.entities", score_gold_entities)
REASON = Signature(PROMPTS, "reason", Sufficiency, "tog.reason", judge_sufficiency)
#: the half stop: the model answers from the triples gathered so far
ANSWER_FROM_TRIPLES = Signature(PROMPTS, "answer_from_triples", ReasonedAnswer, "tog.answer", answer_from_evidence)
GENERATE = Signature(PROMPTS, "direct_generation", ReasonedAnswer, "tog.generate", answer_from_evidence)


class KeptPath(BaseModel):
    path: list[str]
    score: float


class Beam(BaseModel):
    """One depth of the beam search: how many candidate paths there were and the ones kept, best first."""

    depth: int
    candidates: int
    kept: list[KeptPath] = Field(default_factory=list)


class Reasoning(BaseModel):
    """One reasoning step: whether the triples gathered suffice (and why), or why its reply could not be read."""

    depth: int
    sufficient: bool = False
    reason: str = ""
    failure: str | None = None


class ToGDetails(MethodDetails):
    beams: list[Beam] = Field(default_factory=list)
    reasoning: list[Reasoning] = Field(default_factory=list)
    #: why the search stopped short of an answer: a half stop (answered from the triples gathered) or the fallback
    half_stop: str | None = None
    fallback: str | None = None


class ToGConfig(MethodConfig):
    """ToG's hyperparameters, defaulting to the paper's (width 3, depth 3, 5 entities retained per relation)."""

    width: int = Field(default=3, ge=1, description="beam width N: relations kept per entity and paths kept per depth")
    depth: int = Field(default=3, ge=1, description="maximum depth D_max")
    retain: int = Field(default=5, ge=1, description="entities retained per relation (ToG's num_retain_entity)")
    sample_above: int | None = Field(default=20, ge=1, description="with this many neighbours or more, draw `retain` "
                                                                    "of them at random, seeded (None: never sample)")
    relation_pruner: PrunerChoice = Field(default="auto", description="relation scorer; auto: embedding for local "
                                                                      "models, llm otherwise")
    entity_pruner: EntityScorerChoice = Field(default="auto", description="entity scorer; auto: embedding for local "
                                                                          "models, llm otherwise")
    relation_budget: int = Field(default=RELATION_BUDGET, ge=1, description="tokens the relation listing of one "
                                 "pruning prompt may take: the whole list while it fits, else the embedder's best that "
                                 "fit (ToG lists every relation)")
    explore_temperature: float = Field(default=0.4, ge=0.0, le=2.0, description="temperature of the pruning calls")
    reason_temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="temperature of reasoning and answers")
    neighbour_limit: int = Field(default=500, ge=1, description="neighbours read per (entity, relation)")
    walk_back: WalkBack = walk_back_field()
    relation_tokens: int | None = Field(default=None, ge=1, description="reply budget of relation pruning (None: 16 "
                                                                        "+ 24 per relation)")
    entity_tokens: int = Field(default=160, ge=16, description="reply budget of entity scoring")
    reason_tokens: int = Field(default=128, ge=16, description="reply budget of the reasoning step")
    answer_tokens: int = Field(default=256, ge=16, description="reply budget of the answer from triples or memory")
    max_triples_shown: int = Field(default=60, ge=1, description="gathered triples shown to the reasoning step")
    max_answers: int = Field(default=20, ge=1)


@dataclass(slots=True)
class _Candidate:
    path: WalkPath
    score: float
    relation_score: float
    entity_score: float


@register_method("tog")
class ToG(KGQAMethod):
    """Think-on-Graph (see the module docstring)."""

    name = "tog"
    summary = "Think-on-Graph: LLM-guided beam search over the KG (relation and entity exploration, then reasoning)"
    Config: ClassVar[type[MethodConfig]] = ToGConfig
    Details = ToGDetails
    signatures = (RELATIONS, ENTITIES, REASON, ANSWER_FROM_TRIPLES, GENERATE)
    config: ToGConfig

    def needs(self, llm: str | None = None) -> Needs:
        """The KG, the LLM and the embedder, with any model: the embedder ranks a relation list over the prompt's
        budget (and is the ``embedding`` scorers' and the local models' ``auto`` scorer)."""
        return Needs(kg=True, llm=True, embedder=True)

    # -- the whole question ----------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        cfg = self.config
        ctx.details = details = ToGDetails()
        topics, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return self._direct(question, ctx, cause)
        llm_name = getattr(ctx.llm, "name", None)
        relations = RelationPruner(
            PruningConfig(kind=resolve_pruner(cfg.relation_pruner, llm_name), top_k=cfg.width,
                          max_tokens=cfg.relation_tokens, budget=cfg.relation_budget, fill=False),
            llm=ctx.llm, embedder=ctx.embedder, signature=RELATIONS, temperature=cfg.explore_temperature,
            seed=ctx.seed)
        entities = EntityPruner(resolve_entity_scorer(cfg.entity_pruner, llm_name), top_k=cfg.retain, llm=ctx.llm,
                                embedder=ctx.embedder, signature=ENTITIES, max_tokens=cfg.entity_tokens,
                                temperature=cfg.explore_temperature, seed=ctx.seed)
        rng = random.Random(f"tog:{ctx.seed}:{question.id}")
        beam = [WalkPath.start(t.id) for t in topics]
        gathered: list[WalkPath] = []  # every path kept at every depth (ToG's cluster chains)
        try:
            for depth in range(1, cfg.depth + 1):
                explored = self._explore(question, ctx, beam, relations, entities, rng, depth)
                # the reference prunes a candidate its scores put at zero, even when fewer than `width` are left
                candidates = drop_zero_scored("tog.zero", explored, score=lambda c: c.score,
                                              node=lambda c: c.path.end, depth=depth)
                if not candidates:
                    ctx.trace.add("tog.half_stop", depth=depth, cause="no candidate entity left")
                    details.half_stop = f"no candidate entity left at depth {depth}"
                    return self._from_triples(question, ctx, gathered, "no candidate entity left at depth "
                                                                       f"{depth}")
                candidates.sort(key=lambda c: -c.score)  # stable: ties keep the exploration order
                beam = [c.path for c in candidates[: cfg.width]]
                note_entities("tog.beam", [c.path.end for c in candidates], [p.end for p in beam], depth=depth)
                gathered.extend(beam)
                kept = Beam(depth=depth, candidates=len(candidates), kept=[
                    KeptPath(path=verbalize_triples(ctx.kg, list(c.path.triples)), score=round(c.score, 4))
                    for c in candidates[: cfg.width]])
                ctx.trace.add("tog.beam", **kept.model_dump())
                details.beams.append(kept)
                done = self._reason(question, ctx, gathered, depth)
                if done is not None:
                    return done
        except (KGError, LLMError) as exc:
            return self._direct(question, ctx, f"{type(exc).__name__} during exploration: {exc}")
        note_stop("tog.depth", "depth_limit", depth=cfg.depth)
        return self._direct(question, ctx, f"depth {cfg.depth} exhausted without sufficient knowledge")

    # -- one depth -------------------------------------------------------------------------------------------------

    def _explore(self, question: Question, ctx: MethodContext, beam: list[WalkPath], relations: RelationPruner,
                 entities: EntityPruner, rng: random.Random, depth: int) -> list[_Candidate]:
        cfg = self.config
        kg = ctx.kg
        names = kg.names([p.end for p in beam])
        out: list[_Candidate] = []
        for path in beam:
            entity = path.end
            hops = entity_hops(kg, entity, exclude=back_hop_to_skip(kg, path, cfg.walk_back))
            if not hops:
                continue
            label = names.get(entity) or entity
            pruned = relations.prune(question.text, [label], (), hops, trace=ctx.trace, at=entity, depth=depth,
                                     entity=label)
            kept = pruned.value or []
            total = sum(max(s.score, 0.0) for s in kept)
            for scored in kept:
                relation_score = max(scored.score, 0.0) / total if total > 0 else 0.0  # all scored zero: all pruned
                reached = hop_neighbours(kg, entity, scored.hop, limit=cfg.neighbour_limit, visited=path.nodes)
                sampled = reached
                if cfg.sample_above is not None and len(reached) >= cfg.sample_above:
                    sampled = seeded_sample(reached, cfg.retain, rng)
                    note_entities("tog.sample", reached, sampled, depth=depth, loss="entity_sample")
                event = ctx.trace.add("tog.neighbours", depth=depth, entity=entity, relation=describe_hop(scored.hop),
                                      reached=len(reached), sampled=len(sampled) if sampled is not reached else None)
                for node, entity_score in self._score_entities(question, ctx, entities, label, scored.hop, sampled,
                                                               event, depth):
                    out.append(_Candidate(path.extend(scored.hop, node), relation_score * entity_score,
                                          relation_score, entity_score))
        return out

    def _score_entities(self, question: Question, ctx: MethodContext, entities: EntityPruner, label: str, hop: Hop,
                        nodes: list[str], event: dict[str, Any], depth: int) -> list[tuple[str, float]]:
        """(node, score) for at most ``retain`` nodes, scores summing to 1; a single node scores 1 without a call."""
        if len(nodes) <= 1:
            return [(n, 1.0) for n in nodes]
        names = ctx.kg.names(nodes)
        named = [Candidate(n, names.get(n)) for n in nodes if names.get(n)]
        nameless = [n for n in nodes if not names.get(n)]
        share = 1.0 / len(nodes)
        scored: list[tuple[str, float]] = [(n, share) for n in nameless]  # a CVT gets an equal share of its relation
        if len(named) == 1:
            scored.append((named[0].id, share))
        elif named:
            result = entities.prune(question.text, named, trace=ctx.trace, depth=depth, entity=label,
                                    relation=describe_hop(hop))
            kept = result.value or []
            total = sum(max(e.score, 0.0) for e in kept)
            named_share = len(named) / len(nodes)
            for e in kept:
                weight = max(e.score, 0.0) / total if total > 0 else 0.0
                scored.append((e.id, weight * named_share))
        scored.sort(key=lambda x: -x[1])
        note_entities("tog.retain", nodes, [n for n, _ in scored[: self.config.retain]], depth=depth)
        event["kept"] = len(scored[: self.config.retain])
        return scored[: self.config.retain]

    # -- reasoning and answers -------------------------------------------------------------------------------------

    def _reason(self, question: Question, ctx: MethodContext, gathered: list[WalkPath], depth: int) -> Prediction | None:
        lines, nodes = shown_triples(ctx.kg, gathered, self.config.max_triples_shown)
        note_answer_cap("tog.reason", [n for p in gathered for n in p.nodes], nodes)
        reply = ask_reply(ctx.llm, REASON, max_tokens=self.config.reason_tokens, temperature=self.config.reason_temperature,
                          question=question.text, triples="\n".join(lines))
        event = ctx.trace.add("tog.reason", depth=depth, triples=len(lines))
        details: ToGDetails = self.account(ctx)
        if not reply.ok or reply.value is None:
            event["failure"] = reply.failure
            event["sufficient"] = False
            details.reasoning.append(Reasoning(depth=depth, failure=reply.failure))
            return None
        event.update(sufficient=reply.value.sufficient, answers=reply.value.answers, reason=reply.value.reason)
        details.reasoning.append(Reasoning(depth=depth, sufficient=reply.value.sufficient, reason=reply.value.reason))
        if not reply.value.sufficient or not reply.value.answers:
            return None
        note_stop("tog.reason", "judge_stop", depth=depth)
        return self._prediction(ctx, reply.value.answers, gathered, nodes, "reasoning")

    def _from_triples(self, question: Question, ctx: MethodContext, gathered: list[WalkPath], cause: str) -> Prediction:
        """ToG's half stop: the model answers from the triples gathered so far and its own knowledge."""
        if not gathered:
            return self._direct(question, ctx, cause)
        lines, nodes = shown_triples(ctx.kg, gathered, self.config.max_triples_shown)
        from kgqa.llm.structured import StructuredOutputError

        try:
            answers, reasoning = generate_answers(ctx.llm, ANSWER_FROM_TRIPLES, question.text,
                                                  max_tokens=self.config.answer_tokens, triples="\n".join(lines))
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        ctx.trace.add("tog.answer", cause=cause, reasoning=reasoning, answers=answers)
        return self._prediction(ctx, answers, gathered, nodes, "half stop")

    def _prediction(self, ctx: MethodContext, answers: list[str], gathered: list[WalkPath], nodes: list[str],
                    stage: str) -> Prediction:
        items = link_answers(ctx.kg, answers, nodes)[: self.config.max_answers]
        ends = linked_nodes(items, nodes, ctx.kg)
        grounding = Grounding.SYNTHESIS if ends else Grounding.PARAMETRIC
        ctx.trace.add("answer", stage=stage, grounding=str(grounding), linked=len(ends), answers=len(items))
        return Prediction(answers=items, grounding=grounding, evidence=path_evidence(gathered, ends))

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        """ToG's fallback: the LLM alone (grounding ``parametric``)."""
        self.account(ctx).fallback = cause
        return answer_alone(question, ctx, GENERATE, cause=cause, max_tokens=self.config.answer_tokens,
                            max_answers=self.config.max_answers)

    def explain(self, prediction: Prediction) -> Explanation:
        details: ToGDetails = self.details_of(prediction)
        lines: list[str] = []
        for beam in details.beams:
            lines.append(f"depth {beam.depth}: {beam.candidates} candidates, kept")
            lines += [f"  {k.score:.3f}  " + " -> ".join(k.path) for k in beam.kept]
        for step in details.reasoning:
            lines.append(f"reasoning at depth {step.depth}: {'sufficient' if step.sufficient else 'not sufficient'}"
                         + (f" ({step.reason})" if step.reason else "")
                         + (f" [unreadable: {step.failure}]" if step.failure else ""))
        if details.half_stop:
            lines.append(f"tog.half_stop: {details.half_stop}")
        if details.fallback:
            lines.append(f"fallback: {details.fallback}")
        beams = [{"depth": b.depth, "kept": [k.model_dump() for k in b.kept]} for b in details.beams]
        return Explanation(fields={"beams": beams}, lines=lines)
