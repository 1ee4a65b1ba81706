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
  wordings of their chains when a phrase table is given) to predict the type of the gold chain's last hop; trained
  with ``focus`` it reads the question's :func:`focus_phrase` ("which writers penned movies") beside the sentence.

* a second linear head on the same vector, predicting the type of the question's **topic** (the start of the gold
  chain's first hop): "the movie X" is a film, "films X directed" asks from a person.
* **junctions** from the KG: for two ends a and b whose types differ where one hop would end and the next begin (a walk
  reaching an entity at a, then leaving it by b), the share of the entities sampled at a that can leave by b.
  MetaQA's KB names a film and a person alike by a string, so "Lucy" is both the dog acting in Wendy and Lucy and a
  film with a director; an actor leaving by ``directed_by`` happens for 0.1% of them.

At reading time a pattern's walks are multiplied by P(type of the pattern's end | question) ** ``weight``, by
P(type of its start | question) ** ``weight`` and by each junction's share ** ``weight`` (1 where the types agree)
(:func:`kgqa.steps.foresight.graph.rank_answers`, ``pattern_prior``). kgqa's own addition: the paper has no answer
types (its LLM reads the memory subgraph). Models trained before the topic head and the junctions read without them.

Trained by ``kgqa train answer-types``; a directory holding ``answer_types.json`` (types, weights, the encoder's name
and how it was trained), used with ``--method-config answer_types=DIR``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from kgqa.errors import ConfigError
from kgqa.kg.base import Direction, KnowledgeGraph
from kgqa.normalize import unmark_mentions
from kgqa.steps.foresight.type_reader import ReaderSettings, TypeReader, fine_tune_reader, soft_labels

FILE = "answer_types.json"
MASK = "X"
#: what a classifier reads of a question: its whole sentence, and optionally its focus phrase (:func:`focus_phrase`)
#: how a model picks its focus phrase: the feature it stores for each rule of :func:`focus_phrase`
FOCUS_RULES = {"first": "focus", "clause": "focus_clause"}
_RULE_OF_FEATURE = {feature: rule for rule, feature in FOCUS_RULES.items()}
FEATURES = ("sentence", *FOCUS_RULES.values())
_WH_WORDS = frozenset({"who", "whom", "whose", "what", "which", "when", "where", "how"})
_FOCUS_WORDS = 4
#: verbs that open a request ("Name the writers of ...", "kindly identify the films ...")
_IMPERATIVES = frozenset({"name", "list", "identify", "give", "tell", "show", "find", "provide", "specify", "state",
                          "enumerate", "mention", "say", "share", "point", "cite", "pick", "recommend", "suggest",
                          "get", "fetch", "return", "display", "report", "indicate", "reveal", "describe"})
#: words a polite request may open with before its verb ("could you please list ...")
_POLITE = frozenset({"please", "kindly", "could", "can", "would", "will", "you", "i'd", "id", "like", "i", "want",
                     "to", "me", "us", "just", "now", "also", "pls"})
#: (relation, backward): how a walk reaches an entity, as FoG's patterns write a hop
End = tuple[str, bool]


def end_name(end: End) -> str:
    return ("^" if end[1] else "") + end[0]


def parse_end(name: str) -> End:
    return (name[1:], True) if name.startswith("^") else (name, False)


def reverse(end: End) -> End:
    """The same relation walked the other way: where a hop by ``end`` starts is where a hop by ``reverse(end)`` ends."""
    return (end[0], not end[1])


def mask_mentions(text: str, mentions: Sequence[str]) -> str:
    """The question with its topic mentions replaced by a placeholder (and MetaQA's brackets dropped), so the
    classifier reads the wording, not the entity: case-insensitive, longest mention first."""
    out = unmark_mentions(text)
    for mention in sorted({m for m in mentions if m and m.strip()}, key=len, reverse=True):
        out = re.sub(re.escape(mention), MASK, out, flags=re.IGNORECASE)
    return out


