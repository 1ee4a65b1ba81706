"""Answer types: what kind of entity a question asks for, read from its wording, as a prior on FoG's answer pattern.

FoG's graph mode picks an *answer pattern* (the relations and directions of the best walk) and answers with its ends.
Most of its misses on MetaQA stop one hop early: the films of "who directed the films [X] starred in" are read as the
answer because the scorer rated the last hop low. The scorer judges triples; nothing in it asks whether the end of a
pattern is the kind of thing the question asks for. This module does, from two pieces learnt on the training
questions:

* **types** of a KG's (relation, direction) ends, induced from the KG: two ends are one type when at least
  ``containment`` of the entities sampled at one also have the other's relation in the other's direction (MetaQA, at
  the default 0.7: every relation read backwards ends at films, one type; directors and writers, 67% the same people,
  two types, so "who directed the films written by X" and "who wrote them" differ; actors, years, languages, genres
  are each their own; at 0.5 directors and writers are one type). The ends typed are those training questions end on and those
  one hop from their answers; a type no training question ends on gets the probability ``floor``, and a pattern
  ending where nothing was typed a neutral prior of 1.
* a **classifier** (one linear layer, softmax) over the frozen encoder's sentence vector of the question with its topic
  mentions masked ("who directed the films X starred in"), trained on the training questions (and the composed
  wordings of their chains when a phrase table is given) to predict the type of the gold chain's last hop.

At reading time a pattern's walks are multiplied by P(type of the pattern's end | question) ** ``weight``
(:func:`kgqa.steps.foresight.graph.rank_answers`, ``pattern_prior``). kgqa's own addition: the paper has no answer
types (its LLM reads the memory subgraph).

Trained by ``kgqa train answer-types``; a directory holding ``answer_types.json`` (types, weights, the encoder's name
and how it was trained), used with ``--method-config answer_types=DIR``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.kg.base import Direction, KnowledgeGraph

FILE = "answer_types.json"
MASK = "X"
#: (relation, backward): how a walk reaches an entity, as FoG's patterns write a hop
End = tuple[str, bool]


def end_name(end: End) -> str:
    return ("^" if end[1] else "") + end[0]


def parse_end(name: str) -> End:
    return (name[1:], True) if name.startswith("^") else (name, False)


def mask_mentions(text: str, mentions: Sequence[str]) -> str:
    """The question with its topic mentions replaced by a placeholder (and MetaQA's brackets dropped), so the
    classifier reads the wording, not the entity: case-insensitive, longest mention first."""
    out = text.replace("[", "").replace("]", "")
    for mention in sorted({m for m in mentions if m and m.strip()}, key=len, reverse=True):
        out = re.sub(re.escape(mention), MASK, out, flags=re.IGNORECASE)
    return out


def induce_types(kg: KnowledgeGraph, samples: dict[End, Sequence[str]], *, containment: float = 0.7
                 ) -> dict[End, str]:
    """Each end -> its type's name (the alphabetically first end of the type, as :func:`end_name` writes it).

    ``samples`` are entities reached at each end (a training question's gold answers are reached at its chain's last
    hop). End A falls in with end B when at least ``containment`` of A's samples also have B's relation in B's
    direction (they could be reached at B), or the other way round; types are the connected groups."""
    ends = sorted(samples)
    relations: dict[tuple[str, bool], frozenset[str]] = {}  # one KG call per (entity, direction), whatever the end

    def reached_at(entity: str, end: End) -> bool:
        relation, backward = end
        # reached forwards by r: the entity has r incoming; reached backwards: r outgoing
        key = (entity, backward)
        if key not in relations:
            relations[key] = frozenset(kg.relations(entity, Direction.OUT if backward else Direction.IN))
        return relation in relations[key]

    def share(a: End, b: End) -> float:
        items = samples[a]
        return sum(reached_at(e, b) for e in items) / len(items) if items else 0.0

    parent = {end: end for end in ends}

    def root(end: End) -> End:
        while parent[end] != end:
            parent[end] = parent[parent[end]]
            end = parent[end]
        return end

    for i, a in enumerate(ends):
        for b in ends[i + 1:]:
            if root(a) != root(b) and max(share(a, b), share(b, a)) >= containment:
                parent[root(b)] = root(a)
    groups: dict[End, list[End]] = {}
    for end in ends:
        groups.setdefault(root(end), []).append(end)
    return {end: end_name(min(members)) for members in groups.values() for end in members}


def model_file(path: str | Path) -> Path:
    """The ``answer_types.json`` of a model directory (or the file itself), refused with a clear error when absent."""
    where = Path(path).expanduser()
    file = where / FILE if where.is_dir() else where
    if not file.is_file():
        raise ConfigError(f"answer types {path}: not an answer-type model directory (no {FILE}; make one with "
                          "`kgqa train answer-types`)")
    return file


@dataclass
class AnswerTypes:
    """A trained answer-type model: the typed ends, the classifier's weights and what it was trained with."""

    types: dict[End, str]
    classes: list[str]
    weight: np.ndarray  # (classes, dim)
    bias: np.ndarray  # (classes,)
    encoder: str  # the embedder spec it was trained with (load_embedder(encoder))
    embedder_name: str  # that embedder's name, checked when it reads
    meta: dict[str, Any] = field(default_factory=dict)

    def probabilities(self, embedder: Any, texts: Sequence[str], mentions: Sequence[Sequence[str]]) -> np.ndarray:
        """P(class | question) for each text (its mentions masked), one row per text."""
        if getattr(embedder, "name", self.embedder_name) != self.embedder_name:
            raise ConfigError(f"answer-type model made with encoder {self.embedder_name!r}, not {embedder.name!r}")
        vectors = np.asarray(embedder.embed([mask_mentions(t, m) for t, m in zip(texts, mentions, strict=True)]),
                             dtype=np.float32)
        logits = vectors @ self.weight.T + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        return probs / probs.sum(axis=1, keepdims=True)

    def prior(self, probabilities: np.ndarray, weight: float, *, floor: float = 1e-3
              ) -> Callable[[tuple[End, ...]], float]:
        """The pattern prior for one question's row of :meth:`probabilities`: max(P(type of the pattern's end),
        ``floor``) ** weight, where a type no training question ended on has P = 0; 1 for an untyped end."""
        def prior(pattern: tuple[End, ...]) -> float:
            p = self.end_probability(probabilities, pattern[-1]) if pattern else None
            return 1.0 if p is None else max(p, floor) ** weight

        return prior

    def end_probability(self, probabilities: np.ndarray, end: End) -> float | None:
        """P(the type of ``end`` | question) from one row of :meth:`probabilities`; None for an untyped end."""
        kind = self.types.get(end)
        if kind is None:
            return None
        return float(probabilities[self.classes.index(kind)]) if kind in self.classes else 0.0

    def likely_ends(self, probabilities: np.ndarray, threshold: float = 0.5) -> set[End]:
        """The ends whose type has P >= ``threshold`` for this question (one row of :meth:`probabilities`)."""
        likely = {kind for kind, p in zip(self.classes, probabilities, strict=True) if float(p) >= threshold}
        return {end for end, kind in self.types.items() if kind in likely}

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        data = {"encoder": self.encoder, "embedder_name": self.embedder_name, "classes": self.classes,
                "types": {end_name(end): kind for end, kind in sorted(self.types.items())},
                "weight": self.weight.tolist(), "bias": self.bias.tolist(), **self.meta}
        (out / FILE).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> AnswerTypes:
        file = model_file(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            classes = [str(c) for c in data["classes"]]
            weight = np.asarray(data["weight"], dtype=np.float32)
            bias = np.asarray(data["bias"], dtype=np.float32)
            types = {parse_end(str(k)): str(v) for k, v in data["types"].items()}
            encoder = str(data["encoder"])
            embedder_name = str(data.get("embedder_name", encoder))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"answer types {file} cannot be read: {exc}") from None
        if weight.ndim != 2 or weight.shape[0] != len(classes) or bias.shape != (len(classes),) \
                or not set(classes) <= set(types.values()):
            raise ConfigError(f"answer types {file}: weights, classes and types do not agree")
        meta = {k: v for k, v in data.items()
                if k not in {"encoder", "embedder_name", "classes", "types", "weight", "bias"}}
        return cls(types, classes, weight, bias, encoder, embedder_name, meta)


def _ends_around(kg: KnowledgeGraph, entities: Sequence[str], rng: random.Random, per_end: int
                 ) -> dict[End, list[str]]:
    """Entities reached at each end one hop from ``entities`` (a seeded sample of at most ``per_end`` per end)."""
    found: dict[End, set[str]] = {}
    for entity in entities:
        for direction, backward in ((Direction.OUT, False), (Direction.IN, True)):
            for relation in kg.relations(entity, direction):
                pool = found.setdefault((relation, backward), set())
                if len(pool) < 4 * per_end:
                    pool.update(kg.neighbors(entity, relation, direction, limit=per_end))
    return {end: rng.sample(sorted(pool), min(per_end, len(pool))) for end, pool in found.items()}


def train_answer_types(kg: KnowledgeGraph, questions: Sequence[Any], embedder: Any, *, encoder: str | None = None,
                       copies: Sequence[str] = (), seed: int = 0, epochs: int = 300, lr: float = 0.05,
                       samples_per_end: int = 200, containment: float = 0.7,
                       progress: Callable[[str], None] | None = None) -> AnswerTypes:
    """Types from the KG, then the classifier on ``questions`` (:class:`~kgqa.steps.foresight.training.
    TrainingQuestion`: text, mentions, chain, answers) and ``copies`` (other wordings of the same questions, in the
    same order, e.g. composed from their chains; several blocks one after the other); ``encoder`` is the embedder's
    spec, recorded so the model can load it again (default: its name). Seeded; full-batch Adam, cross-entropy."""
    from kgqa.steps.foresight.scorer import _torch

    torch = _torch()
    say = progress or (lambda _: None)
    if not questions:
        raise ConfigError("answer types: no training questions")
    if len(copies) % len(questions):
        raise ConfigError(f"answer types: {len(copies)} copies for {len(questions)} questions (whole blocks wanted)")
    blocks = len(copies) // len(questions)
    rng = random.Random(f"{seed}:answer-types")

    def last(q: Any) -> End:
        hop = q.chain[-1]
        return (hop.relation, hop.direction is Direction.IN)

    pools: dict[End, set[str]] = {}
    for q in questions:
        pools.setdefault(last(q), set()).update(q.answers)
    samples = {end: rng.sample(sorted(pool), min(samples_per_end, len(pool))) for end, pool in pools.items()}
    for end, found in _ends_around(kg, sorted({e for items in samples.values() for e in items}), rng,
                                   samples_per_end).items():
        samples.setdefault(end, found)  # ends no training question ends on, one hop from the answers
    types = induce_types(kg, samples, containment=containment)
    classes = sorted({types[last(q)] for q in questions})
    say(f"{len(types)} answer ends in {len(classes)} types: " + "; ".join(
        f"{kind} = {', '.join(end_name(e) for e in sorted(types) if types[e] == kind)}" for kind in classes))
    labels = [classes.index(types[last(q)]) for q in questions]
    texts = [mask_mentions(q.text, q.mentions) for q in questions]
    texts += [mask_mentions(c, questions[i % len(questions)].mentions) for i, c in enumerate(copies)]
    labels += labels * blocks
    say(f"embedding {len(texts)} question texts")
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    torch.manual_seed(seed)
    layer = torch.nn.Linear(vectors.shape[1], len(classes))
    optimiser = torch.optim.Adam(layer.parameters(), lr=lr)
    x, y = torch.tensor(vectors), torch.tensor(labels)
    loss = None
    for _ in range(epochs):
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(layer(x), y)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        accuracy = float((layer(x).argmax(1) == y).float().mean())
    final = float(loss.detach()) if loss is not None else float("nan")
    say(f"classifier: training loss {final:.4f}, training accuracy {100 * accuracy:.1f}")
    trained = {"questions": len(questions), "copies": len(copies), "loss": round(final, 5),
               "accuracy": round(accuracy, 5), "epochs": epochs, "lr": lr, "seed": seed, "containment": containment,
               "samples_per_end": samples_per_end}
    return AnswerTypes(types, classes, layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy(),
                       encoder or str(embedder.name), str(embedder.name), {"training": trained})
