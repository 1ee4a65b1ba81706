"""Training questions made from a KG alone: relation paths sampled from the graph and worded from its relation labels
(``kgqa train fog --synthetic``), so a foresight scorer can be trained on a KG that has no labelled questions.

Every question is a :class:`~kgqa.datasets.gold_chains.TrainingQuestion` (text, topic, chain, answers, source,
mentions), the same supervision a benchmark's gold chain gives; no text of any dataset is read. The choices:

* **Seeds, stratified by relation.** One pass over the KG's triples (:meth:`iter_triples`, embedded stores) indexes,
  for every relation and direction (a *key*: ``(r, out)`` starts at a head, ``(r, in)`` at a tail; the schema's noise
  relations left out), a bottom-k sample of its distinct start nodes by a seeded hash (``candidates_per_key``): uniform
  over the nodes, whatever their degree or the storage order. Questions start from the keys in turn (a seeded order),
  so a relation with ten edges starts as many questions as one with a hundred thousand. First, every key gets one
  question of its own where the KG allows (a key that starts only at nameless or literal nodes is reached through a
  named neighbour: ``p -> cvt -key-> answer``); then the rest follow the key rotation (with few questions, the
  coverage questions, mostly one hop, are most of them). A KG that cannot list its triples (a SPARQL endpoint) is
  refused with a one-line error.
* **Paths.** ``hops`` entity hops (a seeded mix, ``hop_mix``; 1-3 by default, equally often): each next hop is chosen
  uniformly among the relations and directions of the node reached (not by how many edges each has), then a neighbour
  uniformly; or, with ``sibling_share`` (0.3), by the previous relation walked back, to the siblings of the node just
  left ("the other films of the director of Heat"): the motif by which questions relate two things of one kind, which
  a uniform choice among a node's relations would rarely draw. A walk never comes back to the topic and never steps
  straight back to the node it just left (as the walks of kgqa.steps.walks skip the nodes they visited); going on by
  the reverse of the relation it came by is how it reaches those siblings, as FoG's graph mode walks too. A nameless
  (CVT) node is passed through: the walk goes on from it at once, so a CVT hop is two relations and a CVT is never a
  topic or an answer. A chain has at most ``max_relations`` relations (FoG's L = 3 layers).
* **Answers.** The chain executed from the topic on the KG (``kg.run_chain`` with bindings), keeping the paths that
  obey the walk's rules (no topic again, no step straight back) and end at a named node or a literal. A question with
  more than ``max_answers`` (100) answers, or more than ``max_paths`` (20,000) paths, is dropped: it runs through a
  hub ("the films of the genre of Heat") and says little about which relation to follow. The cap is wide on purpose:
  a three-hop question through a film's cast reaches dozens of answers (MetaQA's 3-hop dev answers: median 6, 90th
  percentile 35), and with a cap of 20 (tried on MetaQA dev) the scorer never saw the third hop of such a question
  and stopped at the films. The topic is never among the answers.
* **Wording** (:mod:`kgqa.datasets.synthetic_wording`). Each hop becomes a phrase from its relation's words
  (:func:`kgqa.kg.schema.relation_words`, the local name or its last two segments): "the genre of X", "X's genre",
  "what X is directed by" for an outgoing hop; "the ones directed by X", "those whose genre is X", "the ones with
  genre X" for an incoming one (a Freebase relation's type segment names the ones: "the film directed by X"); a CVT
  hop's two relations read as one ("starring actor"). Hops nest from the topic outwards ("the genre of the ones
  directed by the director of Heat"), in a seeded choice of forms, then a frame (what/which/who questions, requests).
  The topic's name is the mention. Same seed, same questions, in the same order.
* **Paraphrase** (optional, a step above this one: :mod:`kgqa.steps.paraphrase`): each question reworded by a model
  in one prompt; a reply that fails the checks keeps the question's wording, counted.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.datasets.synthetic_wording import hop_units, word_question
from kgqa.errors import ConfigError
from kgqa.kg.base import Chain, Direction, Hop, KnowledgeGraph, is_literal

__all__ = [
    "SyntheticSet",
    "SyntheticSettings",
    "chain_answers",
    "parse_hop_mix",
    "synthetic_questions",
]

Key = tuple[str, Direction]


@dataclass(frozen=True)
class SyntheticSettings:
    """How many questions, of which lengths, and the bounds on them (the module docstring gives the reasons)."""

    questions: int = 5000
    seed: int = 0
    #: entity hops -> weight (a CVT hop counts one, though it is two relations)
    hop_mix: tuple[tuple[int, float], ...] = ((1, 1.0), (2, 1.0), (3, 1.0))
    max_relations: int = 3
    #: how often a hop after the first walks the previous relation back, to the siblings (the other films of the
    #: director reached), instead of a relation drawn uniformly
    sibling_share: float = 0.3
    max_answers: int = 100
    candidates_per_key: int = 500
    neighbour_limit: int = 200
    attempts: int = 30
    max_paths: int = 20_000
    #: a paraphrase longer than this many characters (or than four times the question) is refused
    max_paraphrase_chars: int = 300

    def __post_init__(self) -> None:
        if self.questions < 1:
            raise ConfigError(f"synthetic questions must be at least 1, got {self.questions}")
        if not self.hop_mix or any(h < 1 or w < 0 for h, w in self.hop_mix) or sum(w for _, w in self.hop_mix) <= 0:
            raise ConfigError(f"synthetic hop mix {self.hop_mix!r}: hop counts from 1, weights >= 0, not all 0")
        if self.max_relations < 1 or self.max_answers < 1:
            raise ConfigError("synthetic max_relations and max_answers must be at least 1")


def parse_hop_mix(text: str) -> tuple[tuple[int, float], ...]:
    """``"1:1,2:1,3:2"`` (hops:weight, a bare ``2`` weighs 1) as the settings' ``hop_mix``; a bad one is a ConfigError."""
    out: dict[int, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        hops, _, weight = part.partition(":")
        try:
            count, share = int(hops), float(weight) if weight else 1.0
        except ValueError:
            raise ConfigError(f"synthetic hop mix {text!r}: write hops:weight pairs, such as 1:1,2:1,3:1") from None
        if count < 1 or count > 3 or share < 0:
            raise ConfigError(f"synthetic hop mix {text!r}: hops go from 1 to 3 and weights are >= 0")
        out[count] = share
    if not out or sum(out.values()) <= 0:
        raise ConfigError(f"synthetic hop mix {text!r}: give at least one hop count with a positive weight")
    return tuple(sorted(out.items()))


@dataclass
class SyntheticSet:
    """The questions and how they were made (recorded in the model's config.json and card)."""

    questions: list[TrainingQuestion] = field(default_factory=list)
    keys: int = 0
    covered: int = 0
    uncovered: list[str] = field(default_factory=list)
    per_hops: Counter[int] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    paraphrased: int = 0
    paraphrase_failed: Counter[str] = field(default_factory=Counter)

    def describe(self) -> dict[str, Any]:
        return {"questions": len(self.questions), "relation_keys": self.keys, "keys_covered": self.covered,
                "uncovered_keys": self.uncovered[:50], "per_hops": {str(k): v for k, v in sorted(self.per_hops.items())},
                "rejected": dict(sorted(self.rejected.items())), "paraphrased": self.paraphrased,
                "paraphrase_failed": dict(sorted(self.paraphrase_failed.items()))}


def _key_text(key: Key) -> str:
    return key[0] if key[1] is Direction.OUT else "^" + key[0]


def _rank(seed: int, key: Key, node: str) -> int:
    digest = hashlib.blake2b(f"{seed}\x1f{_key_text(key)}\x1f{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def start_index(kg: KnowledgeGraph, *, seed: int, per_key: int) -> dict[Key, list[str]]:
    """Every relation key of ``kg`` (noise relations left out) with a bottom-``per_key`` sample of its distinct start
    nodes by a seeded hash (literals left out), sorted by that hash. Needs ``iter_triples`` (embedded stores)."""
    triples = getattr(kg, "iter_triples", None)
    if not callable(triples):
        raise ConfigError(f"synthetic questions need a KG that can list its triples (an embedded store, `kgqa kg "
                          f"import`); {type(kg).__name__} cannot")
    noise = kg.schema.is_noise_relation
    heaps: dict[Key, list[tuple[int, str]]] = {}
    members: dict[Key, set[str]] = {}
    for head, relation, tail in triples():
        if noise(relation):
            continue
        for key, node in (((relation, Direction.OUT), head), ((relation, Direction.IN), tail)):
            heap = heaps.setdefault(key, [])
            seen = members.setdefault(key, set())
            if is_literal(node) or node in seen:
                continue
            rank = -_rank(seed, key, node)  # a max-heap of the smallest ranks
            if len(heap) < per_key:
                heapq.heappush(heap, (rank, node))
                seen.add(node)
            elif rank > heap[0][0]:
                _, dropped = heapq.heapreplace(heap, (rank, node))
                seen.discard(dropped)
                seen.add(node)
    return {key: [node for _, node in sorted(heaps[key], reverse=True)] for key in sorted(heaps, key=_key_text)}


def chain_answers(kg: KnowledgeGraph, topic: str, chain: Chain, *, max_paths: int = 20_000) -> tuple[list[str], str | None]:
    """The answers of ``chain`` from ``topic``: the ends of its paths (``kg.run_chain`` with bindings) that never come
    back to the topic, never step straight back to the node just left, and end at a named node or a literal. Returns
    (answers in the KG's order, None), or ([], why) when the KG capped the paths."""
    result = kg.run_chain([topic], chain, bindings=True, max_paths=max_paths)
    if result.truncated:
        return [], "paths capped by the KG"
    ends: dict[str, None] = {}
    for path in result.paths or ():
        if topic in path[1:] or any(path[i + 1] == path[i - 1] for i in range(1, len(path) - 1)):
            continue
        ends[path[-1]] = None
    names = kg.names(list(ends))
    return [e for e in ends if names.get(e) or is_literal(e)], None


# ---------------------------------------------------------------------------------------------------------------------
# Sampling


class _Sampler:
    def __init__(self, kg: KnowledgeGraph, settings: SyntheticSettings, index: dict[Key, list[str]]) -> None:
        self.kg, self.settings, self.index = kg, settings, index
        self.rng = random.Random(f"{settings.seed}:synthetic")
        self.names: dict[str, str | None] = {}
        self.seen: set[tuple[str, Chain]] = set()
        self.stats = SyntheticSet(keys=len(index))
        self.covered: set[Key] = set()
        self.last_hops = 0  # the entity hops of the question made last

    def name(self, node: str) -> str | None:
        if node not in self.names:
            self.names.update(self.kg.names([node]))
        return self.names[node]

    def is_cvt(self, node: str) -> bool:
        return not is_literal(node) and not self.name(node)

    def topic_ok(self, node: str) -> bool:
        return not is_literal(node) and bool(self.name(node))

    def step(self, path: list[str], hop: Hop) -> str | None:
        """A neighbour of the path's end by ``hop``, uniformly, never the topic or the node just left."""
        node = path[-1]
        avoid = {path[0], path[-2] if len(path) > 1 else path[0]}
        options = [n for n in self.kg.neighbors(node, hop.relation, hop.direction, limit=self.settings.neighbour_limit)
                   if n not in avoid]
        return self.rng.choice(options) if options else None

    def hops_at(self, node: str) -> list[Hop]:
        """Every relation and direction at ``node``: outgoing first, in the KG's order."""
        return ([Hop(r, Direction.OUT) for r in self.kg.relations(node, Direction.OUT)]
                + [Hop(r, Direction.IN) for r in self.kg.relations(node, Direction.IN)])

    def next_hop(self, path: list[str], hops: list[Hop]) -> Hop | None:
        options = self.hops_at(path[-1])
        return self.rng.choice(options) if options else None

    def extend(self, path: list[str], hops: list[Hop], hop: Hop | None) -> bool:
        """Step from the path's end by ``hop``, then on through CVTs (each by a hop drawn at the CVT); False when a
        step is impossible or the chain would pass ``max_relations``."""
        while True:
            if hop is None or len(hops) >= self.settings.max_relations:
                return False
            node = self.step(path, hop)
            if node is None:
                return False
            path.append(node)
            hops.append(hop)
            if not self.is_cvt(node):
                return True
            hop = self.next_hop(path, hops)

    def walk(self, path: list[str], hops: list[Hop], first: Hop | None, entity_hops: int) -> bool:
        """Extend ``path`` by ``entity_hops`` entity hops (the first by ``first`` when given), CVTs passed through."""
        for i in range(entity_hops):
            hop = first if i == 0 and first is not None else self.next_hop(path, hops)
            if i > 0 and not self.is_cvt(path[-2]) and self.rng.random() < self.settings.sibling_share:
                hop = hops[-1].reversed()  # on to the siblings: the others with the same value
            if not self.extend(path, hops, hop):
                return False
        return True

    def question(self, path: list[str], hops: list[Hop]) -> TrainingQuestion | None:
        topic, chain = path[0], tuple(hops)
        if (topic, chain) in self.seen:
            self.stats.rejected["duplicate"] += 1
            return None
        answers, why = chain_answers(self.kg, topic, chain, max_paths=self.settings.max_paths)
        if why is not None:
            self.stats.rejected[why] += 1
            return None
        if not answers or topic in answers:
            self.stats.rejected["no answer"] += 1
            return None
        if len(answers) > self.settings.max_answers:
            self.stats.rejected[f"more than {self.settings.max_answers} answers"] += 1
            return None
        self.seen.add((topic, chain))
        name = self.name(topic) or topic
        cvts = [self.is_cvt(n) for n in path[1:]]
        text = word_question(name, chain, cvts, self.rng)
        index = len(self.stats.questions)
        question = TrainingQuestion(text, (topic,), chain, frozenset(answers), source=f"synthetic-{index:06d}",
                                    mentions=(name,))
        self.stats.questions.append(question)
        self.last_hops = len(hop_units(chain, cvts))
        self.stats.per_hops[self.last_hops] += 1
        self.covered.update((h.relation, h.direction) for h in chain)
        return question

    def from_key(self, key: Key, entity_hops: int) -> TrainingQuestion | None:
        """A question whose first hop is ``key``, from a start node of the key's sample."""
        starts = [n for n in self.index.get(key, ()) if not is_literal(n)]
        if not starts:
            return None
        start = self.rng.choice(starts)
        if not self.topic_ok(start):
            return None
        path, hops = [start], []
        if not self.walk(path, hops, Hop(*key), entity_hops):
            self.stats.rejected["walk ended early"] += 1
            return None
        return self.question(path, hops)

    def through_key(self, key: Key) -> TrainingQuestion | None:
        """A question that reaches a start node of ``key`` from a named neighbour, then follows ``key``: how a key
        that starts only at CVTs or literals is covered."""
        starts = self.index.get(key, ())
        if not starts:
            return None
        middle = self.rng.choice(starts)
        back_options = self.hops_at(middle)
        if not back_options:
            return None
        back = self.rng.choice(back_options)
        before = [n for n in self.kg.neighbors(middle, back.relation, back.direction, limit=self.settings.neighbour_limit)
                  if self.topic_ok(n)]
        if not before:
            return None
        topic = self.rng.choice(before)
        path, hops = [topic, middle], [back.reversed()]
        return self.question(path, hops) if self.extend(path, hops, Hop(*key)) else None


def _hop_plan(settings: SyntheticSettings, total: int, rng: random.Random) -> list[int]:
    """``total`` hop counts in the proportions of the mix (largest remainders), in a seeded order."""
    weights = dict(settings.hop_mix)
    whole = sum(weights.values())
    exact = {h: total * w / whole for h, w in weights.items()}
    counts = {h: int(v) for h, v in exact.items()}
    for h in sorted(exact, key=lambda h: (counts[h] - exact[h], h))[: total - sum(counts.values())]:
        counts[h] += 1
    plan = [h for h in sorted(counts) for _ in range(counts[h])]
    rng.shuffle(plan)
    return plan


def synthetic_questions(kg: KnowledgeGraph, settings: SyntheticSettings | None = None, *,
                        progress: Callable[[str], None] | None = None) -> SyntheticSet:
    """``settings.questions`` training questions made from ``kg`` (see the module docstring). Fewer when the KG
    cannot give that many within the attempts (the stats say why). :func:`kgqa.steps.paraphrase.paraphrase_all`
    rewords them by a model afterwards."""
    settings = settings or SyntheticSettings()
    say = progress or (lambda _message: None)
    index = start_index(kg, seed=settings.seed, per_key=settings.candidates_per_key)
    if not index:
        raise ConfigError("synthetic questions: the KG has no relation outside its schema's noise relations")
    sampler = _Sampler(kg, settings, index)
    rng = sampler.rng
    keys = list(index)
    rng.shuffle(keys)
    plan = _hop_plan(settings, settings.questions, rng)
    # 1. coverage: one question per key where the KG allows, its own first hop or reached through a neighbour
    for key in keys:
        if len(sampler.stats.questions) >= settings.questions or key in sampler.covered:
            continue
        for attempt in range(settings.attempts):
            made = sampler.from_key(key, 1 + attempt % 2) if attempt % 3 != 2 else sampler.through_key(key)
            if made is not None:
                if sampler.last_hops in plan:
                    plan.remove(sampler.last_hops)
                break
    say(f"synthetic questions: {len(sampler.covered)} of {len(keys)} relation keys covered by "
        f"{len(sampler.stats.questions)} questions")
    # 2. the rest, the keys in turn
    pointer = 0
    for entity_hops in plan:
        if len(sampler.stats.questions) >= settings.questions:
            break
        for _ in range(settings.attempts):
            key = keys[pointer % len(keys)]
            pointer += 1
            if sampler.from_key(key, entity_hops) is not None:
                break
        else:
            sampler.stats.rejected[f"no {entity_hops}-hop question within the attempts"] += 1
        made = len(sampler.stats.questions)
        if made % 1000 == 0:
            say(f"synthetic questions: {made} of {settings.questions}")
    # 3. slots no walk filled: topped up by any hop count of the mix, within a budget of attempts
    counts = [h for h, w in settings.hop_mix if w > 0]
    budget = settings.attempts * 4 * (settings.questions - len(sampler.stats.questions))
    for tries in range(budget):
        if len(sampler.stats.questions) >= settings.questions:
            break
        sampler.from_key(keys[pointer % len(keys)], counts[tries % len(counts)])
        pointer += 1
    stats = sampler.stats
    stats.covered = len(sampler.covered & set(index))
    stats.uncovered = sorted(_key_text(k) for k in set(index) - sampler.covered)
    say(f"synthetic questions: {len(stats.questions)} made ({dict(sorted(stats.per_hops.items()))} by hops); "
        f"{stats.covered} of {stats.keys} relation keys covered")
    return stats