def focus_phrase(text: str, rule: str = "first") -> str:
    """The words of a question that say what it asks for: its first wh-word and the three words after it ("which
    writers penned movies"), or the three words before it when it ends the question ("films directed by whom");
    without a wh-word (an imperative, "Name the writers of ...") its first five words. Read beside the sentence
    because a sentence vector of "which writers penned movies featuring X" leans to the films it mentions most.

    ``rule="clause"`` (models that store the ``focus_clause`` feature) looks at clause starts first: a request verb
    opening the question or a clause, after polite words ("Kindly identify the films for which ...", "For the movies
    X made, name the writers") gives the verb and the four words after it, and a wh-word counts only where it opens
    a clause or ends the question, so a relative "which" / "who" inside a clause is not taken for the question word;
    with neither, the first rule."""
    if rule == "clause":
        found = _clause_focus(text)
        if found is not None:
            return found
    elif rule != "first":
        raise ConfigError(f"focus phrase rule {rule!r}: known rules are {', '.join(FOCUS_RULES)}")
    words = re.findall(r"[A-Za-z0-9']+", text)
    for i, word in enumerate(words):
        if word.lower() in _WH_WORDS:
            if i == len(words) - 1:
                return " ".join(words[max(0, i - _FOCUS_WORDS + 1):])
            return " ".join(words[i:i + _FOCUS_WORDS])
    return " ".join(words[:_FOCUS_WORDS + 1])


def _clause_focus(text: str) -> str | None:
    """The clause rule of :func:`focus_phrase`: a request verb or a wh-word where a clause opens (or a wh-word that
    ends the question); None when no clause opens with either."""
    clauses = [re.findall(r"[A-Za-z0-9']+", part) for part in re.split(r"[,;:]", text)]
    for words in clauses:
        i = 0
        while i < len(words) and words[i].lower() in _POLITE:
            i += 1
        if i < len(words) and words[i].lower() in _IMPERATIVES:  # as many words as the first rule's imperative
            return " ".join(words[i:i + _FOCUS_WORDS + 1])
        if words and words[0].lower() in _WH_WORDS:
            return " ".join(words[:_FOCUS_WORDS])
    every = [w for words in clauses for w in words]
    if every and every[-1].lower() in _WH_WORDS:  # "... directed by whom?"
        return " ".join(every[max(0, len(every) - _FOCUS_WORDS):])
    return None


def question_vectors(embedder: Any, masked: Sequence[str], features: Sequence[str]) -> np.ndarray:
    """One row per (already masked) question: the embeddings of ``features`` side by side (one embedding call)."""
    texts = [t if feature == "sentence" else focus_phrase(t, _RULE_OF_FEATURE[feature])
             for feature in features for t in masked]
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    return np.concatenate(np.split(vectors, len(features)), axis=1)


def hop_end(hop: Any) -> End:
    """The end a hop of a gold chain reaches, as FoG's patterns write it: (relation, backward)."""
    return (hop.relation, hop.direction is Direction.IN)


class _Reach:
    """Which of the entities sampled at an end could be reached at another end (one KG call per entity and
    direction, whatever the end)."""

    def __init__(self, kg: KnowledgeGraph, samples: dict[End, Sequence[str]]) -> None:
        self.kg = kg
        self.samples = samples
        self._relations: dict[tuple[str, bool], frozenset[str]] = {}

    def reached_at(self, entity: str, end: End) -> bool:
        relation, backward = end
        # reached forwards by r: the entity has r incoming; reached backwards: r outgoing
        key = (entity, backward)
        if key not in self._relations:
            self._relations[key] = frozenset(self.kg.relations(entity, Direction.OUT if backward else Direction.IN))
        return relation in self._relations[key]

    def share(self, a: End, b: End) -> float:
        """The share of ``a``'s samples that could be reached at ``b``."""
        items = self.samples[a]
        return sum(self.reached_at(e, b) for e in items) / len(items) if items else 0.0


