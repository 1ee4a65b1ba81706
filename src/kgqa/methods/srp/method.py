# ruff: noqa: E501 - the fidelity table below keeps one row a line (docs/methods.md copies it)
"""SRP (Self-Reflective Planning with Knowledge Graphs, arXiv 2505.19410): references, relation check, path
instantiation, a sequence judge and a path editor in a loop, then chain-of-thought answering over the kept triples.

1. **References**: the ``k_references`` (4) solved questions of the reference base (``kgqa train srp``,
   ``references=DIR``; ``references=demo``: the demo KG's default base) nearest to the question by MiniLM cosine, never
   the question itself. ``kgqa eval`` refuses a base drawn from the run's dataset and split
   (:mod:`kgqa.methods.srp.sources`) unless ``allow_same_split=true``, which labels the run an ablation.
2. **Relation check**: the topic entities' 1-hop relations scored for the question with the references as guidance;
   the top ``relation_top_k`` (3) seed the plan.
3. **Path generation**: one few-shot call writes one or more relation paths from the topic.
4. **Instantiation**: each relation of a path is matched, at that point of the walk, to the ``retrieval_top_k`` (5)
   most similar relations the reached entities have, by hybrid BM25 + dense similarity (``kgqa.text.scoring``); the walk
   stops at the first relation that matches nothing, which becomes the editor's error ("relation X not
   instantiated").
5. **Sequence judge**: reads the instantiated triple sequences and the references, reasons, then replies have-answer or
   no-answer, the sequences it keeps, and a message.
6. **Path editor**: with the judge's message (or the instantiation error), the 1-hop relations at the tail of the kept
   sequences (or where the walk stopped) and the references, rewrites the paths; at most ``max_edits`` edits.
7. **Answering**: chain of thought over the kept triples, the model's own knowledge allowed where they fall short (the
   paper's answering prompt). Grounding ``structured`` only when the judge said have-answer and the answers are nodes
   of the kept sequences; ``synthesis`` when they are nodes of sequences the judge never confirmed (edits exhausted,
   or the w/o reflection ablation); ``parametric`` otherwise.

Every judge verdict is recorded as an audit (``srp.judge``: the claim and the nodes of the kept sequences) and every
instantiation as ``srp.retrieved``, so the harness, not the method, measures the judge's precision and recall against
gold, the share of loops stopped on a sequence without the answer, and searching success (docs/srp.md). Ablations:
``use_references=false``, ``relation_check=false``, ``reflection=false`` (paper Table 3).

Fidelity (paper vs kgqa):

| mechanism | paper | kgqa | departs |
|---|---|---|---|
| reference base | 100 solved questions (question, path, answers) per dataset from its training set, by clusters | `kgqa train srp`: 100, 10 k-means clusters with an equal share, gold chains checked on the KG; eval refuses the run's own split | yes: no split kgqa reads is a training split: the recipe draws from dev and evaluates on test; the oracle bench draws from a subset of the evaluated split disjoint from its sample |
| reference retrieval | the 4 nearest by MiniLM similarity | same (cosine), never the question itself (by id or text) | no |
| references shown | in the relation check, path generation, judge and editor prompts | same | no |
| relation check | the LLM scores the topic's 1-hop relations (scores summing to 1, each explained); the best seed the plan | the LLM names the 3 best, best first (kgqa's shared relation scorer); above 30 relations the list is cut by the embedder; `relation_scorer=auto`: the embedding scorer for a local model | yes: one relation scorer for every method; prompt budget |
| path generation | one few-shot call | same, `{"paths": [[relation, ...]]}` | no |
| instantiation | each relation matched to its top-5 KG relations by BM25 + Contriever | a relation naming an available one exactly is that one alone; else the top 5 by BM25 + MiniLM at or above `min_match` 0.5; `max_paths` 200 paths per hop | yes: Contriever is not offline; near misses beside an exact name only add noise |
| sequence judge | thinking process, then have-answer or no-answer and the retained sequences | `{"reasoning", "verdict", "keep", "message"}`, reasoning first; at most `max_sequences` 20 sequences shown | yes: JSON instead of tags; prompt budget |
| path editor | the error or the judge's feedback, the instantiated paths, the references | the message, the relations at the tail of the kept sequences (or where the walk stopped, 30 at most), the references | yes: the relations to choose from instead of the instantiated paths' text (prompt budget) |
| reflection bound | none stated | `max_edits` 3 (at most 10 calls a question) | yes: a judge that never says have-answer must stop |
| edits exhausted | not said | answered from the last sequences shown; grounding never `structured` | yes: the paper is silent |
| answering | chain of thought over the retained triples, the model's own knowledge allowed | same; `structured` only after a have-answer verdict | no |
| several topic entities | plans from the topic entity | every path walked from each topic | yes: questions with several topics |
| temperature | 0.3 on every module | 0.3, seeded with the run's seed | no |
| demonstrations | 3-5 per prompt | 3-5 worked examples per prompt, written for kgqa | no |
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from kgqa.core import Audit, Grounding, MethodContext, Prediction, Question
from kgqa.errors import ConfigError, KGError
from kgqa.kg.base import Direction, Hop, KnowledgeGraph, parse_chain
from kgqa.llm.base import LLMError
from kgqa.llm.prompts import PromptBook, Signature
from kgqa.llm.structured import Reply
from kgqa.methods.base import Explanation, KGQAMethod, MethodConfig, MethodDetails, Needs
from kgqa.methods.llm_only import ReasonedAnswer, answer_alone, answer_from_evidence, generate_answers
from kgqa.methods.registry import register_method
from kgqa.methods.srp.sources import DEMO, announce, check_split, load_demo_base
from kgqa.methods.srp.trainer import TRAINERS
from kgqa.steps.entities import topics_in_kg
from kgqa.steps.losses import note_answer_cap, note_entities, note_relations, note_stop
from kgqa.steps.pruning import (
    PrunerChoice,
    PruningConfig,
    RelationChoice,
    RelationPruner,
    choose_gold_relations,
    resolve_pruner,
)
from kgqa.steps.relations import describe_hop
from kgqa.steps.reply import ask_reply
from kgqa.steps.walks import (
    WalkPath,
    entity_hops,
    hop_neighbours,
    link_answers,
    linked_nodes,
    node_label,
    path_evidence,
)

if TYPE_CHECKING:
    from kgqa.llm.oracle import OracleAsk

PROMPTS = PromptBook.for_package("kgqa.methods.srp")


class Plan(Reply):
    """Relation paths from the topic entity, each a list of relation names in walking order."""

    paths: list[list[str]] = Field(description="one or more relation paths")

    @field_validator("paths", mode="before")
    @classmethod
    def _one_path(cls, value: Any) -> Any:
        # A model that writes one flat path instead of a list of paths means that one path.
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return [value]
        return value


class Judgement(Reply):
    """The judge's reasoning first, then its verdict (the paper's judge writes its thinking before the verdict)."""

    reasoning: str = Field(default="", description="what the sequences show, written before the verdict")
    verdict: Literal["have_answer", "no_answer"]
    keep: list[int] = Field(default_factory=list, description="numbers of the sequences to keep")
    message: str = ""


def _oracle_plan(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's plan (and edit): the gold relation paths, each hop written as the relation lists write it."""
    paths = [[f"{relation} (incoming)" if backward else relation for relation, backward in chain]
             for chain in ask.gold.chains]
    return {"paths": ask.choose([[r] for r in _listed_relations(ask)], paths) or [["(none)"]]}


