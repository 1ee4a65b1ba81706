"""The oracle benchmark (issue 49): every KG method's machinery measured apart from the model's limits.

Each KG method (ccor, cor, tog, pog, srp, vog, fog in LLM mode, chains) answers held-out samples of MetaQA 1/2/3-hop
(dev, over the WikiMovies KB) and of webqsp-gog and cwq-gog (over the offline Freebase pieces, docs/freebase.md) with
the oracle reasoner as its model (``--llm oracle`` and ``oracle:ACC``; docs/llm.md): a perfect (or seeded fallible)
reasoner that answers every step from the question's gold chain and answers, and from nothing its prompt does not show.
What a method misses under ``oracle`` (ACC 1.0) its machinery lost: the loss table says at which step.

Per cell (dataset x method x accuracy): hit, Hits@1, F1, KGR, Faithful-F1, LLM calls, tokens, KG queries and seconds
per question, and the losses. Per dataset the coverage ceiling of the sample: the share of its questions whose gold
chain, walked on the KG from its topic, reaches a gold answer (:mod:`kgqa.datasets.gold_reasoning`); on the Freebase
pieces no method can pass it, so a figure there is a machinery check, never a headline accuracy.

Held out: FoG and ``chains`` read a trained scorer. The MetaQA sample avoids the questions the recipe's scorer trains on
(``kgqa train fog --dataset metaqa-{1,2,3}hop --split dev --limit 5000 --seed 0``, docs/fog.md); the Freebase sample
avoids the questions ``--freebase-train-limit`` (700 of each, seed 0) gives the Freebase scorer:

    kgqa train fog --dataset webqsp-gog --dataset cwq-gog --split test --limit 700 --seed 0 \\
        --kg /work/kgs/freebase --out models/fog-freebase
    python benchmarks/oracle_bench.py --metaqa-kg /work/kgs/metaqa --freebase-kg /work/kgs/freebase \\
        --fog-metaqa models/fog-metaqa --fog-freebase models/fog-freebase --data-dir ../shared/data --jobs 2

Writes ``benchmarks/results/oracle_bench.{json,md,png}`` (``--out``); the run directories go under ``--work`` (kept
there, so ``--resume``-like reuse: a cell whose run directory is complete is read, not run again).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from kgqa.core import Question
from kgqa.datasets import load_dataset
from kgqa.datasets.gold_chains import training_questions
from kgqa.datasets.gold_reasoning import gold_reasoning
from kgqa.kg import open_kg
from kgqa.provenance import source_commit

REPO = Path(__file__).resolve().parents[1]
METHODS = ("ccor", "cor", "tog", "pog", "srp", "vog", "fog", "chains")
#: dataset -> (split, which KG, the scorer training's --limit per dataset)
DATASETS = {
    "metaqa-1hop": ("dev", "metaqa", 5000), "metaqa-2hop": ("dev", "metaqa", 5000),
    "metaqa-3hop": ("dev", "metaqa", 5000), "webqsp-gog": ("test", "freebase", 700), "cwq-gog": ("test", "freebase", 700),
}
#: LLM calls per question the papers report on WebQSP / CWQ (issue 49).
PAPER_CALLS = {"tog": (15.9, 22.6), "pog": (9.0, 13.3), "vog": (9.4, 14.5), "ccor": (4.51, 10.20), "fog": (2.3, 2.8)}
TRAIN_SEED = 0


def held_out(dataset: str, n: int, seed: int, data_dir: str | None) -> list[Question]:
    """``n`` questions of the dataset's split drawn by ``seed`` from those its scorer did not train on."""
    split, _, train_limit = DATASETS[dataset]
    questions = load_dataset(dataset, split=split, data_dir=data_dir)
    trained = {t.source for t in training_questions([dataset], split, limit=train_limit, seed=TRAIN_SEED,
                                                    data_dir=data_dir).questions}
    rest = [q for q in questions if q.id not in trained]
    return random.Random(f"oracle-bench:{seed}:{dataset}").sample(rest, min(n, len(rest)))


