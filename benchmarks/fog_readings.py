"""Compare FoG's graph-mode path scores on one expanded, propagated subgraph per question: the weakest edge (``min``),
the product of the edges (``product``), and the geometric mean of the weakest and the last edge (``min_last``), read
from every re-scored edge, paths never returning to a topic. MetaQA dev questions the scorer was not trained on (when
its scorer.json lists its training questions), a seeded sample per hop.

    python benchmarks/fog_readings.py --scorer /tmp/fog/scorer-v1 --kg /tmp/kgs/metaqa --data-dir ../shared/data \
        --per-hop 300 --hops 3 --hops 1

Prints Hits@1 and hit (percent) per reading and hop.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorer", required=True)
    parser.add_argument("--kg", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--per-hop", type=int, default=300)
    parser.add_argument("--hops", type=int, action="append")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from kgqa.artifacts import ArtifactStore
    from kgqa.eval.gold_paths import training_questions
    from kgqa.kg import open_kg
    from kgqa.steps.answers import presentable
    from kgqa.steps.foresight.graph import expand, rank_answers
    from kgqa.steps.foresight.scorer import ForesightScorer, LabelVectors
    from kgqa.text import load_embedder

    kg = open_kg(args.kg)
    embedder = load_embedder("minilm")
    labels = LabelVectors(kg, embedder, ArtifactStore().get("label-embeddings", kg=kg, embedder=embedder))
    scorer = ForesightScorer.load(args.scorer)
    meta = json.loads((Path(args.scorer) / "scorer.json").read_text(encoding="utf-8"))
    seen = set(meta.get("training_questions", []))
    readings = ("min", "product", "min_last")
    for hops in args.hops or [1, 2, 3]:
        pool = [q for q in training_questions([f"metaqa-{hops}hop"], "dev", data_dir=args.data_dir).questions
                if q.source not in seen]
        random.Random(args.seed).shuffle(pool)
        chosen = pool[:args.per_hop]
        totals = {r: [0, 0] for r in readings}
        for q in chosen:
            graph = expand(kg, q.topics, scorer.scorer_for(labels, scorer.questions(labels, [q.text])), hops=3,
                           tau_e=0.02)
            scorer.propagate(graph)
            for reading in readings:
                ranked, _ = rank_answers(graph, 0.7, within="expanded", combine=reading, simple=False,
                                         answerable=lambda ids: set(presentable(kg, ids)))
                names = [a.entity for a in ranked]
                totals[reading][0] += bool(names) and names[0] in q.answers
                totals[reading][1] += bool(set(names) & q.answers)
        n = max(len(chosen), 1)
        print(f"{hops}-hop ({len(chosen)} questions, {'unseen' if seen else 'any'} dev): " + ", ".join(
            f"{r}: Hits@1 {100 * a / n:.1f} hit {100 * b / n:.1f}" for r, (a, b) in totals.items()))


if __name__ == "__main__":
    main()
