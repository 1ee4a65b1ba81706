"""Training examples of the scorer phase: the gold walk of a question (its positive triples by layer) and the sampled
negatives around it, and the tensors a batch reads them from."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.kg.base import Direction, KnowledgeGraph
from kgqa.methods.fog.training.settings import TrainSettings
from kgqa.steps.foresight.graph import Triple
from kgqa.steps.foresight.scorer import LabelVectors


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
    if not all(kg.has_relation(hop.relation) for hop in question.chain):
        frontier = []  # a chain through a relation this KG lacks reaches nothing here: the question is unreached
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


def example_tensors(torch: Any, labels: LabelVectors, examples: list[Example]) -> dict[str, Any]:
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
