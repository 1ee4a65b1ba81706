# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""FoG (Foresight-over-Graph), after the paper in ../shared/papers (NeurIPS 2026; arXiv 2610.08388).

Graph side (Sec. 3.1-3.2, :mod:`kgqa.steps.foresight`): a trained foresight triple scorer over a frozen text encoder
scores the incident triples of a layered BFS from the topic entities (hop budget L = 3), keeping s_t > tau_e; the kept
edges are oriented toward the seeds; far-to-near feedback propagation updates node states and every edge is re-scored;
the potential subgraph keeps s_t > tau_p = 0.7. The scorer is trained by ``kgqa train fog``
(:mod:`kgqa.methods.fog.trainer`, :mod:`kgqa.methods.fog.training`).

LLM side (Sec. 3.1, 3.3; ``mode=llm``, :mod:`kgqa.methods.fog.memory`): a decomposition call, then per round one
memory-manager call over the memory and the potential subgraph; at most ``rounds`` + 1 calls. The answer is the
model's; graph mode's reading answers only when no round gives one, counted (``stats["graph_fallback"]``, the
``fog.fallback`` trace event).

Graph mode (``mode=graph``, the default with an offline local model or no model) is kgqa's, not the paper's FoG: no LLM
at all; the question is the only sub-question and the answers are read from the re-scored subgraph
(:mod:`kgqa.methods.fog.reading`): the best walk from a topic whose end nothing relevant leads on from gives the answer
pattern, and every entity that pattern reaches with a comparable score is an answer, ranked by support, then the KG's
statement counts, then score. Grounding ``structured``; the evidence is the answers' best paths. Reported as its own
method, ``fog[graph]`` (:meth:`FoG.label`: summary.json, report.md, ``kgqa eval compare``), never as ``fog``. Answer
types (``answer_types``, ``kgqa train answer-types``) and the typed retry are graph mode's, kgqa's additions. A
self-loop at a topic entity (MetaQA merges a film and its subject) is walked both ways like any triple.