def _listed_relations(ask: OracleAsk) -> list[str]:
    """The relations the prompt lists (comma-separated), the plan's wrong picks."""
    return [r.strip() for r in str(ask.inputs.get("relations", "")).split(",") if r.strip() and r.strip() != "(none)"]


def _oracle_judgement(ask: OracleAsk) -> dict[str, Any]:
    """The oracle's judge: have-answer keeping the sequences that reach a gold answer, else no-answer."""
    listed = ask.numbered("sequences")
    right = [n for n, text in listed if ask.answers_in(text)]
    keep = ask.choose([n for n, _ in listed], right)
    have = ask.judge(bool(right))
    reasoning = (f"Sequences {', '.join(map(str, keep))} reach the answer." if have and keep else
                 "No sequence reaches the answer.")
    return {"reasoning": reasoning, "verdict": "have_answer" if have else "no_answer", "keep": keep if have else [],
            "message": "the kept sequences reach the answer" if have else "no sequence reaches the answer"}


RELATION_CHECK = Signature(PROMPTS, "prune_relations", RelationChoice, "srp.relation_check", choose_gold_relations)
PLAN = Signature(PROMPTS, "plan", Plan, "srp.plan", _oracle_plan)
JUDGE = Signature(PROMPTS, "judge", Judgement, "srp.judge", _oracle_judgement)
EDIT = Signature(PROMPTS, "edit", Plan, "srp.edit", _oracle_plan)
ANSWER = Signature(PROMPTS, "answer", ReasonedAnswer, "srp.answer", answer_from_evidence)
GENERATE = Signature(PROMPTS, "direct_generation", ReasonedAnswer, "srp.generate", answer_from_evidence)


