"""Training the foresight scorer (FoG, appendix "Training Evidence" / "Objective and Optimization").

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
its relation chain and topic by a phrase table (:mod:`kgqa.steps.foresight.wordings`, "metaqa" packaged): "Can you list
movies made by Heat's director?" for ``directed_by,^directed_by``. The copy states the same chain in words MetaQA's
templates never use, so the scorer learns which relation words continue a walk, not which template does. The
propagation phase reads the questions as written.

**Template copies** (``template_wordings``, kgqa's addition): one more copy of every question written from a
template of its chain (:mod:`kgqa.steps.foresight.wordings.templates`, "metaqa" packaged): whole frames in another
author's words ("Give me the cast of other films penned by whoever wrote Heat"), relative clauses and passives the
phrase table cannot nest. The question as written where its chain has no template.

**Synonym copies** (``synonyms``, kgqa's addition): one more copy of every question (as written or its composed copy)
with each word swapped, with probability ``synonym_share``, for a synonym from a WordNet database
(:mod:`kgqa.steps.foresight.wordings.synonyms`): "pictures penned by" where the templates say "films written by". The
phrase table varies the structure in its author's words; the lexical database brings words nobody chose for a test set.
"""

from __future__ import annotations

import copy
import hashlib
import math
import pickle
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, Direction, KnowledgeGraph
from kgqa.steps.foresight.graph import READING, Caps, ExpandedGraph, GraphReading, Triple, expand
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors, _torch

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TrainingQuestion:
    """One supervised question: text, topic entity ids, gold relation chain, gold answer ids."""

    text: str
    topics: tuple[str, ...]
    chain: Chain
    answers: frozenset[str]
    source: str = ""
    mentions: tuple[str, ...] = ()  # the topics' surface forms in ``text`` (kept by word dropout, abstracted in templates)


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
    #: a phrase table (kgqa.steps.foresight.wordings: "metaqa" or a TOML path) composing one more copy of every
    #: question from its relation chain (None: no copy; see the module docstring)
    composed_wordings: str | None = None
    #: question templates per chain (kgqa.steps.foresight.wordings.templates: "metaqa" or a JSON path) writing one
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


@dataclass
class GoldWalk:
    """The layered positives of one question: (triple, layer, backward) on walks to a gold answer."""

    positives: set[tuple[Triple, int, bool]]
    path_nodes: dict[int, set[str]]  # depth -> entities on gold walks at that depth
    reached: bool


def gold_walk(kg: KnowledgeGraph, question: TrainingQuestion, *, limit: int = 100_000) -> GoldWalk:
    """Walk the gold chain from the topics (the topics never re-entered) and keep the edges on walks to a gold answer."""
    topics = set(question.topics)
    frontier = [t for t in question.topics if kg.has_entity(t)]
    layers: list[list[tuple[str, str, Triple, bool]]] = []
    for hop in question.chain:
        back = hop.direction is Direction.IN
        found = kg.neighbors_many(frontier, hop.relation, hop.direction, limit_per_entity=limit) if frontier else {}
        edges = []
        for near, others in found.items():
            for far in others:
                if far in topics:
                    continue
                edges.append((near, far, (far, hop.relation, near) if back else (near, hop.relation, far), back))
        layers.append(edges)
        frontier = list(dict.fromkeys(far for _, far, _, _ in edges))
    alive = set(frontier) & question.answers
    positives: set[tuple[Triple, int, bool]] = set()
    path_nodes: dict[int, set[str]] = {len(layers): set(alive)}
    for depth in range(len(layers), 0, -1):
        keep = [(near, far, triple, back) for near, far, triple, back in layers[depth - 1] if far in alive]
        positives.update((triple, depth, back) for _, _, triple, back in keep)
        alive = {near for near, _, _, _ in keep}
        path_nodes[depth - 1] = set(alive)
    return GoldWalk(positives, path_nodes, bool(positives))


def _neighbourhood(kg: KnowledgeGraph, entity: str, depth: int, seeds: set[str], limit: int,
                   rng: random.Random) -> list[tuple[Triple, int, bool]]:
    out = []
    for direction in (Direction.OUT, Direction.IN):
        back = direction is Direction.IN
        for relation in kg.relations(entity, direction):
            others = kg.neighbors(entity, relation, direction, limit=limit * 4)
            if len(others) > limit:
                others = rng.sample(others, limit)
            for other in others:
                if other in seeds:
                    continue
                out.append(((other, relation, entity) if back else (entity, relation, other), depth + 1, back))
    return out


@dataclass
class Example:
    triple: Triple
    layer: int
    backward: bool
    question: int
    label: float


