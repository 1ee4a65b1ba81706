"""The whole training of a foresight scorer: split, phase 1 (or a reused one), phase 2 (see the package docstring)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.errors import ConfigError
from kgqa.kg.base import KnowledgeGraph
from kgqa.methods.fog.training.examples import gold_walk
from kgqa.methods.fog.training.propagation import train_propagation
from kgqa.methods.fog.training.scorer_phase import Progress, ScorerPhase, train_scorer_phase
from kgqa.methods.fog.training.settings import PROPAGATION_SELECTIONS, PROPAGATION_WEIGHTINGS, TrainSettings
from kgqa.methods.fog.training.validation import split_validation
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors, _torch


@dataclass
class TrainResult:
    scorer: ForesightScorer
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    #: where phase 1 ended (trained here or reused), saved beside the weights so it can be reused again
    scorer_phase: ScorerPhase | None = None


def train_scorer(kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], labels: LabelVectors, *,
                 settings: TrainSettings | None = None, net_spec: Any = None, encoder: str = "minilm",
                 progress: Progress | None = None, bar: bool = False,
                 scorer_phase: ScorerPhase | None = None) -> TrainResult:
    """Train a foresight scorer on ``questions`` over ``kg`` (see the module docstring).

    With ``scorer_phase`` (a :class:`ScorerPhase` an earlier run saved) phase 1 is not trained again: the network, the
    random generators and the history resume where that run's phase 1 ended, and only the propagation phase trains,
    with this call's propagation settings. The questions and the scorer-phase settings must be that run's."""
    torch = _torch()
    from kgqa.steps.foresight.model import ForesightNet, NetSpec

    settings = settings or TrainSettings()

    say = progress or (lambda _m: None)
    started = time.perf_counter()
    rng = random.Random(settings.seed)
    torch.manual_seed(settings.seed)
    if settings.question_weight <= 0:  # before any work, with the other settings' checks
        raise ConfigError(f"the question weight must be positive, got {settings.question_weight}")
    if settings.propagation_weighting not in PROPAGATION_WEIGHTINGS:
        raise ConfigError(f"propagation_weighting must be 'edge' or 'question', got {settings.propagation_weighting!r}")
    if settings.propagation_select not in PROPAGATION_SELECTIONS:
        raise ConfigError(f"propagation_select must be 'loss' or 'answers', got {settings.propagation_select!r}")
    val_ids, train_ids = split_validation(questions, settings, rng)
    spec = net_spec or NetSpec(input_dim=labels.dim)

    if scorer_phase is None:
        phase, walks, net = train_scorer_phase(kg, questions, labels, settings, spec, val_ids, rng, say, bar)
    else:
        if scorer_phase.validation_ids != sorted(val_ids) or scorer_phase.questions != len(questions):
            raise ConfigError("the reused scorer phase was trained on other questions or another validation split "
                              f"({scorer_phase.questions} questions, {len(scorer_phase.validation_ids)} held out; now "
                              f"{len(questions)}, {len(val_ids)}): reuse it with its own datasets, limit and seed")
        phase = scorer_phase
        say(f"scorer phase reused ({len(phase.history)} epochs, best validation loss "
            f"{phase.summary.get('best_scorer_val_loss', math.nan):.4f}); gold walks for {len(questions)} questions")
        walks = {i: gold_walk(kg, q) for i, q in enumerate(questions)}
        net = ForesightNet(spec)
        try:
            net.load_state_dict(phase.net_state)
        except RuntimeError as exc:
            raise ConfigError(f"the reused scorer phase does not fit this network ({exc})") from None
        rng.setstate(phase.python_rng)
        torch.set_rng_state(phase.torch_rng)
    history = [dict(row) for row in phase.history]
    scorer = ForesightScorer(net, {"encoder": encoder, "settings": settings.to_dict()})

    # -- phase 2: propagation ----------------------------------------------------------------------------------------
    if settings.propagation_seed is not None:
        rng.seed(f"{settings.seed}:propagation:{settings.propagation_seed}")
        torch.manual_seed(settings.propagation_seed)
    prop_summary: dict[str, Any] = {}
    if settings.propagation_epochs > 0 and spec.propagation_layers > 0 and settings.propagation_questions > 0:
        prop_summary = train_propagation(torch, kg, questions, walks, labels, scorer, train_ids, sorted(val_ids),
                                          settings, history, say, bar, rng)
    net.eval()
    summary = {"questions": len(questions), "validation_questions": len(val_ids), **phase.summary,
               "propagation": prop_summary, "seconds": time.perf_counter() - started,
               "validation_ids": sorted(val_ids)}
    return TrainResult(scorer, history, summary, phase)