class SRPRound(BaseModel):
    """One round of the loop: the sequences instantiated, the judge's verdict and what the editor made of it."""

    round: int
    sequences: int = 0
    error: str | None = None
    verdict: str | None = None
    kept: int = 0
    message: str = ""
    edited: list[list[str]] | None = None


class SRPDetails(MethodDetails):
    references: list[str] = Field(default_factory=list)
    plan: list[list[str]] = Field(default_factory=list)
    rounds: list[SRPRound] = Field(default_factory=list)
    fallback: str | None = None

    def round(self, number: int) -> SRPRound:
        """The account of round ``number``, made by its first step."""
        return self.round_of(self.rounds, number, SRPRound)


class SRPConfig(MethodConfig):
    """SRP's settings, defaulting to the paper's (4 references, top 3 relations, top 5 matches, temperature 0.3)."""

    references: str | None = Field(default=None, description="directory of a reference base (kgqa train srp), or "
                                                              "demo: the demo KG's default base; None: no references "
                                                              "(kgqa ask on the demo KG uses demo)")
    allow_same_split: bool = Field(default=False, description="let kgqa eval run on the split the references come "
                                                              "from (recorded as an ablation in summary.json)")
    use_references: bool = Field(default=True, description="False: the w/o references ablation")
    relation_check: bool = Field(default=True, description="False: the w/o relation check ablation")
    reflection: bool = Field(default=True, description="False: the w/o reflection ablation (instantiate once, answer)")
    k_references: int = Field(default=4, ge=1, description="references retrieved per question")
    relation_top_k: int = Field(default=3, ge=1, description="relations the relation check keeps")
    retrieval_top_k: int = Field(default=5, ge=1, description="KG relations each generated relation is matched to")
    min_match: float = Field(default=0.5, ge=0.0, le=1.0, description="least hybrid similarity of a match")
    alpha: float = Field(default=0.5, ge=0.0, le=1.0, description="dense share of the hybrid similarity")
    max_edits: int = Field(default=3, ge=0, description="path edits at most (the paper states none)")
    relation_scorer: PrunerChoice = Field(default="auto", description="relation check scorer; auto: embedding for "
                                                                      "local models, llm otherwise")
    prefilter: int = Field(default=30, ge=1, description="most relations one prompt lists")
    max_paths: int = Field(default=200, ge=1, description="walk paths kept per hop")
    max_sequences: int = Field(default=20, ge=1, description="sequences shown to the judge and the answer step")
    neighbour_limit: int = Field(default=200, ge=1, description="neighbours read per (entity, relation)")
    temperature: float = Field(default=0.3, ge=0.0, le=2.0)
    plan_tokens: int = Field(default=96, ge=16)
    judge_tokens: int = Field(default=192, ge=16)
    edit_tokens: int = Field(default=96, ge=16)
    answer_tokens: int = Field(default=256, ge=16)
    max_answers: int = Field(default=20, ge=1)


