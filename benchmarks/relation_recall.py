"""Gold-relation recall of ToG's and PoG's relation listings (issue 50): is the gold relation among those shown to the
model?

For the oracle benchmark's held-out samples of webqsp-gog and cwq-gog (the same questions, :func:`oracle_bench.held_out`),
at every node of the gold walk (``GoldReasoning.path_nodes``) the hops ToG and PoG offer there (every relation in both
directions, less the hop straight back along the gold edge the walk came by, as ``walk_back=auto`` does on Freebase)
are listed as each listing rule would list them to the model, and the gold hop of that depth is looked for:

* ``count30-lexical``: the listing before issue 50 under the oracle (no embedder loaded): at most 30 relations, above
  that the 30 with the most word overlap with the question (:func:`kgqa.steps.pruning.lexical_scores`);
* ``count30-embedding``: the same cap ranked by the embedder (what a run with ``--embedder minilm`` listed);
* ``budget``: the listing now (``PruningConfig.budget``, ToG's and PoG's ``relation_budget``, 2,000 tokens): the
  whole list while it fits, else the embedder's best-first prefix that fits.

Per rule: first-relation recall (questions whose gold first hop is shown at a gold topic, of those with a gold walk),
per-depth recall (gold walk nodes whose listing shows the gold hop of that depth, of those that offer it), lists cut,
relations offered and shown. Writes ``benchmarks/results/relation_recall.{json,md}``.

    python benchmarks/relation_recall.py --freebase-kg /work/kgs/freebase --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kgqa.datasets.gold_reasoning import gold_reasoning
from kgqa.kg import open_kg
from kgqa.kg.base import Direction, Hop, KnowledgeGraph
from kgqa.llm.oracle import OracleModel
from kgqa.methods.tog.method import RELATION_BUDGET, RELATIONS
from kgqa.provenance import source_commit
from kgqa.steps.pruning import PruningConfig, RelationPruner, listing_tokens
from kgqa.steps.walks import entity_hops, walks_back
from oracle_bench import held_out

REPO = Path(__file__).resolve().parents[1]
#: the most gold-walk nodes read per depth of one question (a CVT layer can hold hundreds)
NODES_PER_DEPTH = 50


def pruners(embedder: Any, budget: int) -> dict[str, RelationPruner]:
    """The listing rules compared (the LLM is never asked: only :meth:`RelationPruner.shown` runs)."""
    def make(config: PruningConfig, with_embedder: bool) -> RelationPruner:
        return RelationPruner(config, llm=OracleModel(), embedder=embedder if with_embedder else None,
                              signature=RELATIONS)

    return {"count30-lexical": make(PruningConfig(kind="llm", top_k=3, prefilter=30), False),
            "count30-embedding": make(PruningConfig(kind="llm", top_k=3, prefilter=30), True),
            "budget": make(PruningConfig(kind="llm", top_k=3, budget=budget), True)}


def _hop(relation: str, backward: bool) -> Hop:
    return Hop(relation, Direction.IN if backward else Direction.OUT)


def question_listings(kg: KnowledgeGraph, text: str, gold: Any, rules: dict[str, RelationPruner]) -> dict[str, Any]:
    """For one question: per rule, whether the first gold hop is shown at a topic, and per depth (shown, offered)
    counts over the gold walk's nodes; and the listing sizes."""
    back_allowed = walks_back(kg, "auto")
    out: dict[str, Any] = {"rules": {name: {"first": False, "depths": defaultdict(lambda: [0, 0]), "cut": 0}
                                     for name in rules}, "offered": [], "shown": defaultdict(list)}
    for depth, layer in enumerate(gold.path_nodes[:-1] if len(gold.path_nodes) > 1 else ()):
        golds = {_hop(*chain[depth]) for chain in gold.chains if len(chain) > depth}
        before = {_hop(*chain[depth - 1]).reversed() for chain in gold.chains if depth and len(chain) >= depth}
        for node in sorted(layer)[:NODES_PER_DEPTH]:
            hops = entity_hops(kg, node)
            if not back_allowed:  # the hop back along a gold edge the walk came by is not offered (Freebase)
                hops = [h for h in hops if h not in before or h in golds]
            if not golds.intersection(hops):
                continue  # the gold hop leaves from another node of this layer
            out["offered"].append(len(hops))
            for name, pruner in rules.items():
                listing = pruner.shown(text, hops)
                shown = golds.intersection(listing.hops)
                cell = out["rules"][name]
                cell["depths"][depth + 1][1] += 1
                cell["depths"][depth + 1][0] += bool(shown)
                cell["cut"] += len(listing.hops) < len(hops)
                out["shown"][name].append(len(listing.hops))
                if depth == 0 and shown:
                    cell["first"] = True
    return out