def induce_types(kg: KnowledgeGraph, samples: dict[End, Sequence[str]], *, containment: float = 0.7,
                 reach: _Reach | None = None) -> dict[End, str]:
    """Each end -> its type's name (the alphabetically first end of the type, as :func:`end_name` writes it).

    ``samples`` are entities reached at each end (a training question's gold answers are reached at its chain's last
    hop). End A falls in with end B when at least ``containment`` of A's samples also have B's relation in B's
    direction (they could be reached at B), or the other way round; types are the connected groups. ``reach``: the
    lookups of ``samples`` already made (:func:`junction_shares` reads the same ones)."""
    ends = sorted(samples)
    share = (reach or _Reach(kg, samples)).share

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


def junction_shares(kg: KnowledgeGraph, samples: dict[End, Sequence[str]], types: dict[End, str], *,
                    reach: _Reach | None = None) -> dict[tuple[End, End], float]:
    """For every pair of typed ends (a, b) where a hop ending at a and a hop by b starting there would join two
    types: the share of the entities sampled at a that can leave by b (that could be reached at b's reverse). Pairs
    whose types agree are left out (a junction within one type costs nothing). ``reach``: as in
    :func:`induce_types`."""
    reach = reach or _Reach(kg, samples)
    shares = {}
    for a in sorted(samples):
        for b in sorted(types):
            start = reverse(b)
            if start in types and types[a] != types[start]:
                shares[(a, b)] = round(reach.share(a, start), 4)
    return shares


#: An answer type this likely is one the question asks for (the typed retries' trigger target, FoG's and chains').
LIKELY_TYPE = 0.5
#: An end leads on to a typed one when at least this share of its entities can leave by it (a junction's share):
#: films lead on to their directors, so a typed retry asking for people keeps the films in between (chains).
BRIDGE_SHARE = 0.5


@dataclass(frozen=True)
class QuestionTyping:
    """One question's answer-type reading: the model, its P(type) row, the pattern prior made from it and (when the
    model has a topic head and it was asked for) the P(topic type) row. FoG's graph mode and ``chains`` read alike."""

    types: AnswerTypes
    probabilities: np.ndarray
    prior: Callable[[tuple[End, ...]], float]
    topic: np.ndarray | None = None

    @classmethod
    def read(cls, types: AnswerTypes, embedder: Any, text: str, mentions: Sequence[str], weight: float, *,
             topic: bool = True, junctions: bool = True) -> QuestionTyping:
        answer_rows, topic_rows = types.read(embedder, [text], [list(mentions)])
        topic_row = topic_rows[0] if topic_rows is not None and topic else None
        return cls(types, answer_rows[0], types.prior(answer_rows[0], weight, topic=topic_row, junctions=junctions),
                   topic_row)

    def end_p(self, pattern: tuple[End, ...] | None) -> float | None:
        """P(type of ``pattern``'s end); None without a pattern or for an untyped end."""
        return self.types.end_probability(self.probabilities, pattern[-1]) if pattern else None

    def bridge_ends(self, likely: Collection[End], share: float = BRIDGE_SHARE) -> set[End]:
        """The typed ends one hop before a ``likely`` one: those of the type where a likely end's hop starts (the
        films, for the directors a hop by ``film.film.directed_by`` reaches) and those whose junction to a likely end
        has at least ``share`` (the likely ends themselves left out)."""
        wanted = set(likely)
        types = self.types.types
        starts = {types[reverse(b)] for b in wanted if reverse(b) in types}
        out = {a for a, kind in types.items() if kind in starts}
        out |= {a for (a, b), value in self.types.junctions.items() if b in wanted and value >= share}
        return out - wanted

    def retry_prior(self, prefix: tuple[End, ...] | None, *, max_extra: int = 0) -> Callable[[tuple[End, ...]], float]:
        """A typed retry's prior: the question's, and 0 for a pattern that does not end on a likely type
        (:data:`LIKELY_TYPE`) or, given a ``prefix`` (the first reading's hops but the last), does not start with it
        and go on by one hop and at most ``max_extra`` more."""
        def prior(pattern: tuple[End, ...]) -> float:
            if not pattern:
                return 0.0
            if prefix is not None and (pattern[: len(prefix)] != prefix
                                       or not len(prefix) < len(pattern) <= len(prefix) + 1 + max_extra):
                return 0.0
            p = self.types.end_probability(self.probabilities, pattern[-1])
            return self.prior(pattern) if p is not None and p >= LIKELY_TYPE else 0.0

        return prior


