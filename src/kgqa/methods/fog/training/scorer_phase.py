"""Phase 1 of training: the triple encoder and scorer on sampled triples (node states zero, as at expansion), and
where it ended (:class:`ScorerPhase`), so the propagation phase can be trained again alone."""

from __future__ import annotations

import copy
import math
import pickle
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.errors import ConfigError
from kgqa.kg.base import KnowledgeGraph
from kgqa.methods.fog.training.copies import composed_copies, drop_words, synonym_copies, template_copies
from kgqa.methods.fog.training.examples import Example, GoldWalk, example_tensors, gold_walk, sample_examples
from kgqa.methods.fog.training.settings import TrainSettings
from kgqa.steps.foresight.scorer import LabelVectors, _torch

Progress = Callable[[str], None]


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


class BestEpoch:
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


def train_scorer_phase(kg: KnowledgeGraph, questions: Sequence[TrainingQuestion], labels: LabelVectors,
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
    tensors = {name: example_tensors(torch, labels, ex) for name, ex in (("train", train_ex), ("val", val_ex))}

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

    best = BestEpoch(net, settings.patience)
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