class _Instantiation:
    """The sequences one set of paths instantiates, and where it stopped."""

    def __init__(self) -> None:
        self.paths: list[WalkPath] = []
        self.error: str | None = None
        self.stop_nodes: list[str] = []
        self.truncated = False


@register_method("srp")
class SRP(KGQAMethod):
    """Self-Reflective Planning (see the module docstring)."""

    name = "srp"
    summary = "Self-Reflective Planning: references, relation check, path instantiation, a judge and an editor in a loop"
    Config: ClassVar[type[MethodConfig]] = SRPConfig
    Details = SRPDetails
    signatures = (RELATION_CHECK, PLAN, JUDGE, EDIT, ANSWER, GENERATE)
    trainers = TRAINERS
    config: SRPConfig

    def __init__(self, config: MethodConfig | None = None, /, **settings: Any) -> None:
        super().__init__(config, **settings)
        self._base: Any = None
        self._retrieval_embedder: Any = None
        self._lock = threading.Lock()
        if self.config.references not in (None, DEMO) and self.config.use_references:
            from kgqa.methods.srp.references import ReferenceBase

            self._base = ReferenceBase.load(self.config.references)  # a bad directory fails here, naming it

    # -- where the references come from (kgqa eval and kgqa ask call these before the first question) -----------------

    def check_run(self, *, dataset: str, split: str, questions: Sequence[Question]) -> dict[str, Any]:
        """What ``kgqa eval`` records about the references (config.json; ``ablation`` into summary.json too); refuses
        a base drawn from the run's dataset and split unless ``allow_same_split`` (:func:`sources.check_split`)."""
        cfg = self.config
        off = [name for name, on in (("w/o references", cfg.use_references and cfg.references is not None),
                                      ("w/o relation check", cfg.relation_check), ("w/o reflection", cfg.reflection))
               if not on]
        record: dict[str, Any] = {"references": None}
        if cfg.use_references and cfg.references is not None:
            record = check_split(cfg.references, self._base, dataset=dataset, split=split, questions=questions,
                                 allow_same_split=cfg.allow_same_split)
        if off:
            paper = f"srp: the paper's {', '.join(off)} ablation (Table 3)"
            record["ablation"] = "; ".join(filter(None, [record.get("ablation"), paper]))
        return record

    def prepare_ask(self, ctx: MethodContext, say: Callable[[str], None], *, kg_spec: str) -> None:
        """``kgqa ask``: on the demo KG with no references, the default demo base (built on first use); one line says
        where the references come from, or that there are none and how to build them."""
        from kgqa.kg.demo import is_demo_kg

        if self.config.use_references and self.config.references is None and is_demo_kg(ctx.kg):
            self.config = self.config.model_copy(update={"references": DEMO})
        if self.config.use_references and self.config.references == DEMO:
            self._demo_base(ctx, say)
        announce(self.config.references, self._base, use_references=self.config.use_references, kg_spec=kg_spec,
                 say=say)

    def _demo_base(self, ctx: MethodContext, say: Callable[[str], None] | None = None) -> Any:
        with self._lock:
            if self._base is None:
                from kgqa.artifacts import ArtifactStore

                store = ctx.artifacts if ctx.artifacts is not None else ArtifactStore(progress=say)
                self._base = load_demo_base(store, ctx.embedder)
            return self._base

    def needs(self, llm: str | None = None) -> Needs:
        # The embedder: instantiation's dense similarity always; references and an embedding relation check too.
        del llm
        return Needs(kg=True, llm=True, embedder=True)

    # -- the whole question ----------------------------------------------------------------------------------------

    def answer(self, question: Question, ctx: MethodContext) -> Prediction:
        if ctx.embedder is None:
            raise ConfigError("srp needs an embedder (instantiation matches relations by BM25 + dense similarity)")
        ctx.details = SRPDetails()
        topics, cause = topics_in_kg(question, ctx, self.name)
        if cause is not None:
            return self._direct(question, ctx, cause)
        try:
            return self._solve(question, ctx, [t.id for t in topics], [t.name for t in topics])
        except (KGError, LLMError) as exc:
            return self._direct(question, ctx, f"{type(exc).__name__} during the search: {exc}")

    def _solve(self, question: Question, ctx: MethodContext, topics: list[str], topic_names: list[str]) -> Prediction:
        cfg = self.config
        references = self._references(question, ctx)
        valuable = self._relation_check(question, ctx, topics, topic_names, references)
        paths = self._plan(question, ctx, topic_names, valuable, references)
        audits: list[Audit] = []
        kept: list[WalkPath] = []
        shown: list[WalkPath] = []
        edits = 0
        verdict = None
        for step in range(cfg.max_edits + 1):
            inst = self._instantiate(ctx, topics, paths, step)
            shown = inst.paths[: cfg.max_sequences]
            note_answer_cap("srp.sequences", _nodes(inst.paths, topics), _nodes(shown, topics))
            audits.append(Audit(check="srp.retrieved", claim=None, nodes=_nodes(inst.paths, topics), step=step))
            if not cfg.reflection:
                kept = shown
                break
            verdict, kept, message = self._judge(question, ctx, shown, inst, references, step)
            # The claim is checked on what it is about: the kept sequences for have-answer, the sequences shown for
            # no-answer (a no-answer on sequences that held the answer is a miss of the judge).
            judged = kept if verdict == "have_answer" else shown
            audits.append(Audit(check="srp.judge", claim=verdict == "have_answer", nodes=_nodes(judged, topics),
                                step=step))
            if verdict == "have_answer":
                note_answer_cap("srp.judge", _nodes(shown, topics), _nodes(kept, topics))
                note_stop("srp.judge", "judge_stop")
                break
            if step == cfg.max_edits:
                kept = kept or shown
                ctx.trace.add("srp.edits_exhausted", edits=edits)
                note_stop("srp.edits", "budget_limit")
                break
            paths = self._edit(question, ctx, topic_names, paths, message, kept or shown, inst, references, step)
            edits += 1
        prediction = self._answer(question, ctx, kept, topics, confirmed=verdict == "have_answer")
        return prediction.model_copy(update={"audits": audits, "stats": {"edits": float(edits)}})

    # -- the steps -------------------------------------------------------------------------------------------------

    def _references(self, question: Question, ctx: MethodContext) -> str:
        if not self.config.use_references or self.config.references is None:
            ctx.trace.add("srp.references", used=False,
                          reason="ablation" if not self.config.use_references else "no reference base configured")
            return "(none)"
        base = self._demo_base(ctx) if self.config.references == DEMO else self._base
        # Never the question itself, by id or by its text (a base drawn from the run's split holds it).
        found = base.nearest(question.text, self._embedder_for_references(ctx), k=self.config.k_references,
                             exclude_ids=(question.id,), exclude_text=question.text)
        ctx.trace.add("srp.references", used=True, base=self.config.references, ids=[r.id for r in found])
        self.account(ctx).references = [r.id for r in found]
        return "\n".join(f"Question: {r.question}\nPath: {_describe_chain(r.path)}\nAnswers: {', '.join(r.answers)}"
                         for r in found) or "(none)"

    def _embedder_for_references(self, ctx: MethodContext) -> Any:
        """The run's embedder when the base was embedded with it, else the base's own (loaded once): retrieval must
        compare vectors of one model, whatever ``--embedder`` the run uses for instantiation."""
        if self._retrieval_embedder is None:
            try:
                self._base.check_embedder(ctx.embedder)
                self._retrieval_embedder = ctx.embedder
            except ConfigError:
                from kgqa.text.embedders import load_embedder

                self._retrieval_embedder = load_embedder(self._base.embedder_spec)
        return self._retrieval_embedder

    def _relation_check(self, question: Question, ctx: MethodContext, topics: list[str], topic_names: list[str],
                        references: str) -> list[str]:
        if not self.config.relation_check:
            ctx.trace.add("srp.relation_check", used=False)
            return []
        hops = list(dict.fromkeys(h for t in topics for h in entity_hops(ctx.kg, t)))
        kind = resolve_pruner(self.config.relation_scorer, getattr(ctx.llm, "name", None))
        pruner = RelationPruner(PruningConfig(kind=kind, top_k=self.config.relation_top_k,
                                              prefilter=max(self.config.prefilter, self.config.relation_top_k)),
                                llm=ctx.llm, embedder=ctx.embedder, signature=RELATION_CHECK,
                                temperature=self.config.temperature, seed=ctx.seed)
        result = pruner.prune(question.text, topic_names, (), hops, trace=ctx.trace, references=references)
        return [describe_hop(s.hop) for s in result.value or []]

    def _plan(self, question: Question, ctx: MethodContext, topic_names: list[str], valuable: list[str],
              references: str) -> list[list[str]]:
        reply = ask_reply(ctx.llm, PLAN, max_tokens=self.config.plan_tokens,
                          temperature=self.config.temperature, seed=ctx.seed, question=question.text,
                          topics=", ".join(topic_names), relations=", ".join(valuable) or "(not checked)",
                          references=references)
        paths = _clean_paths(reply.value.paths if reply.ok and reply.value else [])
        event = ctx.trace.add("srp.plan", paths=paths)
        if not paths:
            event["failure"] = reply.failure or "no path"
            paths = [[v] for v in valuable[:1]]  # the best checked relation, so the loop has something to edit
        self.account(ctx).plan = paths
        return paths

    def _instantiate(self, ctx: MethodContext, topics: list[str], paths: list[list[str]], step: int) -> _Instantiation:
        """Walk every path from every topic; each generated relation matched to the most similar available ones."""
        from kgqa.text.scoring import HybridScorer

        cfg = self.config
        scorer = HybridScorer(ctx.embedder, alpha=cfg.alpha)
        out = _Instantiation()
        matches_log: list[dict[str, Any]] = []
        for path in paths:
            frontier = [WalkPath.start(t) for t in topics]
            for relation in path:
                # The hop back along the last edge stays available: MetaQA's "films with the same director" walks
                # directed_by and back (to other films; the node just left is not offered again).
                available = list(dict.fromkeys(h for p in frontier for h in entity_hops(ctx.kg, p.end)))
                matched = _match_relation(relation, available, scorer, cfg.retrieval_top_k, cfg.min_match)
                note_relations("srp.instantiate", available, matched, at=[p.end for p in frontier])
                matches_log.append({"relation": relation, "available": len(available),
                                    "matched": [describe_hop(h) for h in matched]})
                if not matched:
                    out.error = out.error or f"relation {relation} not instantiated"
                    out.stop_nodes = list(dict.fromkeys(p.end for p in frontier))
                    frontier = []
                    break
                extended: list[WalkPath] = []
                for p in frontier:
                    for hop in matched:
                        # Never back along the edge just walked, nor to the topic; an entity met before may be
                        # reached again by another relation (the writer who also directed, in MetaQA's 3-hop gold).
                        back = {p.nodes[-2]} if hop == p.back_hop() else set()
                        for node in hop_neighbours(ctx.kg, p.end, hop, limit=cfg.neighbour_limit,
                                                   visited={p.nodes[0], *back}):
                            extended.append(p.extend(hop, node))
                if len(extended) > cfg.max_paths:
                    out.truncated = True
                    note_entities("srp.max_paths", [p.end for p in extended], [p.end for p in extended[: cfg.max_paths]])
                    extended = extended[: cfg.max_paths]
                if not extended:
                    out.error = out.error or f"relation {relation} reaches no entity"
                    out.stop_nodes = list(dict.fromkeys(p.end for p in frontier))
                    frontier = []
                    break
                frontier = extended
            out.paths.extend(frontier)
        ctx.trace.add("srp.instantiate", round=step, paths=paths, matches=matches_log, sequences=len(out.paths),
                      truncated=out.truncated, error=out.error)
        account = self.account(ctx).round(step)
        account.sequences, account.error = len(out.paths), out.error
        return out

    def _judge(self, question: Question, ctx: MethodContext, shown: list[WalkPath], inst: _Instantiation,
               references: str, step: int) -> tuple[str, list[WalkPath], str]:
        verdict, keep, message = self._verdict(question, ctx, shown, inst, references, step)
        account = self.account(ctx).round(step)
        account.verdict, account.kept, account.message = verdict, len(keep), message
        return verdict, keep, message

    def _verdict(self, question: Question, ctx: MethodContext, shown: list[WalkPath], inst: _Instantiation,
                 references: str, step: int) -> tuple[str, list[WalkPath], str]:
        if not shown:
            message = inst.error or "no sequence was instantiated"
            ctx.trace.add("srp.judge", round=step, verdict="no_answer", message=message, kept=0, called=False)
            return "no_answer", [], message
        reply = ask_reply(ctx.llm, JUDGE, max_tokens=self.config.judge_tokens,
                          temperature=self.config.temperature, seed=ctx.seed, question=question.text,
                          sequences=_sequences(ctx.kg, shown), references=references,
                          error=inst.error or "none")
        if not reply.ok or reply.value is None:
            message = inst.error or "the judge's reply could not be read"
            ctx.trace.add("srp.judge", round=step, verdict="no_answer", message=message, kept=0, failure=reply.failure)
            return "no_answer", [], message
        keep = [shown[i - 1] for i in dict.fromkeys(reply.value.keep) if 1 <= i <= len(shown)]
        if reply.value.verdict == "have_answer" and not keep:
            keep = list(shown)  # "the answer is here" with nothing pruned: every sequence shown is kept
        message = reply.value.message or inst.error or ""
        ctx.trace.add("srp.judge", round=step, verdict=reply.value.verdict, kept=len(keep), shown=len(shown),
                      message=message, reasoning=reply.value.reasoning)
        return reply.value.verdict, keep, message

    def _edit(self, question: Question, ctx: MethodContext, topic_names: list[str], paths: list[list[str]],
              message: str, kept: list[WalkPath], inst: _Instantiation, references: str,
              step: int) -> list[list[str]]:
        tails = inst.stop_nodes if inst.error else list(dict.fromkeys(p.end for p in kept))
        hops = list(dict.fromkeys(h for n in tails[:20] for h in entity_hops(ctx.kg, n)))
        relations = ", ".join(describe_hop(h) for h in hops[: self.config.prefilter]) or "(none)"
        reply = ask_reply(ctx.llm, EDIT, max_tokens=self.config.edit_tokens,
                          temperature=self.config.temperature, seed=ctx.seed, question=question.text,
                          topics=", ".join(topic_names), paths=_describe_paths(paths), message=message or "none",
                          relations=relations, references=references)
        edited = _clean_paths(reply.value.paths if reply.ok and reply.value else [])
        event = ctx.trace.add("srp.edit", round=step, message=message, offered=len(hops), paths=edited)
        self.account(ctx).round(step).edited = edited
        if not edited:
            event["failure"] = reply.failure or "no path"
            return paths
        return edited

    def _answer(self, question: Question, ctx: MethodContext, kept: list[WalkPath], topics: list[str], *,
                confirmed: bool) -> Prediction:
        """Answer from ``kept``; ``confirmed``: the judge said have-answer on them (else they are the last sequences
        shown after no-answer verdicts, or the w/o reflection ablation's, and the answer is never ``structured``)."""
        from kgqa.llm.structured import StructuredOutputError

        if not kept:
            return self._direct(question, ctx, "no sequence kept")
        try:
            answers, reasoning = generate_answers(ctx.llm, ANSWER, question.text, max_tokens=self.config.answer_tokens,
                                                  sequences=_sequences(ctx.kg, kept))
        except StructuredOutputError as exc:
            answers, reasoning = [], f"unreadable reply: {exc}"
        nodes = [n for p in kept for n in p.nodes]
        items = link_answers(ctx.kg, answers, nodes)[: self.config.max_answers]
        linked = linked_nodes(items, nodes, ctx.kg)
        ends = linked - set(topics) or linked
        grounding = (Grounding.PARAMETRIC if not ends else
                     Grounding.STRUCTURED if confirmed else Grounding.SYNTHESIS)
        ctx.trace.add("answer", stage="answer", grounding=str(grounding), reasoning=reasoning, answers=len(items),
                      linked=len(ends), confirmed=confirmed)
        return Prediction(answers=items, grounding=grounding, evidence=path_evidence(kept, ends))

    def _direct(self, question: Question, ctx: MethodContext, cause: str) -> Prediction:
        self.account(ctx).fallback = cause
        return answer_alone(question, ctx, GENERATE, cause=cause, max_tokens=self.config.answer_tokens,
                            max_answers=self.config.max_answers)

    def explain(self, prediction: Prediction) -> Explanation:
        details: SRPDetails = self.details_of(prediction)
        lines = [f"references: {', '.join(details.references)}"] if details.references else []
        if details.plan or details.rounds:
            lines.append(f"plan: {_describe_paths(details.plan)}")
        for r in details.rounds:
            lines.append(f"instantiated (round {r.round}): {r.sequences} sequences" + (f"; {r.error}" if r.error else ""))
            if r.verdict is not None:
                lines.append(f"judge: {r.verdict}, kept {r.kept}" + (f" ({r.message})" if r.message else ""))
            if r.edited is not None:
                lines.append(f"edit: {_describe_paths(r.edited)}")
        if details.fallback:
            lines.append(f"fallback: {details.fallback}")
        return Explanation(fields={"edits": prediction.stats.get("edits")}, lines=lines)