def check_answer_types_dir(value: str | None) -> str | None:
    """A method setting naming an answer-type model directory, checked when the settings are (a one-line error before
    any question; the model is read at the first one); blank is None."""
    if value is None or not str(value).strip():
        return None
    try:
        model_file(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return str(value)


#: The subdirectory in which a scorer directory may carry its own answer-type model (the demo scorer does):
#: methods reading that scorer use it when no other is configured.
BUNDLED = "answer_types"


def bundled_model(scorer_dir: str | Path | None) -> Path | None:
    """The answer-type model a scorer directory carries (``BUNDLED``), or None."""
    if scorer_dir is None:
        return None
    where = Path(scorer_dir) / BUNDLED
    return where if (where / FILE).is_file() else None


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
    #: the topic head (None in models trained before it): classes, (classes, dim) weights, (classes,) bias
    topic_classes: list[str] | None = None
    topic_weight: np.ndarray | None = None
    topic_bias: np.ndarray | None = None
    #: (end a, end b) -> share of a's entities that can leave by b, for pairs of two types (empty: none stored)
    junctions: dict[tuple[End, End], float] = field(default_factory=dict)
    #: what the heads read of a question (:data:`FEATURES`); models trained before the focus phrase read the sentence
    features: tuple[str, ...] = ("sentence",)
    #: a fine-tuned encoder reading the answer type in place of the answer head (None: the head reads it)
    reader: TypeReader | None = None

    def _vectors(self, embedder: Any, masked: Sequence[str]) -> np.ndarray:
        if getattr(embedder, "name", self.embedder_name) != self.embedder_name:
            raise ConfigError(f"answer-type model made with encoder {self.embedder_name!r}, not {embedder.name!r}")
        vectors = question_vectors(embedder, masked, self.features)
        if vectors.shape[1] != self.weight.shape[1]:
            raise ConfigError(f"answer-type model reads {self.weight.shape[1]} dimensions, its features "
                              f"({', '.join(self.features)}) give {vectors.shape[1]}")
        return vectors

    def focus(self, text: str, mentions: Sequence[str]) -> str | None:
        """The focus phrase this model reads of a question (its mentions masked); None when it reads none."""
        rule = next((_RULE_OF_FEATURE[f] for f in self.features if f in _RULE_OF_FEATURE), None)
        return None if rule is None else focus_phrase(mask_mentions(text, mentions), rule)

    def probabilities(self, embedder: Any, texts: Sequence[str], mentions: Sequence[Sequence[str]]) -> np.ndarray:
        """P(class | question) for each text (its mentions masked), one row per text: the reader's when the model has
        one, else the answer head's."""
        masked = [mask_mentions(t, m) for t, m in zip(texts, mentions, strict=True)]
        if self.reader is not None:
            return self.reader.probabilities(masked)
        return _softmax(self._vectors(embedder, masked), self.weight, self.bias)

    def read(self, embedder: Any, texts: Sequence[str], mentions: Sequence[Sequence[str]]
             ) -> tuple[np.ndarray, np.ndarray | None]:
        """(:meth:`probabilities`, P(topic class | question) or None without a topic head), one embedding per text."""
        masked = [mask_mentions(t, m) for t, m in zip(texts, mentions, strict=True)]
        vectors = self._vectors(embedder, masked)
        topic = None
        if self.topic_weight is not None and self.topic_bias is not None:
            topic = _softmax(vectors, self.topic_weight, self.topic_bias)
        if self.reader is not None:
            return self.reader.probabilities(masked), topic
        return _softmax(vectors, self.weight, self.bias), topic

    def prior(self, probabilities: np.ndarray, weight: float, *, floor: float = 1e-3,
              topic: np.ndarray | None = None, junctions: bool = True) -> Callable[[tuple[End, ...]], float]:
        """The pattern prior for one question's row of :meth:`probabilities`: max(P(type of the pattern's end),
        ``floor``) ** weight, where a type no training question ended on has P = 0; 1 for an untyped end. With
        ``topic`` (the question's row of the topic head) times max(P(type of the pattern's start), ``floor``) **
        weight; with ``junctions`` times max(share, ``floor``) ** weight for each junction between two types."""
        def prior(pattern: tuple[End, ...]) -> float:
            if not pattern:
                return 1.0
            p = self.end_probability(probabilities, pattern[-1])
            value = 1.0 if p is None else max(p, floor) ** weight
            if topic is not None:
                start = self.topic_probability(topic, pattern[0])
                value *= 1.0 if start is None else max(start, floor) ** weight
            if junctions and self.junctions:
                for a, b in pairwise(pattern):
                    share = self.junctions.get((a, b))
                    if share is not None:
                        value *= max(share, floor) ** weight
            return value

        return prior

    def end_probability(self, probabilities: np.ndarray, end: End) -> float | None:
        """P(the type of ``end`` | question) from one row of :meth:`probabilities`; None for an untyped end."""
        kind = self.types.get(end)
        if kind is None:
            return None
        return float(probabilities[self.classes.index(kind)]) if kind in self.classes else 0.0

    def topic_probability(self, topic: np.ndarray, first: End) -> float | None:
        """P(the type where a hop by ``first`` starts | question) from one row of the topic head; None when that
        start is untyped or the model has no topic head."""
        kind = self.types.get(reverse(first))
        if kind is None or self.topic_classes is None:
            return None
        return float(topic[self.topic_classes.index(kind)]) if kind in self.topic_classes else 0.0

    def likely_ends(self, probabilities: np.ndarray, threshold: float = 0.5) -> set[End]:
        """The ends whose type has P >= ``threshold`` for this question (one row of :meth:`probabilities`)."""
        likely = {kind for kind, p in zip(self.classes, probabilities, strict=True) if float(p) >= threshold}
        return {end for end, kind in self.types.items() if kind in likely}

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        data = {"encoder": self.encoder, "embedder_name": self.embedder_name, "classes": self.classes,
                "types": {end_name(end): kind for end, kind in sorted(self.types.items())},
                "weight": self.weight.tolist(), "bias": self.bias.tolist(), **self.meta}
        if self.features != ("sentence",):
            data["features"] = list(self.features)
        if self.topic_classes is not None and self.topic_weight is not None and self.topic_bias is not None:
            data["topic"] = {"classes": self.topic_classes, "weight": self.topic_weight.tolist(),
                             "bias": self.topic_bias.tolist()}
        if self.junctions:
            data["junctions"] = {f"{end_name(a)} {end_name(b)}": share
                                 for (a, b), share in sorted(self.junctions.items())}
        if self.reader is not None:
            data["reader"] = self.reader.save(out)
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
            topic = data.get("topic")
            topic_classes = [str(c) for c in topic["classes"]] if topic else None
            topic_weight = np.asarray(topic["weight"], dtype=np.float32) if topic else None
            topic_bias = np.asarray(topic["bias"], dtype=np.float32) if topic else None
            features = tuple(str(f) for f in data.get("features") or ("sentence",))
            junctions = {}
            for key, share in (data.get("junctions") or {}).items():
                a, b = str(key).split()
                junctions[(parse_end(a), parse_end(b))] = float(share)
            reader = TypeReader.from_entry(data["reader"], file.parent) if data.get("reader") else None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"answer types {file} cannot be read: {exc}") from None
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ConfigError(f"answer types {file}: unknown features {unknown}; known: {', '.join(FEATURES)}")
        if not _agrees(weight, bias, classes, types) or (
                topic_classes is not None and not _agrees(topic_weight, topic_bias, topic_classes, types)) or (
                topic_weight is not None and topic_weight.shape[1:] != weight.shape[1:]):
            raise ConfigError(f"answer types {file}: weights, classes and types do not agree")
        if reader is not None and (reader.classes != classes
                                   or not _agrees(reader.weight, reader.bias, reader.classes, types)):
            raise ConfigError(f"answer types {file}: the reader's classes do not agree with the model's")
        meta = {k: v for k, v in data.items()
                if k not in {"encoder", "embedder_name", "classes", "types", "weight", "bias", "topic", "junctions",
                             "features", "reader"}}
        return cls(types, classes, weight, bias, encoder, embedder_name, meta, topic_classes, topic_weight, topic_bias,
                   junctions, features, reader)