def sample_examples(kg: KnowledgeGraph, question: TrainingQuestion, index: int, walk: GoldWalk,
                    settings: TrainSettings, rng: random.Random) -> list[Example]:
    """The question's positives (at most ``max_positives_per_layer`` per layer) and ``kappa`` negatives per positive
    from the one-hop neighbourhoods of its gold walks (round-robin over (layer, relation, direction) groups)."""
    by_layer: dict[int, list[tuple[Triple, int, bool]]] = {}
    for item in sorted(walk.positives):
        by_layer.setdefault(item[1], []).append(item)
    positives = []
    for items in by_layer.values():
        positives.extend(rng.sample(items, min(len(items), settings.max_positives_per_layer)))
    seeds = set(question.topics)
    groups: dict[tuple[int, str, bool], list[tuple[Triple, int, bool]]] = {}
    for depth, nodes in walk.path_nodes.items():
        if depth >= settings.hops:  # its neighbours would sit past the hop budget, where expansion never scores
            continue
        chosen = sorted(nodes)
        if len(chosen) > 8:
            chosen = rng.sample(chosen, 8)
        for entity in chosen:
            for item in _neighbourhood(kg, entity, depth, seeds, settings.neighbour_limit, rng):
                if item not in walk.positives:
                    groups.setdefault((item[1], item[0][1], item[2]), []).append(item)
    wanted = settings.kappa * len(positives)
    negatives: list[tuple[Triple, int, bool]] = []
    keys = sorted(groups)
    rng.shuffle(keys)
    while keys and len(negatives) < wanted:
        for key in list(keys):
            pool = groups[key]
            if not pool:
                keys.remove(key)
                continue
            negatives.append(pool.pop(rng.randrange(len(pool))))
            if len(negatives) >= wanted:
                break
    if settings.stop_negatives > 0 and max(walk.path_nodes) < settings.hops:
        depth = max(walk.path_nodes)
        per_group: dict[tuple[str, bool], int] = {}
        for entity in sorted(walk.path_nodes.get(depth, ()))[:8]:
            for item in _neighbourhood(kg, entity, depth, seeds, settings.neighbour_limit, rng):
                key = (item[0][1], item[2])
                if item not in walk.positives and per_group.get(key, 0) < settings.stop_negatives:
                    per_group[key] = per_group.get(key, 0) + 1
                    negatives.append(item)
    return [Example(t, d, b, index, 1.0) for t, d, b in positives] + \
        [Example(t, d, b, index, 0.0) for t, d, b in negatives]


@dataclass
class TrainResult:
    scorer: ForesightScorer
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    #: where phase 1 ended (trained here or reused), saved beside the weights so it can be reused again
    scorer_phase: ScorerPhase | None = None


#: the file in a model directory holding its :class:`ScorerPhase`
SCORER_PHASE_FILE = "scorer-phase.pt"


@dataclass
class ScorerPhase:
    """Where phase 1 ended: the network's state, the states of both random generators, the validation split, and the
    phase's history and summary. ``train_scorer(scorer_phase=...)`` resumes from it and trains the propagation phase
    alone (a few minutes on MetaQA instead of the scorer phase's twenty); with the run's own propagation settings it
    repeats that run's propagation exactly."""

    net_state: dict[str, Any]
    python_rng: Any
    torch_rng: Any
    validation_ids: list[int]
    questions: int
    history: list[dict[str, Any]]
    summary: dict[str, Any]

    def save(self, directory: str | Path) -> Path:
        torch = _torch()
        path = Path(directory) / SCORER_PHASE_FILE
        torch.save({"version": 1, **asdict(self)}, path)
        return path

    @classmethod
    def load(cls, directory: str | Path) -> ScorerPhase:
        torch = _torch()
        path = Path(directory).expanduser() / SCORER_PHASE_FILE
        if not path.is_file():
            raise ConfigError(f"{directory}: no {SCORER_PHASE_FILE} (only models trained by `kgqa train fog` since "
                              "it saves the scorer phase have one)")
        try:
            # weights_only: tensors and plain containers only, nothing a file could make run
            data = torch.load(path, map_location="cpu", weights_only=True)
            data.pop("version")
            return cls(**data)
        except (OSError, EOFError, KeyError, TypeError, ValueError, RuntimeError, AttributeError,
                pickle.UnpicklingError) as exc:
            raise ConfigError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc})") from None