def measure(dataset: str, kg_spec: str, n: int, seed: int, data_dir: str | None, embedder: Any,
            budget: int) -> dict[str, Any]:
    questions = held_out(dataset, n, seed, data_dir)
    kg = open_kg(kg_spec)
    rules = pruners(embedder, budget)
    with_walk = 0
    first = dict.fromkeys(rules, 0)
    depths: dict[str, dict[int, list[int]]] = {name: defaultdict(lambda: [0, 0]) for name in rules}
    cut = dict.fromkeys(rules, 0)
    offered: list[int] = []
    shown: dict[str, list[int]] = defaultdict(list)
    tokens: list[int] = []
    try:
        for q in questions:
            gold = gold_reasoning(q, kg)
            if not gold.path_nodes or not gold.chains:
                continue
            with_walk += 1
            found = question_listings(kg, q.text, gold, rules)
            offered += found["offered"]
            for name in rules:
                cell = found["rules"][name]
                first[name] += cell["first"]
                cut[name] += cell["cut"]
                shown[name] += found["shown"][name]
                for depth, (hit, total) in cell["depths"].items():
                    depths[name][depth][0] += hit
                    depths[name][depth][1] += total
            for topic in sorted(gold.path_nodes[0])[:1]:
                tokens.append(listing_tokens(entity_hops(kg, topic)))
    finally:
        kg.close()
    listings = len(offered)

    def pct(a: int, b: int) -> float | None:
        return round(100 * a / b, 1) if b else None

    return {
        "dataset": dataset, "questions": len(questions), "with_gold_walk": with_walk, "listings": listings,
        "offered_mean": round(sum(offered) / listings, 1) if listings else 0, "offered_max": max(offered, default=0),
        "over_30": sum(1 for x in offered if x > 30),
        "topic_listing_tokens_max": max(tokens, default=0),
        "rules": {name: {"first_relation_recall": pct(first[name], with_walk),
                         "depth_recall": {str(d): {"shown": h, "offered": t, "recall": pct(h, t)}
                                          for d, (h, t) in sorted(depths[name].items())},
                         "lists_cut": cut[name],
                         "shown_mean": round(sum(shown[name]) / len(shown[name]), 1) if shown[name] else 0}
                  for name in rules},
    }


def render(record: dict[str, Any]) -> str:
    lines = [f"# Gold-relation recall of ToG's and PoG's relation listings ({record['when']}, commit {record['commit']})",
             "", f"Command: `{record['command']}`. {record['seconds']} s.", "",
             "Is the gold relation among those a relation prompt lists? At every node of the gold walk of the oracle "
             "benchmark's held-out questions, the hops offered there are listed by each rule (see the script's "
             "docstring): `count30-lexical` is what ToG and PoG listed under the oracle before issue 50 (no embedder: "
             "word overlap cut lists above 30), `count30-embedding` the same cap ranked by MiniLM, `budget` the "
             f"listing now ({record['budget']} tokens, the embedder ranking only what does not fit). First-relation "
             "recall: questions whose gold first hop is shown at a gold topic, of those with a gold walk. Depth d: "
             "gold-walk nodes at depth d-1 whose listing shows the gold hop d, of those that offer it.", ""]
    for facts in record["datasets"]:
        depths = sorted({d for rule in facts["rules"].values() for d in rule["depth_recall"]}, key=int)
        lines += [f"## {facts['dataset']} ({facts['questions']} questions, {facts['with_gold_walk']} with a gold walk)",
                  "", f"{facts['listings']} listings read: {facts['offered_mean']} relations offered on average, "
                  f"{facts['offered_max']} at most, {facts['over_30']} over 30; the longest topic listing "
                  f"{facts['topic_listing_tokens_max']} tokens.", "",
                  "| listing | first relation | " + " | ".join(f"depth {d}" for d in depths)
                  + " | lists cut | shown (mean) |",
                  "|---|---:|" + "---:|" * len(depths) + "---:|---:|"]
        for name, rule in facts["rules"].items():
            cells = []
            for d in depths:
                c = rule["depth_recall"].get(d)
                cells.append(f"{c['recall']} ({c['shown']}/{c['offered']})" if c else "-")
            lines.append(f"| {name} | {rule['first_relation_recall']} | " + " | ".join(cells)
                         + f" | {rule['lists_cut']} | {rule['shown_mean']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freebase-kg", required=True, help="the imported Freebase pieces")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--datasets", default="webqsp-gog,cwq-gog")
    parser.add_argument("--n", type=int, default=300, help="questions per dataset (the oracle benchmark's sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--budget", type=int, default=RELATION_BUDGET)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "relation_recall")
    args = parser.parse_args(argv)
    from kgqa.text.embedders import load_embedder

    started = time.perf_counter()
    embedder = load_embedder(args.embedder)
    datasets = [measure(d, args.freebase_kg, args.n, args.seed, args.data_dir, embedder, args.budget)
                for d in args.datasets.split(",") if d]
    record = {"when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": source_commit() or "unknown",
              "command": "python " + " ".join(shlex.quote(a) for a in [str(Path(sys.argv[0])), *(argv or sys.argv[1:])]),
              "seconds": round(time.perf_counter() - started), "budget": args.budget, "embedder": args.embedder,
              "datasets": datasets}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(render(record), encoding="utf-8")
    print(render(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
