"""Training the foresight scorer (FoG, appendix "Training Evidence" / "Objective and Optimization"): ``kgqa train fog``.

Supervision is triple-level. For each training question (its text, topic entities, gold relation chain and gold answers)
the chain is walked on the KG layer by layer (the topic never re-entered, as MetaQA's answers never contain it); the
triples on walks that end at a gold answer are the positives ``T_pos`` (each with its layer and direction); negatives are
sampled from the one-hop neighbourhoods of the path's nodes, the answers' included (so "go on past the answer" is a
negative), ``kappa`` = 10 per positive, spread evenly over (layer, relation, direction) groups so a hub's thousand
same-relation edges do not drown the rest. Loss: binary cross-entropy. Optimiser: AdamW (lr, betas, weight decay as
given; the paper's 1e-5 / 0.9, 0.999 / 1e-3, no warm-up or decay), dropout 0.1.

Two phases, both seeded:

1. **Scorer** (``epochs``): the triple encoder and scorer on the sampled triples, node states zero (as at expansion).
2. **Propagation** (``propagation_epochs``): for ``propagation_questions`` questions the expanded subgraph is built
   with the phase-1 scorer (tau_e), every edge labelled by the gold walk; the propagation layers and the scoring MLP
   learn to re-score every edge (the encoder frozen, its z_t computed once), the loss over both the re-scored and the
   zero-state scores so expansion keeps its calibration. ``propagation_weighting`` (kgqa's choice; the paper does not
   say) averages that loss over edges, as the scorer phase does, or per question: each subgraph's mean edge loss,
   then the mean over subgraphs, so the few hub-heavy subgraphs of a sample do not carry the loss and early stopping.

A part of the questions (``validation_share``) is held out of both phases: the validation loss picks the best epoch
(early stopping with ``patience``). ``validation_by="template"`` holds out whole question templates (the text with its
topic mentions abstracted) instead of single questions, so validation measures what a new wording costs rather than
how well the training wordings are remembered. ``validation_fold`` k holds out fold k of fixed folds of the
templates (a hash of each, not of the seed) instead of a seeded share: the members of an ensemble trained on folds
0, 1, ... never hold out the same template, so every template trains at least one of them.

**Word dropout** (``word_dropout`` p, kgqa's addition): every training question also gets one corrupted copy, each of
its words outside the topic mentions deleted with probability p/2 or replaced by ``[MASK]`` with probability p/2 (the
mask token of BERT-family encoders such as MiniLM; other encoders read it as a word), and each training triple reads
the copy half the time (with both augmentations, a third of the time each). A scorer trained on a few templates per
question type learns to lean on every cue a question gives (the answer type, each relation word) rather than on one
template word; unseen verbs ("helmed") then cost less. Validation always reads the questions as written.

**Composed wordings** (``composed_wordings``, kgqa's addition): every training question also gets a copy written from
its relation chain and topic by a phrase table (:mod:`kgqa.methods.fog.wordings`, "metaqa" packaged): "Can you list
movies made by Heat's director?" for ``directed_by,^directed_by``. The copy states the same chain in words MetaQA's
templates never use, so the scorer learns which relation words continue a walk, not which template does. The
propagation phase reads the questions as written.

**Template copies** (``template_wordings``, kgqa's addition): one more copy of every question written from a
template of its chain (:mod:`kgqa.methods.fog.wordings.templates`, "metaqa" packaged): whole frames in another
author's words ("Give me the cast of other films penned by whoever wrote Heat"), relative clauses and passives the
phrase table cannot nest. The question as written where its chain has no template.

**Synonym copies** (``synonyms``, kgqa's addition): one more copy of every question (as written or its composed copy)
with each word swapped, with probability ``synonym_share``, for a synonym from a WordNet database
(:mod:`kgqa.methods.fog.wordings.synonyms`): "pictures penned by" where the templates say "films written by". The
phrase table varies the structure in its author's words; the lexical database brings words nobody chose for a test set.
"""

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.methods.fog.training.copies import composed_copies, drop_words, synonym_copies, template_copies
from kgqa.methods.fog.training.examples import Example, GoldWalk, gold_walk, sample_examples
from kgqa.methods.fog.training.loop import TrainResult, train_scorer
from kgqa.methods.fog.training.propagation import weighted_mean
from kgqa.methods.fog.training.scorer_phase import SCORER_PHASE_FILE, BestEpoch, ScorerPhase
from kgqa.methods.fog.training.settings import PROPAGATION_SELECTIONS, PROPAGATION_WEIGHTINGS, TrainSettings
from kgqa.methods.fog.training.validation import (
    answer_set_metrics,
    check_validation_fold,
    fold_of,
    question_template,
    split_validation,
    validate_answers,
    validation_folds,
)

__all__ = [
    "PROPAGATION_SELECTIONS",
    "PROPAGATION_WEIGHTINGS",
    "SCORER_PHASE_FILE",
    "BestEpoch",
    "Example",
    "GoldWalk",
    "ScorerPhase",
    "TrainResult",
    "TrainSettings",
    "TrainingQuestion",
    "answer_set_metrics",
    "check_validation_fold",
    "composed_copies",
    "drop_words",
    "fold_of",
    "gold_walk",
    "question_template",
    "sample_examples",
    "split_validation",
    "synonym_copies",
    "template_copies",
    "train_scorer",
    "validate_answers",
    "validation_folds",
    "weighted_mean",
]
