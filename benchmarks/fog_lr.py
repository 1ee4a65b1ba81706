"""Does a 384-d frozen encoder need another learning rate than FoG's 1e-5? Train the foresight scorer on the same seeded
MetaQA dev sample at several learning rates (scorer phase only, no early stopping) and compare validation loss per
epoch and graph-mode answers on the held-out questions.

    python benchmarks/fog_lr.py --kg /tmp/kgs/metaqa --data-dir ../shared/data --per-hop 1000 --epochs 5 \
        --lr 1e-5 --lr 1e-4 --lr 1e-3

Writes benchmarks/results/fog_lr.json, fog_lr.md and fog_lr.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kg", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--per-hop", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, action="append")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "fog_lr"))
    args = parser.parse_args()
    rates = args.lr or [1e-5, 1e-4, 1e-3]

    import torch

    torch.set_num_threads(2)
    from kgqa.artifacts import ArtifactStore
    from kgqa.datasets.gold_chains import training_questions
    from kgqa.kg import open_kg
    from kgqa.methods.fog.training import TrainSettings, train_scorer, validate_answers
    from kgqa.steps.foresight.scorer import LabelVectors
    from kgqa.text import load_embedder

    data = training_questions(["metaqa-1hop", "metaqa-2hop", "metaqa-3hop"], "dev", data_dir=args.data_dir,
                              limit=args.per_hop, seed=args.seed)
    kg = open_kg(args.kg)
    embedder = load_embedder("minilm")
    labels = LabelVectors(kg, embedder, ArtifactStore().get("label-embeddings", kg=kg, embedder=embedder))
    runs = []
    for lr in rates:
        settings = TrainSettings(lr=lr, epochs=args.epochs, patience=args.epochs + 1, propagation_epochs=0,
                                 seed=args.seed)
        started = time.perf_counter()
        result = train_scorer(kg, data.questions, labels, settings=settings, progress=print)
        validation = validate_answers(kg, result.scorer, labels, result.summary["validation_ids"], data.questions,
                                      tau_e=0.02)
        runs.append({"lr": lr, "history": result.history, "validation": validation,
                     "seconds": time.perf_counter() - started, "settings": dataclasses.asdict(settings)})
        print(f"lr {lr}: validation {validation}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"command": "python benchmarks/fog_lr.py " + " ".join(os.sys.argv[1:]), "commit": commit,
               "questions": len(data.questions), "per_hop": args.per_hop, "runs": runs}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    lines = ["# FoG scorer: learning rate for a 384-d encoder (MiniLM)\n",
             f"`{payload['command']}` at commit {commit}; {len(data.questions)} MetaQA dev questions "
             f"({args.per_hop} per hop, seeded sample), 5% held out; scorer phase only (no propagation), "
             f"no early stopping. Graph-mode answers on the held-out questions (tau_e 0.02, tau_p 0.7, no "
             f"propagation trained).\n",
             "| lr | val loss per epoch | held-out hit | Hits@1 | F1 | seconds |", "|---|---|---|---|---|---|"]
    for run in runs:
        losses = ", ".join(f"{h['val_loss']:.4f}" for h in run["history"])
        v = run["validation"]
        lines.append(f"| {run['lr']:g} | {losses} | {v['hit']:.1f} | {v['hits1']:.1f} | {v['f1']:.1f} | "
                     f"{run['seconds']:.0f} |")
    lines.append("\n![validation loss per epoch](fog_lr.png)\n")
    out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        ax.plot([h["epoch"] for h in run["history"]], [h["val_loss"] for h in run["history"]], marker="o",
                label=f"lr {run['lr']:g}")
        ax.plot([h["epoch"] for h in run["history"]], [h["train_loss"] for h in run["history"]], linestyle=":",
                alpha=0.6)
    ax.set_xlabel("epoch")
    ax.set_ylabel("BCE loss (solid: validation, dotted: train)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)


if __name__ == "__main__":
    main()
