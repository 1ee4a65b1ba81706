"""A fine-tuned reader of the answer type: the encoder itself trained to say what a question asks for.

The answer-type classifier of :mod:`kgqa.steps.foresight.answer_types` is one linear layer over the frozen encoder's
sentence vector. On wordings unlike the training ones it reads the words a question mentions most rather than the
words that say what it asks for ("Which filmmakers helmed movies ..." reads as a question about films). A reader
fine-tunes a copy of the encoder (a transformer: all-MiniLM-L6-v2 by default, or a sentence-transformers model
given by path) under a linear head, mean-pooled as the encoder pools, on the same masked training texts and soft
labels (a question in its own wording weighing ``--question-weight`` against a copy, as in the answer head's loss),
plus every template of a template file once. It replaces only the answer head's probabilities; the topic
head, the types and the junctions stay as trained (and the triple scorer keeps its frozen encoder, as the paper's).

Measured on the reworded dev splits (docs/fog.md). Seeded; the copy is saved beside ``answer_types.json``
(``reader/``) and loaded when first read.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.errors import ConfigError

#: the reader's folder beside answer_types.json
READER_DIR = "reader"


@dataclass(frozen=True)
class ReaderSettings:
    """How a reader is fine-tuned (AdamW, linear warm-up then linear decay, soft-label cross-entropy)."""

    epochs: int = 2
    lr: float = 5e-5
    batch_size: int = 32
    weight_decay: float = 0.01
    warmup: float = 0.05  # share of the steps
    dropout: float = 0.1
    max_length: int = 48  # tokens; questions are short
    seed: int = 0

    def check(self) -> None:
        if self.epochs < 1:
            raise ConfigError(f"answer-type reader: epochs must be at least 1, got {self.epochs}")
        if not 0 < self.lr < 1:
            raise ConfigError(f"answer-type reader: the learning rate must be in (0, 1), got {self.lr}")
        if self.batch_size < 1 or self.max_length < 4:
            raise ConfigError("answer-type reader: batch size >= 1 and max length >= 4 wanted")


def transformer_path(encoder: str) -> str:
    """The folder of the transformer an encoder spec names: ``minilm`` (the packaged all-MiniLM-L6-v2) or
    ``st:PATH`` (a sentence-transformers model folder). Other encoders (``hash``) have nothing to fine-tune."""
    if encoder == "minilm":
        from kgqa.text.embedders import minilm_model_path

        return minilm_model_path()
    if encoder.startswith("st:") and Path(encoder[3:]).is_dir():
        return encoder[3:]
    raise ConfigError(f"answer-type reader: encoder {encoder!r} cannot be fine-tuned (minilm or st:FOLDER, a "
                      "transformer on disk)")


def _transformers() -> tuple[Any, Any, Any]:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from kgqa.steps.foresight.scorer import _torch

    torch = _torch()
    from transformers import AutoModel, AutoTokenizer

    return torch, AutoModel, AutoTokenizer


@dataclass
class TypeReader:
    """A fine-tuned encoder and its head: P(answer type | masked question) over ``classes``."""

    classes: list[str]
    weight: np.ndarray  # (classes, hidden)
    bias: np.ndarray  # (classes,)
    directory: Path | None  # where the encoder was saved (None until saved)
    max_length: int = 48
    meta: dict[str, Any] = field(default_factory=dict)
    _loaded: tuple[Any, Any] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _model(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                if self.directory is None:
                    raise ConfigError("answer-type reader: no encoder folder")
                _, auto_model, auto_tokenizer = _transformers()
                try:
                    tokenizer = auto_tokenizer.from_pretrained(str(self.directory))
                    model = auto_model.from_pretrained(str(self.directory))
                except (OSError, ValueError) as exc:
                    raise ConfigError(f"answer-type reader {self.directory} cannot be read: {exc}") from None
                self._loaded = (tokenizer, model.eval())
            return self._loaded

    def probabilities(self, masked: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """P(class | question) for each (already masked) question, one row per question."""
        if not masked:
            return np.zeros((0, len(self.classes)), dtype=np.float32)
        torch, _, _ = _transformers()
        tokenizer, model = self._model()
        rows = []
        with torch.no_grad():
            for start in range(0, len(masked), batch_size):
                pooled = _pool(torch, tokenizer, model, list(masked[start:start + batch_size]), self.max_length)
                rows.append(pooled.numpy().astype(np.float32))
        logits = np.concatenate(rows) @ self.weight.T + self.bias  # answer_types imports this module: no cycle back
        logits -= logits.max(axis=1, keepdims=True)
        odds = np.exp(logits)
        return (odds / odds.sum(axis=1, keepdims=True)).astype(np.float32)

    def save(self, out: Path) -> dict[str, Any]:
        """Write the encoder to ``out/reader`` and return the entry answer_types.json keeps for it."""
        tokenizer, model = self._model()
        target = out / READER_DIR
        model.save_pretrained(str(target))
        tokenizer.save_pretrained(str(target))
        self.directory = target
        return {"dir": READER_DIR, "classes": self.classes, "weight": self.weight.tolist(),
                "bias": self.bias.tolist(), "max_length": self.max_length, **self.meta}

    @classmethod
    def from_entry(cls, entry: dict[str, Any], base: Path) -> TypeReader:
        """The reader answer_types.json describes (its encoder loaded when first read)."""
        directory = base / str(entry["dir"])
        if not directory.is_dir():
            raise ConfigError(f"answer-type reader: {directory} is missing (copy the model folder whole)")
        meta = {k: v for k, v in entry.items() if k not in {"dir", "classes", "weight", "bias", "max_length"}}
        return cls([str(c) for c in entry["classes"]], np.asarray(entry["weight"], dtype=np.float32),
                   np.asarray(entry["bias"], dtype=np.float32), directory, int(entry.get("max_length", 48)), meta)


def _pool(torch: Any, tokenizer: Any, model: Any, texts: list[str], max_length: int) -> Any:
    """Mean of the token states over the real tokens (as the sentence encoder pools)."""
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def soft_labels(texts: Sequence[str], labels: Sequence[int], n_classes: int,
                weights: Sequence[float] | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each distinct text once (in order of first appearance) with the share of its occurrences in each class and its
    weight: the largest weight of its occurrences (1 each without ``weights``), so a question in its own wording
    keeps the weight it has in the answer head's loss however many copies share its text."""
    counts: dict[str, np.ndarray] = {}
    weight: dict[str, float] = {}
    for i, (text, label) in enumerate(zip(texts, labels, strict=True)):
        counts.setdefault(text, np.zeros(n_classes, dtype=np.float32))[label] += 1.0
        weight[text] = max(weight.get(text, 0.0), 1.0 if weights is None else float(weights[i]))
    unique = list(counts)
    if not unique:
        return [], np.zeros((0, n_classes), dtype=np.float32), np.zeros(0, dtype=np.float32)
    return (unique, np.stack([counts[t] / counts[t].sum() for t in unique]),
            np.asarray([weight[t] for t in unique], dtype=np.float32))