def _agrees(weight: np.ndarray | None, bias: np.ndarray | None, classes: list[str], types: dict[End, str]) -> bool:
    return (weight is not None and bias is not None and weight.ndim == 2 and weight.shape[0] == len(classes)
            and bias.shape == (len(classes),) and set(classes) <= set(types.values()))


def _softmax(vectors: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    logits = vectors @ weight.T + bias
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    return probs / probs.sum(axis=1, keepdims=True)


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
                       samples_per_end: int = 200, containment: float = 0.7, question_weight: float = 1.0,
                       focus: bool = False, focus_rule: str = "first", reader: ReaderSettings | None = None,
                       reader_wordings: Sequence[tuple[str, End]] = (),
                       progress: Callable[[str], None] | None = None) -> AnswerTypes:
    """Types from the KG, then the classifier on ``questions`` (:class:`~kgqa.methods.fog.training.
    TrainingQuestion`: text, mentions, chain, answers) and ``copies`` (other wordings of the same questions, in the
    same order, e.g. composed from their chains; several blocks one after the other); ``encoder`` is the embedder's
    spec, recorded so the model can load it again (default: its name). The topic head learns the type where each
    question's chain starts, from the same vectors; the junctions are measured on the same samples as the types.
    ``question_weight``: how much a question in its own wording weighs in the loss against one copy. With ``focus``
    both heads read the question's :func:`focus_phrase` (by ``focus_rule``, "first" or "clause") beside its sentence.
    Seeded; full-batch Adam, cross-entropy. With ``reader`` a copy of the encoder is fine-tuned to read the answer
    type (:mod:`~kgqa.steps.foresight.type_reader`) on the same masked texts, each distinct text once with its
    classes' shares and the largest weight of its occurrences (``question_weight`` for a question's own wording), plus
    ``reader_wordings`` (masked wordings with the end their chain reaches, e.g. every template
    of a file once)."""
    say = progress or (lambda _: None)
    if not questions:
        raise ConfigError("answer types: no training questions")
    if question_weight <= 0:
        raise ConfigError(f"answer types: the question weight must be positive, got {question_weight}")
    if len(copies) % len(questions):
        raise ConfigError(f"answer types: {len(copies)} copies for {len(questions)} questions (whole blocks wanted)")
    blocks = len(copies) // len(questions)
    rng = random.Random(f"{seed}:answer-types")

    pools: dict[End, set[str]] = {}
    for q in questions:
        pools.setdefault(hop_end(q.chain[-1]), set()).update(q.answers)
    samples = {end: rng.sample(sorted(pool), min(samples_per_end, len(pool))) for end, pool in pools.items()}
    for end, found in _ends_around(kg, sorted({e for items in samples.values() for e in items}), rng,
                                   samples_per_end).items():
        samples.setdefault(end, found)  # ends no training question ends on, one hop from the answers
    reach = _Reach(kg, samples)  # the types and the junctions read the same samples' relations: look them up once
    types = induce_types(kg, samples, containment=containment, reach=reach)
    classes = sorted({types[hop_end(q.chain[-1])] for q in questions})
    say(f"{len(types)} answer ends in {len(classes)} types: " + "; ".join(
        f"{kind} = {', '.join(end_name(e) for e in sorted(types) if types[e] == kind)}" for kind in classes))
    junctions = junction_shares(kg, samples, types, reach=reach)
    crossing = sorted(junctions.items(), key=lambda item: item[1])
    say(f"{len(junctions)} junctions between two types; least crossed: " + ", ".join(
        f"{end_name(a)} then {end_name(b)} {share:.3f}" for (a, b), share in crossing[:4]))
    starts = [types.get(reverse(hop_end(q.chain[0]))) for q in questions]
    topic_classes = sorted({kind for kind in starts if kind is not None})
    texts = [mask_mentions(q.text, q.mentions) for q in questions]
    texts += [mask_mentions(c, questions[i % len(questions)].mentions) for i, c in enumerate(copies)]
    if focus_rule not in FOCUS_RULES:
        raise ConfigError(f"answer types: focus rule {focus_rule!r}; known rules are {', '.join(FOCUS_RULES)}")
    features = ("sentence", FOCUS_RULES[focus_rule]) if focus else ("sentence",)
    say(f"embedding {len(texts)} question texts ({', '.join(features)})")
    vectors = question_vectors(embedder, texts, features)
    labels = [classes.index(types[hop_end(q.chain[-1])]) for q in questions] * (blocks + 1)
    weights = np.asarray([question_weight] * len(questions) + [1.0] * len(copies), dtype=np.float32)
    head = _fit_linear(vectors, labels, len(classes), weights, seed=seed, epochs=epochs, lr=lr)
    say(f"classifier: training loss {head.loss:.4f}, training accuracy {100 * head.accuracy:.1f}")
    topic = None
    if topic_classes:
        rows = [i for i in range(len(texts)) if starts[i % len(questions)] is not None]
        topic = _fit_linear(vectors[rows], [topic_classes.index(str(starts[i % len(questions)])) for i in rows],
                            len(topic_classes), weights[rows], seed=seed, epochs=epochs, lr=lr)
        say(f"topic head ({len(topic_classes)} types): training loss {topic.loss:.4f}, "
            f"training accuracy {100 * topic.accuracy:.1f}")
    type_reader = None
    if reader is not None:
        extra = [(text, classes.index(types[end])) for text, end in reader_wordings
                 if types.get(end) in classes]
        unique, targets, text_weights = soft_labels([*texts, *(t for t, _ in extra)], [*labels, *(c for _, c in extra)],
                                                    len(classes), [*weights.tolist(), *([1.0] * len(extra))])
        say(f"fine-tuning the reader on {len(unique)} distinct texts ({len(extra)} wordings besides the questions "
            f"and copies)")
        type_reader = fine_tune_reader(encoder or str(embedder.name), unique, targets, classes, reader,
                                       weights=text_weights, progress=say)
    trained = {"questions": len(questions), "copies": len(copies), "loss": round(head.loss, 5),
               "accuracy": round(head.accuracy, 5), "epochs": epochs, "lr": lr, "seed": seed, "containment": containment,
               "samples_per_end": samples_per_end}
    if question_weight != 1.0:
        trained["question_weight"] = question_weight
    if topic is not None:
        trained["topic"] = {"loss": round(topic.loss, 5), "accuracy": round(topic.accuracy, 5)}
    return AnswerTypes(types, classes, head.weight, head.bias, encoder or str(embedder.name), str(embedder.name),
                       {"training": trained}, topic_classes if topic else None, topic.weight if topic else None,
                       topic.bias if topic else None, junctions, features, type_reader)


@dataclass(frozen=True)
class _Head:
    weight: np.ndarray
    bias: np.ndarray
    loss: float
    accuracy: float


def _fit_linear(vectors: np.ndarray, labels: Sequence[int], n_classes: int, weights: np.ndarray, *, seed: int,
                epochs: int, lr: float) -> _Head:
    """One linear layer under softmax cross-entropy (each row weighted; the weighted mean), full-batch Adam from a
    seeded start."""
    from kgqa.steps.foresight.scorer import _torch

    torch = _torch()
    torch.manual_seed(seed)
    layer = torch.nn.Linear(vectors.shape[1], n_classes)
    optimiser = torch.optim.Adam(layer.parameters(), lr=lr)
    x, y = torch.tensor(vectors), torch.tensor(list(labels))
    w = torch.tensor(weights / weights.sum())
    loss = None
    for _ in range(epochs):
        optimiser.zero_grad()
        loss = (torch.nn.functional.cross_entropy(layer(x), y, reduction="none") * w).sum()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        accuracy = float((layer(x).argmax(1) == y).float().mean())
    return _Head(layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy(),
                 float(loss.detach()) if loss is not None else float("nan"), accuracy)