Ablations (the paper's Tables 2-3) are settings: ``propagation=none`` (w/o FFP), ``memory=false`` (w/o MSM),
``foresight_expansion=false`` (w/o FSE), ``propagation=undirected`` (FFP replaced by an undirected GNN).

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| decomposition | one LLM call; standalone sub-questions as a JSON list | one call; an object `{"sub_questions": [...]}`; the question itself always kept, short, repeated or example-echoing ones dropped | yes: JSON modes of real servers require an object; small models echo the examples |
| encoder | Qwen3-Embedding-4B, frozen | all-MiniLM-L6-v2 (384-d), frozen; the scorer records its encoder | yes: no machine here can run a 4B encoder |
| triple scorer | a triple is 3 tokens; L_t blocks, cross-attention to the sub-questions | same, plus the BFS layer and walk direction on the relation token and 5 cosine match features | yes: MetaQA's chains reuse one relation at two depths in opposite directions |
| expansion | layered BFS, L = 3, keeps s_t > tau_e = 0.1 | L = 3, tau_e 0.02, `seed_floor`; hub caps (`seed_fanout`, `fanout`, `node_fanout`, `max_frontier`), each cut counted | yes: 0.1 cut ambiguous intermediate edges before propagation could lift them (MetaQA dev); bounded work at hubs |
| orientation | shortest distance from the topics | `layered`: the BFS unrolled, an entity at two depths is two nodes (`orientation=shortest` is the paper's) | yes: keeps walks whose answers lie nearer the topic (F1 99.6 against 98.2, docs/fog.md) |
| feedback propagation | far to near, L_m layers; every edge re-scored | same, L_m = 2 | no |
| potential subgraph | s_t > tau_p = 0.7 | same, at most `max_potential` (30) best-scored; the best expanded triples when none passes | yes: short prompts for small models; an empty list gives the model nothing to select |
| memory selection | the LLM copies each triple it keeps | candidates numbered, selected by number (`selection=index`; `copy` is the paper's) | yes: a few tokens per triple and no misquoted triples |
| rounds | R rounds, about R + 1 calls | R = `rounds` (2), at most R + 1 calls enforced, re-asks included | no |
| memory updates | absorbed triples excluded from later expansions; rejected ones masked for good | same: absorbed triples are not scored or walked again and the walk goes on from the memory's entities at their depths; shown but unselected triples masked (`absorbed_triples`, `masked_triples` in `fog.expand`) | no |
| the answer | the memory manager's, copied from the selected triples | the model's: an entity of a triple it was shown (memory, selected, or shown but not selected, which then joins the memory); never the topic; grounding `synthesis` | yes: an answer named from a shown triple the model forgot to select is still grounded in the KG |
| no answer after the rounds | not said | graph mode's reading of a fresh expansion guided by the question alone, grounding `structured`, counted (`stats.graph_fallback` in summary.json, `fog.fallback` in the trace) | yes: the paper does not say |
| training | triple-level, kappa = 10 negatives, AdamW lr 1e-5, 5 epochs, one loss | kappa = 10; two phases (scorer, then propagation on its expansions), lr 1e-3; trained on MetaQA dev, a Freebase sample, or questions made from the KG itself (`--synthetic`, no label) | yes: at 5 epochs the 384-d encoder reached far lower validation loss at 1e-3; MetaQA ships no train split; a user's KG has no labelled question (docs/fog.md) |
| graph mode | none: the LLM always answers | `mode=graph`: no LLM, kgqa's reading of the re-scored subgraph | yes: kgqa's addition, reported as `fog[graph]` |
| prompts | templates of Figs. 7-8 (decomposition, memory management) | kgqa's own wording, 3-4 worked examples each, replies without a reasoning field as the paper's | no |
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from kgqa.core import Grounding, MethodContext, Prediction, Question
from kgqa.llm import is_local_spec
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, Needs
from kgqa.methods.fog.config import HOW_TO_TRAIN, FoGConfig
from kgqa.methods.fog.details import AnswerTyping, Expansion, FoGDetails, TypedRetry
from kgqa.methods.fog.memory import SIGNATURES, answer_with_llm
from kgqa.methods.fog.reading import GraphReading
from kgqa.methods.fog.trainer import TRAINERS
from kgqa.methods.registry import register_method
from kgqa.steps.answers import answer_items, presentable
from kgqa.steps.entities import topics_in_kg
from kgqa.steps.foresight.answer_types import LIKELY_TYPE, AnswerTypes, QuestionTyping
from kgqa.steps.foresight.graph import Caps, ExpandedGraph, PatternPrior, RankedAnswer, Triple, pattern_name
from kgqa.steps.foresight.loading import ScorerLoader, load_answer_types
from kgqa.steps.losses import note_answer_cap, note_entities


@register_method("fog")
class FoG(KGQAMethod):
    """FoG with its trained foresight scorer (see the module docstring)."""

    name = "fog"
    summary = "Foresight-over-Graph: trained foresight triple scorer, far-to-near feedback propagation, LLM memory subgraph"
    Config: ClassVar[type[MethodConfig]] = FoGConfig
    Details = FoGDetails
    signatures = SIGNATURES
    trainers = TRAINERS
    config: FoGConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self._loader = ScorerLoader(self.config.scorer, method="fog", how_to_train=HOW_TO_TRAIN)
        self._types: tuple[AnswerTypes, Any] | None = None
        cfg = self.config
        self.reading = GraphReading(
            hops=cfg.hops, tau_e=cfg.tau_e, tau_p=cfg.tau_p, orientation=cfg.orientation,
            caps=Caps(seed_fanout=cfg.seed_fanout, fanout=cfg.fanout, max_frontier=cfg.max_frontier,
                      node_fanout=cfg.node_fanout),
            seed_floor=cfg.seed_floor, ratio=cfg.answer_ratio, within=cfg.answer_from, combine=cfg.path_score,
            simple=cfg.simple_paths, by_support=cfg.rank_by_support, continuation=cfg.continuation,
            by_records=cfg.rank_by_records)

    # -- the contract ----------------------------------------------------------------------------------------------

    def uses_llm(self, llm: str | None) -> bool:
        if self.config.mode == "auto":
            return bool(llm) and not is_local_spec(llm)
        return self.config.mode == "llm"

    def check_ready(self, ctx: MethodContext) -> None:
        self._loader.get(ctx)  # a KG with no scorer is refused before any question (and the scorer is loaded once)

    def needs(self, llm: str | None = None) -> Needs:
        return Needs(kg=True, llm=self.uses_llm(llm), embedder=False, artifacts=("label-embeddings",))

    def label(self, llm: str | None = None) -> str:
        """``fog`` for the paper's FoG (LLM mode); ``fog[graph]`` when the settings and ``llm`` resolve to graph mode,
        kgqa's method without decomposition, memory manager or LLM answer, reported as its own."""
        return self.name if self.uses_llm(llm) else f"{self.name}[graph]"

    def explain(self, prediction: Prediction) -> Explanation:
        """The expansion and propagation numbers, the memory rounds, the answer pattern and the evidence path."""
        details: FoGDetails = self.details_of(prediction)
        typed, retry = details.answer_type, details.typed_retry
        fields = {"mode": details.mode, "pattern": details.pattern, "paths": details.paths,
                  "rounds": len(details.rounds), "source": details.source,
                  "answer_type": typed.best if typed else None, "topic_type": typed.topic if typed else None,
                  "typed_retry": retry.used if retry else None}
        return Explanation(fields=fields, lines=details.lines())

    # -- one question ----------------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        ctx.details = FoGDetails()
        topics, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return Prediction(error=cause)
        present = [t.id for t in topics]
        scorer, labels = self._loader.get(ctx)
        if ctx.llm is None or not self.uses_llm(getattr(ctx.llm, "name", None) or "remote"):
            graph = self.expand(question.text, [question.text], present, scorer, labels, ctx, round_=1, skip=set())
            typing = self._answer_typing(question, labels, ctx)
            prior = typing.prior if typing else None
            ranked = self._rank(graph, ctx, prior)
            if typing is not None and self.config.typed_retry:
                graph, ranked = self._typed_retry(question, present, scorer, labels, ctx, typing, graph, ranked)
            return self.graph_answer(graph, ctx, source="graph mode", prior=prior, ranked=ranked)
        return answer_with_llm(self, question, present, scorer, labels, ctx)

    def _typed_retry(self, question: Question, seeds: list[str], scorer: Any, labels: Any, ctx: MethodContext,
                     typing: QuestionTyping, graph: ExpandedGraph, ranked: list[RankedAnswer]
                     ) -> tuple[ExpandedGraph, list[RankedAnswer]]:
        """When the answer pattern ends on a type the question almost surely does not ask for (or there is no
        answer), expand once more with the likely types' triples kept below tau_e as last hops
        (:func:`~kgqa.steps.foresight.graph.expand`'s ``typed_ends``), read it with only the patterns that keep
        the first reading's hops but the last and end on a likely type, and keep that reading if there is one. The
        scorer can cut the relation the question ends on outright (MetaQA: "the genre of Freedom Writers" scores
        has_genre 0.0000 and keeps written_by), which no prior over the kept patterns can undo. Only the last hop is
        re-read: a retry free to walk on past a right answer turned "We're No Angels was helmed by whom?" (directed_by,
        right; the classifier, wrongly, sure of films) into the films its directors wrote."""
        before = typing.end_p(ranked[0].pattern if ranked else None)
        likely = typing.types.likely_ends(typing.probabilities, LIKELY_TYPE)
        if (ranked and (before is None or before >= self.config.typed_retry_below)) or not likely:
            return graph, ranked

        def attempt(prior: PatternPrior, **expansion: Any) -> tuple[ExpandedGraph, list[RankedAnswer], bool]:
            """Expand again with the likely types kept and read with ``prior``; used unless it ruled out every
            pattern there."""
            again = self.expand(question.text, [question.text], seeds, scorer, labels, ctx, round_=1, skip=set(),
                                 typed_ends=likely, **expansion)
            read = self._rank(again, ctx, prior)
            return again, read, bool(read) and prior(read[0].pattern) > 0

        retry, retried, used = attempt(typing.retry_prior(ranked[0].pattern[:-1] if ranked else None))
        deep: dict[str, Any] = {}
        tau_e = self.config.typed_retry_tau_e
        if not used and tau_e is not None:
            # the scorer may have cut an inner hop, not the last: expand again with a floor at every layer and read
            # any pattern ending on a likely type
            retry, retried, used = attempt(typing.retry_prior(None), tau_e=tau_e, floor_every_layer=True)
            deep = {"deep_tau_e": tau_e}
        after = typing.end_p(retried[0].pattern if retried else None)
        account = TypedRetry(used=used, before=pattern_name(ranked[0].pattern) if ranked else None,
                             p_before=None if before is None else round(before, 4),
                             after=pattern_name(retried[0].pattern) if retried else None,
                             p_after=None if after is None else round(after, 4))
        ctx.trace.add("fog.typed_retry", **account.model_dump(), **deep)
        self.account(ctx).typed_retry = account
        return (retry, retried) if used else (graph, ranked)

    def expand(self, question: str, sub_questions: list[str], seeds: list[str], scorer: Any, labels: Any,
                ctx: MethodContext, *, round_: int, skip: set[Triple],
                typed_ends: Collection[tuple[str, bool]] = (), tau_e: float | None = None,
                floor_every_layer: bool = False, absorbed: Collection[Triple] = (),
                starts: Mapping[str, int] | None = None) -> ExpandedGraph:
        """The question's foresight expansion (guided by ``sub_questions``), propagated unless ``propagation=none``;
        ``skip`` (masked) and ``absorbed`` (in memory) triples are not expanded, the walk goes on from ``starts`` (the
        memory's entities, at their depths); the trace and the details record its numbers."""
        cfg = self.config
        started = time.perf_counter()
        texts = list(dict.fromkeys([question, *sub_questions]))
        vectors = scorer.questions(labels, texts)
        graph = self.reading.expand(ctx.kg, seeds, scorer.scorer_for(labels, vectors), skip=skip,
                                    filter_scores=cfg.foresight_expansion, typed_ends=typed_ends, tau_e=tau_e,
                                    floor_every_layer=floor_every_layer, absorbed=absorbed, starts=starts)
        expanded = time.perf_counter() - started
        if cfg.propagation != "none":
            scorer.propagate(graph, undirected=cfg.propagation == "undirected")
        potential = sum(1 for s in graph.scores if s > cfg.tau_p)
        # the scorer's cut (tau_e) and the hub caps decide what of the neighbourhood is kept (loss attribution)
        note_entities("fog.expand", None, graph.node_entity, loss="relation_pruning")
        account = Expansion(round=round_, typed=bool(typed_ends), scored=graph.scored, kept=len(graph),
                            layers=max(graph.layers, default=0), potential=potential, cut=dict(graph.cut))
        ctx.trace.add("fog.expand", **account.model_dump(), sub_questions=texts, nodes=len(graph.node_entity),
                      propagation=cfg.propagation, expand_s=round(expanded, 4),
                      total_s=round(time.perf_counter() - started, 4), **({} if tau_e is None else {"tau_e": tau_e}))
        self.account(ctx).expansions.append(account)
        return graph

    def answer_prior(self, question: Question, labels: Any, ctx: MethodContext) -> PatternPrior | None:
        """The answer-type prior of this question (``answer_types``), or None; the trace records the types' odds."""
        typing = self._answer_typing(question, labels, ctx)
        return typing.prior if typing else None

    def _answer_typing(self, question: Question, labels: Any, ctx: MethodContext) -> QuestionTyping | None:
        cfg = self.config
        if cfg.answer_types is None or cfg.answer_type_weight == 0:
            return None
        types, embedder = self._answer_types(labels.embedder)
        mentions = [t.name for t in question.topic_entities if t.name]
        typing = QuestionTyping.read(types, embedder, question.text, mentions, cfg.answer_type_weight,
                                     topic=cfg.answer_type_topic, junctions=cfg.answer_type_junctions)
        probabilities, topic = typing.probabilities, typing.topic
        extra: dict[str, Any] = {}
        focus = types.focus(question.text, mentions)
        if focus is not None:
            extra["focus"] = focus
        if topic is not None and types.topic_classes is not None:
            extra["topic"] = types.topic_classes[int(topic.argmax())]
            extra["topic_p"] = {c: round(float(p), 4) for c, p in zip(types.topic_classes, topic, strict=True)}
        if types.reader is not None:
            extra["reader"] = True  # the answer type read by the fine-tuned encoder, not the answer head
        best = int(probabilities.argmax())
        ctx.trace.add("fog.answer_types", best=types.classes[best],
                      p={c: round(float(p), 4) for c, p in zip(types.classes, probabilities, strict=True)},
                      junctions=bool(types.junctions) and cfg.answer_type_junctions, **extra)
        self.account(ctx).answer_type = AnswerTyping(
            best=types.classes[best], p=round(float(probabilities[best]), 4), focus=extra.get("focus"),
            topic=extra.get("topic"), topic_p=extra.get("topic_p", {}).get(extra.get("topic")),
            reader=types.reader is not None)
        return typing

    def _rank(self, graph: ExpandedGraph, ctx: MethodContext, prior: PatternPrior | None) -> list[RankedAnswer]:
        ranked, _ = self.reading.rank(graph, answerable=lambda ids: set(presentable(ctx.kg, ids)),
                                      pattern_prior=prior, statement_counts=ctx.kg.statement_counts)
        return ranked

    def _answer_types(self, scorer_embedder: Any) -> tuple[AnswerTypes, Any]:
        """The answer-type model and the embedder it reads with (the scorer's when it is the same one), loaded
        once."""
        if self._types is None:
            self._types = load_answer_types(str(self.config.answer_types), scorer_embedder)
        return self._types

    def graph_answer(self, graph: ExpandedGraph, ctx: MethodContext, *, source: str,
                      fallback: str | None = None, prior: PatternPrior | None = None,
                      ranked: list[RankedAnswer] | None = None) -> Prediction:
        """The answers graph mode reads from ``graph`` (ranked by ``prior`` unless ``ranked`` is given), with their
        best paths as evidence; ``source`` and ``fallback`` say why this reading answers."""
        cfg = self.config
        if ranked is None:
            ranked = self._rank(graph, ctx, prior)
        potential = sum(1 for s in graph.scores if s > self.reading.tau_p)
        ids = [a.entity for a in ranked]
        note_answer_cap("fog.max_answers", ids, ids[: cfg.max_answers])
        items = answer_items(ctx.kg, ids, limit=cfg.max_answers)
        evidence: list[list[str]] = []
        paths: list[str] = []
        names = ctx.kg.names(list({x for a in ranked[:cfg.max_evidence_paths] for e in a.path.edges
                                   for x in (graph.triples[e][0], graph.triples[e][2])}))
        for answer in ranked[:cfg.max_evidence_paths]:
            steps = []
            for e in answer.path.edges:
                triple = list(graph.triples[e])
                if triple not in evidence:
                    evidence.append(triple)
                h, r, t = graph.triples[e]
                steps.append(f"({names.get(h) or h}, {r}, {names.get(t) or t}) s={graph.scores[e]:.2f}")
            paths.append(" -> ".join(steps))
        pattern = pattern_name(ranked[0].pattern) if ranked else None
        ctx.trace.add("fog.answer", mode="graph", source=source, answers=[i.name for i in items][:20],
                      pattern=pattern, potential=potential, paths=paths[:5], fallback=fallback,
                      scores=[round(a.score, 4) for a in ranked[:10]], support=[a.support for a in ranked[:10]],
                      records=[a.records for a in ranked[:10]],
                      reason=None if items else "no path from a topic ends at a named entity or a value")
        details: FoGDetails = self.account(ctx)
        details.mode, details.pattern, details.paths = "graph", pattern, paths[:5]
        details.source, details.fallback = source, fallback
        if not items:  # nothing the KG supports: no answer, and no grounding credit for it
            return Prediction(grounding=Grounding.PARAMETRIC, evidence=evidence)
        return Prediction(answers=items, grounding=Grounding.STRUCTURED, evidence=evidence)