def fine_tune_reader(encoder: str, texts: Sequence[str], targets: np.ndarray, classes: Sequence[str],
                     settings: ReaderSettings | None = None, weights: np.ndarray | None = None,
                     progress: Callable[[str], None] | None = None) -> TypeReader:
    """Fine-tune a copy of ``encoder`` (:func:`transformer_path`) with a linear head on ``texts`` (masked) against
    ``targets`` (one row of class shares per text), each text's loss times its ``weights`` entry (1 without; a
    batch's loss is the weighted mean). Seeded: the head's start, dropout and the order of the batches."""
    settings = settings or ReaderSettings()
    settings.check()
    say = progress or (lambda _: None)
    if len(texts) == 0 or len(texts) != len(targets):
        raise ConfigError(f"answer-type reader: {len(texts)} texts for {len(targets)} targets")
    torch, auto_model, auto_tokenizer = _transformers()
    path = transformer_path(encoder)
    torch.manual_seed(settings.seed)
    tokenizer = auto_tokenizer.from_pretrained(path)
    model = auto_model.from_pretrained(path)
    head = torch.nn.Linear(model.config.hidden_size, len(classes))
    dropout = torch.nn.Dropout(settings.dropout)
    optimiser = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=settings.lr,
                                  weight_decay=settings.weight_decay)
    per_epoch = (len(texts) + settings.batch_size - 1) // settings.batch_size
    steps = settings.epochs * per_epoch
    warm = max(1.0, settings.warmup * steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / warm) * (steps - s) / steps)
    target = torch.tensor(np.asarray(targets, dtype=np.float32))
    if weights is not None and len(weights) != len(texts):
        raise ConfigError(f"answer-type reader: {len(weights)} weights for {len(texts)} texts")
    weight = torch.tensor(np.ones(len(texts), dtype=np.float32) if weights is None
                          else np.asarray(weights, dtype=np.float32))
    losses = []
    model.train()
    for epoch in range(settings.epochs):
        order = list(range(len(texts)))
        random.Random(f"{settings.seed}:reader:{epoch}").shuffle(order)
        total = 0.0
        for start in range(0, len(order), settings.batch_size):
            rows = order[start:start + settings.batch_size]
            logits = head(dropout(_pool(torch, tokenizer, model, [texts[i] for i in rows], settings.max_length)))
            per_text = -(target[rows] * torch.log_softmax(logits, dim=-1)).sum(-1)
            loss = (per_text * weight[rows]).sum() / weight[rows].sum()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += float(loss.detach()) * len(rows)
        losses.append(round(total / len(texts), 5))
        say(f"reader epoch {epoch + 1}/{settings.epochs}: loss {losses[-1]:.4f}")
    model.eval()
    training = {**asdict(settings), "texts": len(texts), "losses": losses}
    if weights is not None:
        training["weighted_texts"] = int((np.asarray(weights) != 1.0).sum())
    reader = TypeReader(list(classes), head.weight.detach().numpy().copy(), head.bias.detach().numpy().copy(), None,
                        settings.max_length, {"training": training})
    reader._loaded = (tokenizer, model)
    return reader
