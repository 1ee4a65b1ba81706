"""The settings of a foresight scorer's training (:class:`TrainSettings`; ``kgqa train fog`` fills them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: how the propagation loss averages (TrainSettings.propagation_weighting, ``--propagation-weighting``)
PROPAGATION_WEIGHTINGS = ("edge", "question")
#: what chooses the propagation epoch kept (TrainSettings.propagation_select, ``--propagation-select``)
PROPAGATION_SELECTIONS = ("loss", "answers")


@dataclass(frozen=True)
class TrainSettings:
    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 1e-3
    epochs: int = 5
    batch_size: int = 512
    kappa: int = 10
    max_positives_per_layer: int = 2
    neighbour_limit: int = 60
    #: extra negatives per (relation, direction) out of each gold answer ("do not go on past the answer"), on top of kappa
    stop_negatives: int = 3
    validation_share: float = 0.05
    patience: int = 2
    propagation_questions: int = 3000
    propagation_epochs: int = 5
    propagation_lr: float | None = None
    #: how the propagation loss weighs edges: "edge" (every edge of a batch alike, so a hub-heavy subgraph of a few
    #: thousand edges outweighs a hundred small ones) or "question" (each subgraph's mean edge loss, then the mean over
    #: subgraphs: every question counts once, as in answering). Validation and early stopping weigh the same way.
    propagation_weighting: str = "edge"  # one of PROPAGATION_WEIGHTINGS
    #: what picks the propagation epoch kept (and stops early): "loss" (the validation loss, as every other phase) or
    #: "answers" (graph-mode hit, then Hits@1, then the loss, on the validation questions: what the reading is judged
    #: by; about 20 s an epoch on MetaQA)
    propagation_select: str = "loss"  # one of PROPAGATION_SELECTIONS
    #: reseed both generators before the propagation phase (which subgraphs train it, their order, dropout); None
    #: goes on from where the scorer phase left them, so a run is one seed end to end
    propagation_seed: int | None = None
    graph_batch: int = 16
    tau_e: float = 0.02  # FoG's default, so propagation trains on the graphs it will run on
    hops: int = 3
    seed: int = 0
    #: share of a question's words corrupted in its augmented copy (0: no copy; see the module docstring)
    word_dropout: float = 0.0
    #: "question" (a random share of questions) or "template" (a random share of question templates)
    validation_by: str = "question"
    #: hold out fold k of round(1 / validation_share) fixed folds (a hash of the template or question, not of the
    #: seed), so ensemble members given different folds never hold out the same template (None: a seeded share)
    validation_fold: int | None = None
    #: a phrase table (kgqa.methods.fog.wordings: "metaqa" or a TOML path) composing one more copy of every
    #: question from its relation chain (None: no copy; see the module docstring)
    composed_wordings: str | None = None
    #: question templates per chain (kgqa.methods.fog.wordings.templates: "metaqa" or a JSON path) writing one
    #: more copy of every question (None: no copy; see the module docstring)
    template_wordings: str | None = None
    #: a WordNet database ("wordnet" or a directory) for one more copy of every question with words swapped for
    #: synonyms (None: no copy; see the module docstring)
    synonyms: str | None = None
    #: the probability of swapping each word that has a synonym in the synonym copy
    synonym_share: float = 0.5
    #: with copies: a triple reads its question as written with weight this against 1 for each kind of copy (1: all
    #: uniformly; 2 with three kinds: the question 40%, each copy 20%)
    question_weight: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
