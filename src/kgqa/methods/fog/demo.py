"""The demo KG's own FoG scorer: trained on the 61 demo questions (their gold chains ship with them) and on one-hop
questions written from the demo KG's relations, built once into the artifact store as ``fog-demo-scorer``
(:data:`kgqa.steps.foresight.loading.DEMO_SCORER`, which every method reading a foresight scorer loads on the demo KG)
so ``kgqa ask ... --method fog`` works offline with no training step.

It answers the demo questions because it was trained on them: it shows the mechanism, it measures nothing. A scorer for
real work comes from ``kgqa train fog`` on a dataset's dev split.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kgqa.artifacts.inputs import resolve_embedder
from kgqa.artifacts.kinds import ArtifactInputs, ArtifactKind, Progress, register_artifact
from kgqa.datasets.gold_chains import TrainingQuestion
from kgqa.kg.base import parse_chain
from kgqa.kg.demo import demo_files, open_demo_kg
from kgqa.methods.fog.training import TrainSettings, train_scorer
from kgqa.steps.foresight.loading import DEMO_SCORER
from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors

#: Settings for 61 questions: many epochs at a higher rate (the paper's 5 epochs assume thousands of questions).
DEMO_SETTINGS = TrainSettings(lr=1e-3, epochs=40, batch_size=64, kappa=10, max_positives_per_layer=8, stop_negatives=10,
                              validation_share=0.0, propagation_questions=61,
                              propagation_epochs=20, propagation_lr=1e-3, seed=0)


def demo_training_questions() -> list[TrainingQuestion]:
    """The demo questions with their gold chains, as training questions."""
    out = []
    for line in demo_files()["questions"].read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        if not raw.get("chain"):
            continue
        out.append(TrainingQuestion(raw["question"], tuple(t["id"] for t in raw["topic_entities"]),
                                    parse_chain(raw["chain"]), frozenset(a["id"] for a in raw["answers"] if a.get("id")),
                                    source=raw["id"]))
    return out


def relation_questions(kg: Any, *, per_relation: int = 6, seed: int = 0) -> list[TrainingQuestion]:
    """One-hop questions written from the KG itself, ``per_relation`` per relation: "What is the <relation words> of
    <head name>?" with the relation as the chain and its tails as answers. 61 questions are too few to learn which
    relation a question asks for; these add the relation vocabulary's wording (seeded sample of heads)."""
    import random

    from kgqa.kg.base import Direction, Hop
    from kgqa.kg.schema import relation_words

    rng = random.Random(seed)
    heads_by_relation: dict[str, list[str]] = {}
    for head, relation, _tail in kg.iter_triples():
        heads_by_relation.setdefault(relation, []).append(head)
    out = []
    for relation in sorted(heads_by_relation):
        heads = sorted(set(heads_by_relation[relation]))
        names = kg.names(heads)
        named = [h for h in heads if names.get(h)]
        for head in rng.sample(named, min(per_relation, len(named))):
            tails = kg.neighbors(head, relation, Direction.OUT, limit=1000)
            words = relation_words(relation, last=2) or relation
            out.append(TrainingQuestion(f"What is the {words} of {names[head]}?", (head,), (Hop(relation),),
                                        frozenset(tails), source=f"relation:{relation}"))
    return out


def _resolve(params: dict[str, Any]) -> ArtifactInputs:
    embedder = resolve_embedder(params.get("embedder"))
    questions = demo_files()["questions"].read_bytes() + demo_files()["triples"].read_bytes()
    import hashlib

    return ArtifactInputs(params={"embedder": embedder.json},
                          identity={"embedder": embedder.identity, "data": hashlib.sha256(questions).hexdigest(),
                                    "settings": DEMO_SETTINGS.to_dict()},
                          describe=lambda: {"data": "kgqa demo questions over the demo KG"},
                          resources={"embedder": embedder.value})


def _build(inputs: ArtifactInputs, out_dir: Path, progress: Progress) -> dict[str, Any]:
    embedder = inputs.resources["embedder"]
    kg = open_demo_kg()
    try:
        labels = LabelVectors(kg, embedder)
        questions = demo_training_questions() + relation_questions(kg)
        result = train_scorer(kg, questions, labels, settings=DEMO_SETTINGS, encoder=str(inputs.params["embedder"]),
                              progress=progress)
        result.scorer.save(out_dir, {"trained_on": "demo questions (61) + one-hop questions written from the demo KG's "
                                                   "relations (relation_questions)", "history": result.history,
                                     "summary": result.summary})
    finally:
        kg.close()
    return {"questions": result.summary["questions"], "seconds": round(result.summary["seconds"], 1)}


#: replace: a re-imported module registers an equal recipe again
register_artifact(ArtifactKind(
    name=DEMO_SCORER, summary="FoG scorer trained on the demo questions (the demo KG's default FoG scorer)", version="6",
    params={"embedder": "embedder spec; default: minilm"}, resolve=_resolve, build=_build,
    load=ForesightScorer.load), replace=True)