def ceiling(questions: list[Question], kg_spec: str) -> dict[str, Any]:
    """The sample's coverage ceiling: questions whose gold chain reaches a gold answer on the KG."""
    kg = open_kg(kg_spec)
    try:
        reached = [q.id for q in questions if gold_reasoning(q, kg).path_nodes]
    finally:
        kg.close()
    return {"questions": len(questions), "reached": len(reached), "ceiling": round(100 * len(reached) / len(questions), 1)}


def method_config(method: str, kg: str, args: argparse.Namespace) -> dict[str, Any]:
    scorer = args.fog_metaqa if kg == "metaqa" else args.fog_freebase
    if method == "fog":
        return {"mode": "llm", "scorer": scorer}
    if method == "chains":
        return {"scorer": scorer}
    return {}


def srp_references(dataset: str, kg_spec: str, args: argparse.Namespace) -> str:
    """SRP's reference base for a dataset's cells (built once into ``--work``). No split here is a training split and
    webqsp-gog / cwq-gog have only test, so it is drawn from the questions the sample never holds: the seeded subset of
    the same split the scorers train on (``held_out`` excludes it). The base lists that subset's ids, and ``kgqa
    eval`` checks that the sample avoids them (a base from the evaluated questions would be refused)."""
    from kgqa.methods.srp.references import META_FILE
    from kgqa.methods.srp.trainer import draw_reference_base

    out = args.work / f"srp-references-{dataset}"
    if (out / META_FILE).is_file():
        return str(out)
    split, _, train_limit = DATASETS[dataset]
    trained = {t.source for t in training_questions([dataset], split, limit=train_limit, seed=TRAIN_SEED,
                                                    data_dir=args.data_dir).questions}
    pool = [q for q in load_dataset(dataset, split=split, data_dir=args.data_dir) if q.id in trained]
    base = draw_reference_base([(dataset, pool)], split=split, kg=kg_spec, embedder="minilm",
                               subset=f"the {len(pool)} questions with a gold chain of the seeded sample of "
                                      f"{train_limit} (seed {TRAIN_SEED}) the scorers train on; the oracle bench's "
                                      "sample is drawn from the rest", say=lambda line: print(f"srp: {line}", flush=True))
    base.save(out)
    return str(out)


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One dataset x method x accuracy: its run (or the complete run already in its directory) and its figures."""
    from kgqa.eval.rundir import read_results
    from kgqa.eval.runner import run_eval

    out = Path(cell["out"])
    questions = [Question.model_validate(q) for q in cell["questions"]]
    llm = "oracle" if cell["accuracy"] == 1.0 else f"oracle:{cell['accuracy']:g}"
    done = (out / "summary.json").is_file() and len(read_results(out)) == len(questions)
    started = time.perf_counter()
    if not done:
        run_eval(cell["dataset"], out=out, split=cell["split"], method=cell["method"], method_config=cell["config"],
                 llm=llm, kg=cell["kg"], seed=cell["seed"], questions=questions, progress=False, report=True,
                 resume=(out / "config.json").is_file())
    rows = read_results(out)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    n = len(rows)

    def mean(key: str) -> float:
        return sum(float(r.get(key) or 0.0) for r in rows) / n if n else 0.0

    return {"dataset": cell["dataset"], "method": cell["method"], "accuracy": cell["accuracy"], "questions": n,
            "run_dir": str(out), "ran_s": round(time.perf_counter() - started, 1) if not done else None,
            "hit": round(100 * summary.get("hit", 0.0), 1), "hits@1": round(100 * summary.get("hits@1", 0.0), 1),
            "f1": round(100 * summary.get("f1", 0.0), 1), "kgr": round(100 * summary.get("kgr", 0.0), 1),
            "faithful_f1": round(100 * summary.get("faithful_f1", 0.0), 1),
            "calls_per_q": round(summary.get("llm_calls_mean", 0.0), 2),
            "tokens_per_q": round(summary.get("tokens_mean", 0.0)), "kg_queries_per_q": round(mean("kg_calls"), 1),
            "s_per_q": round(mean("latency_s"), 3), "errors": summary.get("errors", 0),
            "losses": (summary.get("losses") or {}).get("counts", {}),
            "loss_steps": (summary.get("losses") or {}).get("steps", {})}


# ---------------------------------------------------------------------------------------------------------------------
# Rendering


LOSS_ORDER = ("linking", "relation_pruning", "entity_cap", "entity_sample", "judge_stop", "depth_limit", "budget_limit",
              "answer_step", "no_gold_path", "error", "unattributed")


def render(record: dict[str, Any]) -> str:
    cells = record["cells"]
    lines = [f"# The oracle benchmark ({record['when']}, commit {record['commit']})", "",
             f"Command: `{record['command']}`. Machine: {record['machine']}. {record['seconds']} s in all.", "",
             "Every KG method with the oracle reasoner as its model (`oracle`: every decision right; `oracle:0.8`: each "
             "decision wrong with probability 0.2, seeded). Held-out samples (the scorers of FoG and `chains` never "
             "trained on them). The ceiling is the share of the sample whose gold chain reaches a gold answer on the "
             "KG; on the Freebase pieces this is a machinery check, not a headline accuracy (docs/freebase.md).", ""]
    for dataset, facts in record["datasets"].items():
        lines += [f"## {dataset} ({facts['split']}, {facts['questions']} questions, ceiling {facts['ceiling']}%)", "",
                  "| method | oracle | hit | Hits@1 | F1 | KGR | Faithful-F1 | calls/q | tokens/q | KG queries/q | s/q |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in sorted((c for c in cells if c["dataset"] == dataset), key=lambda c: (c["method"], -c["accuracy"])):
            lines.append(f"| {c['method']} | {c['accuracy']:g} | {c['hit']} | {c['hits@1']} | {c['f1']} | {c['kgr']} | "
                         f"{c['faithful_f1']} | {c['calls_per_q']} | {c['tokens_per_q']:,} | {c['kg_queries_per_q']} | "
                         f"{c['s_per_q']} |")
        perfect = [c for c in cells if c["dataset"] == dataset and c["accuracy"] == 1.0]
        present = [loss for loss in LOSS_ORDER if any(c["losses"].get(loss) for c in perfect)]
        if present:
            lines += ["", f"Where the gold was lost under `oracle` (questions of {facts['questions']}):", "",
                      "| method | missed | " + " | ".join(present) + " | top step |",
                      "|---|---:|" + "---:|" * len(present) + "---|"]
            for c in sorted(perfect, key=lambda c: c["method"]):
                top = next(iter(c["loss_steps"].items()), None)
                lines.append(f"| {c['method']} | {sum(c['losses'].values())} | "
                             + " | ".join(str(c["losses"].get(loss, 0)) for loss in present)
                             + f" | {f'{top[0]} ({top[1]})' if top else '-'} |")
        lines.append("")
    lines += ["## LLM calls per question beside the papers'", "",
              "| method | paper WebQSP | paper CWQ | oracle webqsp-gog | oracle cwq-gog | oracle MetaQA 1/2/3-hop |",
              "|---|---:|---:|---:|---:|---|"]
    for method in record["methods"]:
        def calls(dataset: str, method: str = method) -> str:
            found = [c for c in cells if c["dataset"] == dataset and c["method"] == method and c["accuracy"] == 1.0]
            return str(found[0]["calls_per_q"]) if found else "-"
        paper = PAPER_CALLS.get(method)
        lines.append(f"| {method} | {paper[0] if paper else '-'} | {paper[1] if paper else '-'} | {calls('webqsp-gog')} | "
                     f"{calls('cwq-gog')} | {' / '.join(calls(d) for d in ('metaqa-1hop', 'metaqa-2hop', 'metaqa-3hop'))} |")
    lines += ["", "![hit against oracle accuracy](oracle_bench.png)", ""]
    return "\n".join(lines)


def plot(record: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(record["datasets"])
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 3.4), sharey=True, squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for method in record["methods"]:
            points = sorted((c["accuracy"], c["hit"]) for c in record["cells"]
                            if c["dataset"] == dataset and c["method"] == method)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
        ax.axhline(record["datasets"][dataset]["ceiling"], color="grey", linestyle=":", linewidth=1)
        ax.set_title(dataset, fontsize=9)
        ax.set_xlabel("oracle accuracy")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("hit (%)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def machine() -> str:
    cpu = ""
    with contextlib.suppress(OSError):
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    return f"{cpu}, {os.cpu_count()} CPUs, load {', '.join(f'{x:.2f}' for x in os.getloadavg())}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metaqa-kg", required=True, help="the imported MetaQA KB (kgqa kg import ... --format metaqa)")
    parser.add_argument("--freebase-kg", required=True, help="the imported Freebase pieces (--format freebase-pieces)")
    parser.add_argument("--fog-metaqa", required=True, help="FoG scorer trained on MetaQA dev (docs/fog.md)")
    parser.add_argument("--fog-freebase", required=True, help="FoG scorer trained on the Freebase training sample")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--accuracies", default="1.0,0.8")
    parser.add_argument("--n", type=int, default=300, help="questions per dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="cells run in parallel processes")
    parser.add_argument("--work", type=Path, default=Path("/tmp/oracle-bench-runs"), help="run directories")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "oracle_bench")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    methods = [m for m in args.methods.split(",") if m]
    accuracies = [float(a) for a in args.accuracies.split(",") if a]
    kgs = {"metaqa": args.metaqa_kg, "freebase": args.freebase_kg}
    datasets: dict[str, Any] = {}
    cells: list[dict[str, Any]] = []
    for dataset in [d for d in args.datasets.split(",") if d]:
        split, kg, _ = DATASETS[dataset]
        sample = held_out(dataset, args.n, args.seed, args.data_dir)
        datasets[dataset] = {"split": split, "kg": kgs[kg], **ceiling(sample, kgs[kg])}
        print(f"{dataset}: {len(sample)} held-out questions, ceiling {datasets[dataset]['ceiling']}%", flush=True)
        payload = [q.model_dump(mode="json") for q in sample]
        for method in methods:
            config = method_config(method, kg, args)
            if method == "srp":  # references from questions the sample never holds (srp_references)
                config = {**config, "references": srp_references(dataset, kgs[kg], args)}
            for accuracy in accuracies:
                cells.append({"dataset": dataset, "split": split, "method": method, "accuracy": accuracy,
                              "kg": kgs[kg], "config": config, "seed": args.seed,
                              "questions": payload,
                              "out": str(args.work / f"{dataset}-{method}-{accuracy:g}")})
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(run_cell, cells):
            results.append(result)
            print(f"{result['dataset']} {result['method']} oracle {result['accuracy']:g}: hit {result['hit']} "
                  f"calls/q {result['calls_per_q']} s/q {result['s_per_q']} losses {result['losses']}", flush=True)
    record = {"when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": source_commit() or "unknown",
              "command": "python " + " ".join(shlex.quote(a) for a in [str(Path(sys.argv[0])), *(argv or sys.argv[1:])]),
              "machine": machine(), "seconds": round(time.perf_counter() - started), "methods": methods,
              "accuracies": accuracies, "datasets": datasets, "cells": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(render(record), encoding="utf-8")
    with contextlib.suppress(ImportError):
        plot(record, args.out.with_suffix(".png"))
    print(f"wrote {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
