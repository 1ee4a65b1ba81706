"""FoG's settings (:class:`FoGConfig`): the paper's L = 3 and tau_p = 0.7; tau_e and graph mode's reading tuned on
MetaQA dev (docs/fog.md); every setting checked when the method is built."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from kgqa.methods.base import MethodConfig
from kgqa.methods.fog.reading import READING
from kgqa.steps.foresight.answer_types import LIKELY_TYPE, check_answer_types_dir
from kgqa.steps.foresight.loading import check_scorer_dir

#: An answer type this likely is one the question asks for (the typed retry's trigger and target).
TYPED_RETRY_P = LIKELY_TYPE
#: How a user gets a scorer for a KG that has none (the end of the errors that say so).
HOW_TO_TRAIN = ("train one with `kgqa train fog --dataset NAME --split dev --kg KG --out MODELDIR` (a KG with no "
                "labelled questions: `kgqa train fog --synthetic --kg KG --out MODELDIR`) and pass "
                "`--method-config scorer=MODELDIR`")


class FoGConfig(MethodConfig):
    """FoG's settings: the paper's L = 3 and tau_p = 0.7; tau_e and the graph-mode reading tuned on MetaQA dev."""

    scorer: str | None = Field(default=None, description="directory of a trained scorer (`kgqa train fog --out DIR`); "
                                                         "None: the demo KG's own scorer on the demo KG")
    mode: Literal["auto", "graph", "llm"] = Field(default="auto", description="graph: no LLM, answers read from the "
                                                  "re-scored subgraph; llm: decomposition + memory manager; auto: "
                                                  "graph with a local model or none, llm otherwise")
    hops: int = Field(default=READING.hops, ge=1, le=4, description="hop budget L of the expansion")
    tau_e: float = Field(default=READING.tau_e, ge=0.0, le=1.0, description="expansion threshold (paper: 0.1; 0.02 tuned on "
                                                                   "MetaQA dev, docs/fog.md)")
    tau_p: float = Field(default=READING.tau_p, ge=0.0, le=1.0, description="potential-subgraph threshold")
    rounds: int = Field(default=2, ge=1, le=10, description="memory-manager rounds R (calls <= R + 1)")
    orientation: Literal["layered", "shortest"] = Field(default=READING.orientation, description="layered: the BFS unrolled "
                                                        "(ours); shortest: the paper's shortest-distance orientation")
    propagation: Literal["directed", "undirected", "none"] = Field(
        default="directed", description="directed: far-to-near FFP; undirected: the GNN ablation; none: w/o FFP")
    memory: bool = Field(default=True, description="False: w/o the memory subgraph manager (ablation)")
    foresight_expansion: bool = Field(default=True, description="False: plain BFS within the caps, then the scorer")
    seed_floor: bool = Field(default=READING.seed_floor,
                             description="when no triple at the topics passes tau_e, keep the best-scored relation "
                                         "there anyway (an empty first layer has no answer)")
    seed_fanout: int = Field(default=READING.caps.seed_fanout, ge=1,
                             description="neighbours per (entity, relation, direction) at a topic")
    fanout: int = Field(default=READING.caps.fanout, ge=1,
                        description="neighbours per (entity, relation, direction) further out")
    max_frontier: int = Field(default=READING.caps.max_frontier, ge=1,
                              description="frontier nodes expanded per layer (best-scored first)")
    node_fanout: int = Field(default=READING.caps.node_fanout, ge=1,
                             description="triples one non-topic node contributes in all")
    answer_ratio: float = Field(default=READING.ratio, gt=0.0, le=1.0, description="answers score at least this share of the "
                                                                       "best answer")
    answer_from: Literal["potential", "expanded"] = Field(
        default=READING.within, description="graph mode reads answers from the potential subgraph (s_t > tau_p) or from "
                                         "every re-scored edge of the expanded subgraph")
    path_score: Literal["product", "min", "min_last"] = Field(
        default=READING.combine, description="a path's score: the product of its edges' s_t, its weakest edge, or the "
                                        "geometric mean of its weakest and its last edge")
    simple_paths: bool = Field(default=READING.simple, description="answer paths never revisit an entity (False: only never "
                                                         "return to a topic entity)")
    rank_by_support: bool = Field(default=READING.by_support, description="rank answers by how many paths reach them, then score")
    rank_by_records: bool = Field(
        default=READING.by_records, description="break support's ties by how often the KG's source asserted each "
        "answer's facts (a fact true of both remakes that MetaQA merges into one title outranks one true of one)")
    continuation: Literal["path", "pattern"] = Field(
        default=READING.continuation, description="the answer pattern is the best walk's, each walk penalised by what "
        "leads on from its own end (path), or the pattern whose walks' ends lead on least on average (pattern: steadier "
        "with a weak propagation; docs/fog.md)")
    answer_types: str | None = Field(
        default=None, description="directory of an answer-type model (`kgqa train answer-types --out DIR`): graph "
        "reading weighs each answer pattern by P(its end's type | question) ** answer_type_weight (ours; None: off)")
    answer_type_weight: float = Field(default=1.0, ge=0.0, le=4.0,
                                      description="exponent of the answer-type prior (0: no effect; 1 chosen on "
                                                  "unseen MetaQA dev, docs/fog.md)")
    answer_type_topic: bool = Field(
        default=True, description="with answer_types whose model has a topic head: also weigh each pattern by P(the "
        "type where it starts | question) ** answer_type_weight (\"the movie X\": a film, not a person of that name)")
    answer_type_junctions: bool = Field(
        default=True, description="with answer_types whose model has junctions: also weigh each pattern by the share "
        "of entities that go on from one hop's end type by the next hop, where the two types differ, ** "
        "answer_type_weight (an actor named like a film is not that film)")
    typed_retry: bool = Field(
        default=True, description="with answer_types, graph mode: when the answer pattern ends on a type the question "
        "almost surely does not ask for (P < typed_retry_below), expand again keeping the triples of the likely types "
        f"(P >= {TYPED_RETRY_P}) below tau_e as last hops, and read that graph if a pattern with the same hops but the "
        "last ends on one (ours)")
    typed_retry_tau_e: float | None = Field(
        default=None, ge=0.0, le=1.0, description="with typed_retry: when the retry finds no pattern ending on a likely "
        "type either, expand once more at this tau_e keeping the best-scored group at every layer that "
        "keeps nothing, and read any pattern that ends on a likely type (the scorer cut an inner hop; ours; None: no "
        "second expansion)")
    typed_retry_below: float = Field(
        default=0.01, ge=0.0, le=TYPED_RETRY_P, description="the typed retry's trigger: P(type of the answer pattern's "
        "end) below this (0.01, set on unseen MetaQA dev: at 0.5 the classifier's confident mistakes, P 0.07, "
        "retried right readings into wrong ones; docs/fog.md)")
    max_answers: int = Field(default=100, ge=1, description="answers returned at most")
    max_potential: int = Field(default=30, ge=1, description="potential triples shown to the memory manager")
    max_sub_questions: int = Field(default=3, ge=1, le=8, description="sub-questions asked of the decomposition")
    max_evidence_paths: int = Field(default=20, ge=1, description="answer paths kept as evidence")
    decompose_tokens: int = Field(default=96, ge=16, description="max reply tokens of the decomposition")
    memory_tokens: int | None = Field(default=None, ge=16, description="max reply tokens of a memory-manager round "
                                                                       "(None: index 96 + 4 per triple shown, at most "
                                                                       "400; copy 64 + 20 per triple, at most 800)")
    selection: Literal["index", "copy"] = Field(
        default="index", description="index: candidates are numbered and the memory manager selects them by number "
                                     "(ours); copy: it copies each triple, as the paper")


    @field_validator("scorer")
    @classmethod
    def _scorer_dir(cls, value: str | None) -> str | None:
        return check_scorer_dir(value, what="FoG scorer", how_to_train=HOW_TO_TRAIN)

    @field_validator("answer_types")
    @classmethod
    def _answer_types_dir(cls, value: str | None) -> str | None:
        return check_answer_types_dir(value)