class _BestEpoch:
    """Keeps the network state of the best epoch so far and says when to stop (``patience`` epochs without
    improvement); with no validation data every epoch is the best so far. An epoch's key is a tuple, lower is better:
    ``(loss,)``, or ``(-hit, -hits1, loss)`` when answers choose; the loss must improve by more than 1e-5."""

    def __init__(self, net: Any, patience: int, start: tuple[float, ...] = (math.inf,)) -> None:
        self.net, self.patience = net, patience
        self.best, self.stale = start, 0
        self.state = copy.deepcopy(net.state_dict())

    def _better(self, key: tuple[float, ...]) -> bool:
        for new, old in zip(key[:-1], self.best[:-1], strict=True):
            if new != old:
                return new < old
        return key[-1] < self.best[-1] - 1e-5

    def update(self, key: tuple[float, ...], validated: bool) -> bool:
        """Record an epoch's validation key; True when training should stop."""
        if not validated or self._better(key):
            self.best, self.stale = key, 0
            self.state = copy.deepcopy(self.net.state_dict())
            return False
        self.stale += 1
        return self.stale >= self.patience

    def restore(self) -> tuple[float, ...]:
        self.net.load_state_dict(self.state)
        return self.best


def _bce(torch: Any, logits: Any, labels: Any) -> Any:
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)


def train_scorer(kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], labels: LabelVectors, *,
                 settings: TrainSettings = TrainSettings(), net_spec: Any = None, encoder: str = "minilm",
                 progress: Progress | None = None, bar: bool = False,
                 scorer_phase: ScorerPhase | None = None) -> TrainResult:
    """Train a foresight scorer on ``questions`` over ``kg`` (see the module docstring).

    With ``scorer_phase`` (a :class:`ScorerPhase` an earlier run saved) phase 1 is not trained again: the network, the
    random generators and the history resume where that run's phase 1 ended, and only the propagation phase trains,
    with this call's propagation settings. The questions and the scorer-phase settings must be that run's."""
    torch = _torch()
    from kgqa.steps.foresight.model import ForesightNet, NetSpec

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
        phase, walks, net = _train_scorer_phase(kg, questions, labels, settings, spec, val_ids, rng, say, bar)
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
        prop_summary = _train_propagation(torch, kg, questions, walks, labels, scorer, train_ids, sorted(val_ids),
                                          settings, history, say, bar, rng)
    net.eval()
    summary = {"questions": len(questions), "validation_questions": len(val_ids), **phase.summary,
               "propagation": prop_summary, "seconds": time.perf_counter() - started,
               "validation_ids": sorted(val_ids)}
    return TrainResult(scorer, history, summary, phase)