# -- helpers ---------------------------------------------------------------------------------------------------------


def _clean_paths(paths: list[list[str]]) -> list[list[str]]:
    cleaned = [[str(r).strip() for r in path if str(r).strip()] for path in paths]
    return [p for p in cleaned if p][:5]


def _describe_chain(path: str) -> str:
    """A reference's path (``r1,^r2``) as the prompts write relation paths: ``r1 -> r2 (incoming)``."""
    return " -> ".join(describe_hop(h) for h in parse_chain(path))


def _describe_paths(paths: list[list[str]]) -> str:
    return "; ".join(" -> ".join(p) for p in paths) or "(none)"


def _nodes(paths: list[WalkPath], topics: list[str]) -> list[str]:
    """Every node the sequences reach, the topics left out (a topic is never its own answer)."""
    skip = set(topics)
    return list(dict.fromkeys(n for p in paths for n in p.nodes if n not in skip))


def _sequences(kg: KnowledgeGraph, paths: list[WalkPath]) -> str:
    names = kg.names(list(dict.fromkeys(n for p in paths for n in p.nodes)))
    lines = []
    for i, path in enumerate(paths, start=1):
        parts = [node_label(path.nodes[0], names)]
        for hop, node in zip(path.hops, path.nodes[1:], strict=True):
            parts += [describe_hop(hop), node_label(node, names)]
        lines.append(f"{i}. " + " -> ".join(parts))
    return "\n".join(lines)


def _match_relation(text: str, available: list[Hop], scorer: Any, top_k: int, min_match: float) -> list[Hop]:
    """The available hops a generated relation stands for: the one it names exactly, else the ``top_k`` most similar
    at or above ``min_match`` (hybrid BM25 + dense over the relation's words)."""
    if not available:
        return []
    wanted = text.strip().strip("\"'`").strip()
    incoming = wanted.endswith("(incoming)")
    bare = wanted.removesuffix("(incoming)").strip().casefold()
    exact = [h for h in available if h.relation.casefold() == bare]
    if exact:
        direction = Direction.IN if incoming else Direction.OUT
        chosen = [h for h in exact if h.direction is direction] or exact
        return chosen[:1]
    relations = list(dict.fromkeys(h.relation for h in available))
    ranked = scorer.rank(bare, relations)
    good = [r for r, score in ranked if score >= min_match][:top_k]
    return [h for r in good for h in available if h.relation == r][:top_k]