def _train_scorer_phase(kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], labels: LabelVectors,
                        settings: TrainSettings, spec: Any, val_ids: set[int], rng: random.Random, say: Progress,
                        bar: bool) -> tuple[ScorerPhase, dict[int, GoldWalk], Any]:
    """Phase 1 (gold walks, sampled triples, the scorer's epochs): its :class:`ScorerPhase`, the walks and the net."""
    torch = _torch()
    from kgqa.steps.foresight.model import ForesightNet

    # -- examples ----------------------------------------------------------------------------------------------------
    say(f"gold walks and sampled triples for {len(questions)} questions")
    walks: dict[int, GoldWalk] = {}
    examples: list[Example] = []
    unreached = 0
    iterator: Any = range(len(questions))
    if bar:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="examples", unit="q", mininterval=2.0)
    for i in iterator:
        walk = gold_walk(kg, questions[i])
        walks[i] = walk
        if not walk.reached:
            unreached += 1
            continue
        examples.extend(sample_examples(kg, questions[i], i, walk, settings, rng))
    if not examples:
        raise ConfigError(f"no training question's gold chain reaches a gold answer on this KG ({unreached} of "
                          f"{len(questions)} tried): is it the KG the dataset is meant for?")
    train_ex = [e for e in examples if e.question not in val_ids]
    val_ex = [e for e in examples if e.question in val_ids]
    say(f"{len(train_ex)} training and {len(val_ex)} validation triples "
        f"({sum(e.label for e in examples):.0f} positive); {unreached} questions whose chain reaches no gold answer")

    texts = [q.text for q in questions]
    copies: list[str] = []  # blocks of len(questions) rows after the originals, one block per augmentation
    if settings.word_dropout > 0:
        noise = random.Random(f"{settings.seed}:word-dropout")
        texts += [drop_words(q.text, q.mentions, settings.word_dropout, noise) for q in questions]
        copies.append("word-dropout")
    composed: list[str] = []
    if settings.composed_wordings:
        composed = composed_copies(questions, settings.composed_wordings, random.Random(f"{settings.seed}:composed"))
        texts += composed
        copies.append("composed-wording")
    if settings.template_wordings:
        texts += template_copies(questions, settings.template_wordings, random.Random(f"{settings.seed}:templates"))
        copies.append("template-wording")
    if settings.synonyms:
        texts += synonym_copies(questions, composed, settings.synonyms, settings.synonym_share,
                                random.Random(f"{settings.seed}:synonyms"))
        copies.append("synonym")
    augmented = bool(copies)
    reading = torch.tensor([settings.question_weight] + [1.0] * len(copies))

    def read_copy(n: int) -> Any:
        """Which text each of n triples reads: 0 the question, k its k-th copy."""
        if settings.question_weight == 1.0:  # uniform, drawn as before the weight existed (same seeds, same models)
            return torch.randint(0, len(copies) + 1, (n,))
        return torch.multinomial(reading, n, replacement=True)

    say("question token vectors" + (f" (with {' and '.join(copies)} copies)" if augmented else ""))
    q_tokens, q_mask = labels.tokens(texts)
    # float16 at rest (MetaQA dev: 39k questions x ~20 tokens), float32 per batch
    q_store = torch.from_numpy(q_tokens.astype(np.float16)).unsqueeze(1)
    q_pad = torch.from_numpy(q_mask).unsqueeze(1)
    tensors = {name: _example_tensors(torch, labels, ex) for name, ex in (("train", train_ex), ("val", val_ex))}

    net = ForesightNet(spec)
    optimiser = torch.optim.AdamW(net.parameters(), lr=settings.lr, betas=settings.betas,
                                  weight_decay=settings.weight_decay)
    history: list[dict[str, Any]] = []

    def run_epoch(data: dict[str, Any], train: bool) -> dict[str, float]:
        net.train(train)
        n = int(data["label"].shape[0])
        perm = torch.randperm(n) if train else torch.arange(n)
        total, correct, seen = 0.0, 0, 0
        steps: Any = range(0, n, settings.batch_size)
        if bar and train:
            from tqdm import tqdm

            steps = tqdm(steps, desc="scorer epoch", unit="batch", mininterval=2.0, leave=False)
        report_every = max(1, n // settings.batch_size // 4)
        for step, lo in enumerate(steps, start=1):
            if train and not bar and step % report_every == 0:
                say(f"  {min(lo + settings.batch_size, n)}/{n} triples")
            idx = perm[lo:lo + settings.batch_size]
            with torch.set_grad_enabled(train):
                rows = data["question"][idx]
                if train and augmented:  # each triple reads its question or one of its copies
                    rows = rows + len(questions) * read_copy(len(idx))
                vectors = data["vectors"]
                pad = q_pad[rows]
                width = int((~pad).sum(dim=-1).max())  # trim the batch's questions to its longest one
                z = net.encode(vectors[data["head"][idx]], vectors[data["rel"][idx]], vectors[data["tail"][idx]],
                               data["layer"][idx], data["back"][idx], q_store[rows, :, :width].float(),
                               pad[:, :, :width], torch.arange(len(idx)))
                logits = net.score(z)
                loss = _bce(torch, logits, data["label"][idx])
            if train:
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            total += float(loss.detach()) * len(idx)
            correct += int(((logits > 0).float() == data["label"][idx]).sum())
            seen += len(idx)
        return {"loss": total / max(seen, 1), "accuracy": correct / max(seen, 1)}

    best = _BestEpoch(net, settings.patience)
    for epoch in range(1, settings.epochs + 1):
        t0 = time.perf_counter()
        train_m = run_epoch(tensors["train"], True)
        val_m = run_epoch(tensors["val"], False) if len(val_ex) else {"loss": math.nan, "accuracy": math.nan}
        row = {"phase": "scorer", "epoch": epoch, "train_loss": train_m["loss"], "val_loss": val_m["loss"],
               "val_accuracy": val_m["accuracy"], "seconds": time.perf_counter() - t0}
        history.append(row)
        say(f"scorer epoch {epoch}: train loss {train_m['loss']:.4f}, validation loss {val_m['loss']:.4f}, "
            f"validation accuracy {val_m['accuracy']:.4f} ({row['seconds']:.0f} s)")
        if best.update((val_m["loss"],), bool(val_ex)):
            say(f"early stop after epoch {epoch}")
            break
    best_val = best.restore()[-1]
    summary = {"unreached": unreached, "train_triples": len(train_ex), "validation_triples": len(val_ex),
               "positives": int(sum(e.label for e in examples)), "best_scorer_val_loss": best_val}
    # the generators' states at this point are what the propagation phase starts from, here or when reused
    phase = ScorerPhase(copy.deepcopy(net.state_dict()), rng.getstate(), torch.get_rng_state(), sorted(val_ids),
                        len(questions), history, summary)
    return phase, walks, net


def question_template(question: TrainingQuestion) -> str:
    """The question's wording with its topic mentions abstracted ("who directed {}"), lower-cased."""
    text = question.text
    for mention in sorted(question.mentions, key=len, reverse=True):
        if mention:
            text = text.replace(mention, "{}")
    return " ".join(text.lower().split())


def validation_folds(share: float) -> int:
    """How many fixed validation folds a validation share makes (0.1 -> 10)."""
    return max(2, round(1 / share))


def check_validation_fold(fold: int, share: float, *, name: str = "validation fold") -> int:
    """The number of folds for ``share``; a ConfigError naming ``name`` when ``fold`` is not one of them."""
    if share <= 0:
        raise ConfigError(f"{name} needs a validation share above 0 (it sets the number of folds)")
    folds = validation_folds(share)
    if not 0 <= fold < folds:
        raise ConfigError(f"{name} must be in [0, {folds}) with validation share {share} ({folds} folds), got {fold}")
    return folds


def fold_of(key: str, folds: int) -> int:
    """The fixed fold of a template or question id: a hash of its text, the same in every process and for every
    seed (Python's ``hash`` of a str is salted per process)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % folds


def split_validation(questions: Sequence[TrainingQuestion], settings: TrainSettings,
                     rng: random.Random) -> tuple[set[int], list[int]]:
    """(validation ids, training ids): a seeded ``validation_share`` of the questions, or of their templates when
    ``validation_by`` is "template" (every question of a held-out template is held out). With ``validation_fold`` k,
    the questions (or templates) of fold k of :func:`validation_folds` fixed folds, whatever the seed."""
    order = list(range(len(questions)))
    rng.shuffle(order)
    if settings.validation_by not in ("question", "template"):
        raise ConfigError(f"validation_by must be 'question' or 'template', got {settings.validation_by!r}")
    if settings.validation_share <= 0 or len(order) < 2:
        return set(), order
    if settings.validation_fold is not None:
        folds = check_validation_fold(settings.validation_fold, settings.validation_share)
        key = question_template if settings.validation_by == "template" else (lambda q: q.source or q.text)
        val = {i for i in order if fold_of(key(questions[i]), folds) == settings.validation_fold}
        if not val or len(val) == len(order):
            raise ConfigError(f"validation fold {settings.validation_fold} of {folds} holds "
                              f"{'no' if not val else 'every'} question of the {len(order)}: too few "
                              f"{settings.validation_by}s for folds")
        return val, [i for i in order if i not in val]
    target = max(1, round(settings.validation_share * len(order)))
    if settings.validation_by == "question":
        return set(order[:target]), order[target:]
    groups: dict[str, list[int]] = {}
    for i in order:
        groups.setdefault(question_template(questions[i]), []).append(i)
    val: set[int] = set()
    for members in groups.values():  # templates in the shuffled order of their first question
        if len(val) >= target or len(val) + len(members) >= len(order):
            break
        val.update(members)
    return val, [i for i in order if i not in val]


def composed_copies(questions: Sequence[TrainingQuestion], table: str, rng: random.Random) -> list[str]:
    """One question per training question composed from its chain and topic mention by the phrase table ``table``
    (:mod:`kgqa.steps.foresight.wordings`); the question as written where the table has no phrase for a hop or the
    question names no topic."""
    from kgqa.steps.foresight.wordings import ChainWordings

    return _written_copies(questions, ChainWordings.load(table), rng)


def template_copies(questions: Sequence[TrainingQuestion], templates: str, rng: random.Random) -> list[str]:
    """One question per training question written from a template of its chain (``templates``:
    :class:`~kgqa.steps.foresight.wordings.templates.ChainTemplates`); the question as written where its chain has
    no template or the question names no topic."""
    from kgqa.steps.foresight.wordings.templates import ChainTemplates

    return _written_copies(questions, ChainTemplates.load(templates), rng)


def _written_copies(questions: Sequence[TrainingQuestion], writer: Any, rng: random.Random) -> list[str]:
    """``writer.compose(chain, mention, rng)`` per question (a phrase table or templates), else the question."""
    out: list[str] = []
    for question in questions:
        mention = next((m for m in question.mentions if m), "")
        written = writer.compose(question.chain, mention, rng) if mention else None
        out.append(written or question.text)
    return out


def synonym_copies(questions: Sequence[TrainingQuestion], composed: Sequence[str], source: str, share: float,
                   rng: random.Random) -> list[str]:
    """One question per training question with words swapped for WordNet synonyms (:func:`swap_synonyms`, each word
    with probability ``share``), from the question as written or, where ``composed`` copies are given, from either
    (a fair coin per question), so the new words meet both MetaQA's structures and the composed ones."""
    from kgqa.steps.foresight.wordings.synonyms import WordNet, swap_synonyms

    wordnet = WordNet.load(source)
    out: list[str] = []
    for i, question in enumerate(questions):
        base = composed[i] if composed and rng.random() < 0.5 else question.text
        out.append(swap_synonyms(base, question.mentions, share, wordnet, rng))
    return out


_WORD_RE = re.compile(r"\S+")


def drop_words(text: str, mentions: Sequence[str], p: float, rng: random.Random, mask: str = "[MASK]") -> str:
    """``text`` with each word outside the ``mentions`` deleted (probability p/2) or replaced by ``mask`` (p/2)."""
    protected: list[tuple[int, int]] = []
    for mention in mentions:
        start = text.find(mention) if mention else -1
        while start >= 0:
            protected.append((start, start + len(mention)))
            start = text.find(mention, start + len(mention))
    words: list[str] = []
    for match in _WORD_RE.finditer(text):
        if any(lo < match.end() and match.start() < hi for lo, hi in protected):
            words.append(match.group())
            continue
        draw = rng.random()
        if draw < p / 2:
            continue
        words.append(mask if draw < p else match.group())
    return " ".join(words) if words else text


def _example_tensors(torch: Any, labels: LabelVectors, examples: list[Example]) -> dict[str, Any]:
    """The examples as index tensors into one matrix of the distinct labels they use (``vectors``): 1.3M MetaQA
    triples would take 6 GB as three float vectors each, their distinct labels take 60 MB."""
    entities = sorted({e.triple[0] for e in examples} | {e.triple[2] for e in examples})
    relations = sorted({e.triple[1] for e in examples})
    row = {entity: i for i, entity in enumerate(entities)}
    rel_row = {relation: len(entities) + i for i, relation in enumerate(relations)}
    vectors = np.concatenate([labels.entities(entities) if entities else np.zeros((0, labels.dim), np.float32),
                              labels.relations(relations) if relations else np.zeros((0, labels.dim), np.float32)])
    return {
        "vectors": torch.from_numpy(vectors),
        "head": torch.tensor([row[e.triple[0]] for e in examples], dtype=torch.long),
        "rel": torch.tensor([rel_row[e.triple[1]] for e in examples], dtype=torch.long),
        "tail": torch.tensor([row[e.triple[2]] for e in examples], dtype=torch.long),
        "layer": torch.tensor([e.layer for e in examples], dtype=torch.long),
        "back": torch.tensor([int(e.backward) for e in examples], dtype=torch.long),
        "question": torch.tensor([e.question for e in examples], dtype=torch.long),
        "label": torch.tensor([e.label for e in examples], dtype=torch.float32),
    }


@dataclass
class _Graph:
    z: Any
    near: Any
    far: Any
    depth: Any
    heads: Any
    tails: Any
    labels: Any
    nodes: int


def weighted_mean(torch: Any, per_edge: Any, graph_of_edge: Any, graphs: int, weighting: str) -> Any:
    """The mean of ``per_edge`` losses over edges (``weighting="edge"``) or over subgraphs (``"question"``: each
    subgraph's mean edge loss, ``graph_of_edge`` giving each edge's subgraph in ``range(graphs)``)."""
    if weighting == "edge":
        return per_edge.mean()
    sums = torch.zeros(graphs, dtype=per_edge.dtype).index_add(0, graph_of_edge, per_edge)
    sizes = torch.zeros(graphs, dtype=per_edge.dtype).index_add(0, graph_of_edge, torch.ones_like(per_edge))
    return (sums / sizes.clamp(min=1)).mean()


def _labelled_graph(torch: Any, kg: KnowledgeGraph, question: TrainingQuestion, walk: GoldWalk, labels: LabelVectors,
                    scorer: ForesightScorer, settings: TrainSettings) -> _Graph | None:
    qv = scorer.questions(labels, [question.text])
    graph: ExpandedGraph = expand(kg, question.topics, scorer.scorer_for(labels, qv), hops=settings.hops,
                                  tau_e=settings.tau_e, caps=Caps())
    if not len(graph):
        return None
    z = torch.cat([p[torch.from_numpy(r)] for p, r in graph.payloads if len(r)])
    layers = graph.layers
    y = [1.0 if (t, d, b) in walk.positives else 0.0
         for t, d, b in zip(graph.triples, layers, graph.backward, strict=True)]
    heads, tails = graph.head_tail_nodes()
    return _Graph(z.detach(), torch.tensor(graph.near), torch.tensor(graph.far), torch.tensor(layers),
                  torch.tensor(heads), torch.tensor(tails), torch.tensor(y), len(graph.node_entity))


def _train_propagation(torch: Any, kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], walks: dict[int, GoldWalk],
                       labels: LabelVectors, scorer: ForesightScorer, train_ids: list[int], val_ids: list[int],
                       settings: TrainSettings, history: list[dict[str, Any]], say: Progress, bar: bool,
                       rng: random.Random) -> dict[str, Any]:
    net = scorer.net
    reached_train = [i for i in train_ids if walks[i].reached]
    reached_val = [i for i in val_ids if walks[i].reached]
    n_val = min(len(reached_val), max(50, settings.propagation_questions // 10))
    chosen = rng.sample(reached_train, min(len(reached_train), settings.propagation_questions))
    # a random sample: the ids are sorted, so the first ones would all be of the first dataset (MetaQA 1-hop), whose
    # loss falls as the deeper hops' rises, and early stopping would then keep the untrained propagation
    chosen_val = rng.sample(reached_val, n_val)
    say(f"expanding {len(chosen)} training and {len(chosen_val)} validation subgraphs with the phase-1 scorer")
    net.eval()
    build: Any = chosen + chosen_val
    if bar:
        from tqdm import tqdm

        build = tqdm(build, desc="subgraphs", unit="q", mininterval=2.0)
    graphs: dict[int, _Graph] = {}
    for i in build:
        g = _labelled_graph(torch, kg, questions[i], walks[i], labels, scorer, settings)
        if g is not None and float(g.labels.sum()) > 0:
            graphs[i] = g
    train_graphs = [graphs[i] for i in chosen if i in graphs]
    val_graphs = [graphs[i] for i in chosen_val if i in graphs]
    edges = sum(int(g.labels.shape[0]) for g in train_graphs)
    say(f"{len(train_graphs)} training subgraphs ({edges} edges), {len(val_graphs)} validation subgraphs")
    from kgqa.steps.foresight.model import PROPAGATION_PHASE_PARAMETERS

    trainable = [p for name, p in net.named_parameters() if name.startswith(PROPAGATION_PHASE_PARAMETERS)]
    optimiser = torch.optim.AdamW(trainable, lr=settings.propagation_lr or settings.lr, betas=settings.betas,
                                  weight_decay=settings.weight_decay)

    def batch_loss(batch: list[_Graph]) -> tuple[Any, Any, Any, int]:
        """The batch's loss (a mean over edges or over subgraphs, ``propagation_weighting``), logits, labels and the
        number of units the loss is a mean over (edges or subgraphs), to weigh it in an epoch's mean."""
        offset, parts = 0, {k: [] for k in ("z", "near", "far", "depth", "heads", "tails", "labels", "graph")}
        for k, g in enumerate(batch):
            parts["z"].append(g.z)
            parts["depth"].append(g.depth)
            parts["labels"].append(g.labels)
            parts["graph"].append(torch.full((int(g.labels.shape[0]),), k, dtype=torch.long))
            for key in ("near", "far", "heads", "tails"):
                parts[key].append(getattr(g, key) + offset)
            offset += g.nodes
        cat = {k: torch.cat(v) for k, v in parts.items()}
        h = net.propagate(cat["z"], cat["near"], cat["far"], cat["depth"], offset)
        logits = net.rescore(cat["z"], cat["heads"], cat["tails"], h)
        initial = net.score(cat["z"])
        per_edge = (torch.nn.functional.binary_cross_entropy_with_logits(logits, cat["labels"], reduction="none")
                    + torch.nn.functional.binary_cross_entropy_with_logits(initial, cat["labels"], reduction="none"))
        loss = weighted_mean(torch, per_edge, cat["graph"], len(batch), settings.propagation_weighting)
        units = len(batch) if settings.propagation_weighting == "question" else len(per_edge)
        return loss, logits, cat["labels"], units

    def evaluate(graph_list: list[_Graph]) -> dict[str, float]:
        net.eval()
        total, weight, n, right = 0.0, 0, 0, 0
        with torch.no_grad():
            for lo in range(0, len(graph_list), settings.graph_batch):
                loss, logits, y, units = batch_loss(graph_list[lo:lo + settings.graph_batch])
                total += float(loss) * units
                weight += units
                n += len(y)
                right += int(((logits > 0).float() == y).sum())
        return {"loss": total / max(weight, 1), "accuracy": right / max(n, 1)}

    by_answers = settings.propagation_select == "answers"

    def validate() -> dict[str, float]:
        """Validation loss and accuracy, and with answers choosing, graph-mode hit and Hits@1."""
        val_m = evaluate(val_graphs)
        if by_answers:
            answers = validate_answers(kg, scorer, labels, chosen_val, questions)
            val_m |= {"hit": answers["hit"], "hits1": answers["hits1"]}
        return val_m

    def key(val_m: dict[str, float]) -> tuple[float, ...]:
        return (-val_m["hit"], -val_m["hits1"], val_m["loss"]) if by_answers else (val_m["loss"],)

    before = validate() if val_graphs else {}
    best = _BestEpoch(net, settings.patience, key(before) if val_graphs else (math.inf,))
    if by_answers and val_graphs:
        say(f"before propagation: validation loss {before['loss']:.4f}, graph-mode hit {before['hit']:.2f}, "
            f"Hits@1 {before['hits1']:.2f} on {len(chosen_val)} questions")
    for epoch in range(1, settings.propagation_epochs + 1):
        t0 = time.perf_counter()
        net.train()
        order = list(range(len(train_graphs)))
        rng.shuffle(order)
        total, n = 0.0, 0
        for lo in range(0, len(order), settings.graph_batch):
            batch = [train_graphs[i] for i in order[lo:lo + settings.graph_batch]]
            loss, _, _, units = batch_loss(batch)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * units
            n += units
        val_m = validate() if val_graphs else {"loss": math.nan, "accuracy": math.nan}
        row = {"phase": "propagation", "epoch": epoch, "train_loss": total / max(n, 1), "val_loss": val_m["loss"],
               "val_accuracy": val_m["accuracy"], "seconds": time.perf_counter() - t0}
        answers = ""
        if by_answers and val_graphs:
            row |= {"val_hit": val_m["hit"], "val_hits1": val_m["hits1"]}
            answers = f", graph-mode hit {val_m['hit']:.2f}, Hits@1 {val_m['hits1']:.2f}"
        history.append(row)
        say(f"propagation epoch {epoch}: train loss {row['train_loss']:.4f}, validation loss {val_m['loss']:.4f}, "
            f"validation accuracy {val_m['accuracy']:.4f}{answers} ({row['seconds']:.0f} s)")
        if best.update(key(val_m) if val_graphs else (math.nan,), bool(val_graphs)):
            say(f"early stop after propagation epoch {epoch}")
            break
    best_key = best.restore()
    net.eval()
    summary = {"train_graphs": len(train_graphs), "validation_graphs": len(val_graphs), "train_edges": edges,
               "val_loss_before": before.get("loss"), "val_loss_best": best_key[-1],
               "selected_by": settings.propagation_select}
    if by_answers and val_graphs:
        summary |= {"val_hit_before": before["hit"], "val_hits1_before": before["hits1"],
                    "val_hit_best": -best_key[0], "val_hits1_best": -best_key[1]}
    return summary


def answer_set_metrics(predicted: Sequence[str], gold: set[str]) -> dict[str, float]:
    """hit, Hits@1 and F1 of a ranked prediction against a gold set (validation during development)."""
    if not predicted:
        return {"hit": 0.0, "hits1": 0.0, "f1": 0.0}
    pset = set(predicted)
    inter = len(pset & gold)
    precision, recall = inter / len(pset), inter / max(len(gold), 1)
    f1 = 0.0 if inter == 0 else 2 * precision * recall / (precision + recall)
    return {"hit": float(inter > 0), "hits1": float(predicted[0] in gold), "f1": f1}


def validate_answers(kg: KnowledgeGraph, scorer: ForesightScorer, labels: LabelVectors, ids: Sequence[int],
                     questions: Sequence[TrainingQuestion], *, limit: int = 300,
                     reading: GraphReading | None = None) -> dict[str, Any]:
    """Graph-mode answers for (at most ``limit`` of) the held-out questions, read as FoG's graph mode reads them
    (``reading``, default :data:`~kgqa.steps.foresight.graph.READING`, FoG's defaults): hit, Hits@1, F1 in percent."""
    from kgqa.steps.answers import presentable

    reading = reading or READING

    chosen = list(ids)
    if len(chosen) > limit:  # a seeded sample: the ids are sorted, and the first ones are all of one dataset
        chosen = sorted(random.Random(0).sample(chosen, limit))
    totals = {"hit": 0.0, "hits1": 0.0, "f1": 0.0}
    started = time.perf_counter()
    for i in chosen:
        q = questions[i]
        graph = reading.expand(kg, q.topics, scorer.scorer_for(labels, scorer.questions(labels, [q.text])))
        scorer.propagate(graph)
        # without the KG's statement counts: they order answers of merged records, not what an epoch learned, and
        # leaving them out keeps the epoch choice (so the models) of every scorer trained before they existed
        ranked, _ = reading.rank(graph, answerable=lambda ids: set(presentable(kg, ids)))
        for key, value in answer_set_metrics([a.entity for a in ranked], set(q.answers)).items():
            totals[key] += value
    n = max(len(chosen), 1)
    return {**{k: 100 * v / n for k, v in totals.items()}, "questions": len(chosen),
            "seconds_per_question": (time.perf_counter() - started) / n}
