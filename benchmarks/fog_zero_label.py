"""FoG's graph mode (``fog[graph]``) on the Freebase benchmarks with scorers trained with and without labelled
questions (issue 51 item 2): webqsp-gog and cwq-gog over the offline Freebase pieces, each scorer on the same held-out
sample as the oracle benchmark (``benchmarks/oracle_bench.py``'s ``held_out``: the questions the labelled Freebase
scorer did not train on, drawn by a seed).

    python benchmarks/fog_zero_label.py --freebase-kg /work/kgs/freebase --data-dir ../shared/data \\
        --scorer zero-label=/work/models/fog-freebase-synth --scorer labelled=/work/models/fog-freebase \\
        [--types zero-label=DIR] [--method-config KEY=VALUE ...] [--n 300] [--seed 0]

Per scorer and dataset: hit, Hits@1, F1, KGR and Faithful-F1 (strict metrics), the sample's coverage ceiling (questions
whose gold chain reaches a gold answer on the KG) and seconds per question. Writes
``benchmarks/results/fog_zero_label.{json,md}`` (``--out-dir``, ``--name``); run directories go to ``--runs`` (kept;
finished runs are read back). MetaQA's figures come from ``benchmarks/fog_wordings.py`` (test sample and reworded sets).
Both datasets have only a test split here: every run is recorded in the test-split ledger (``kgqa eval ledger``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from kgqa.eval.runner import run_eval
from kgqa.provenance import source_commit

DATASETS = ("webqsp-gog", "cwq-gog")
HERE = Path(__file__).resolve().parent


def _oracle_bench() -> Any:
    """benchmarks/oracle_bench.py as a module: its held-out sample and coverage ceiling, so both benchmarks read alike."""
    spec = importlib.util.spec_from_file_location("oracle_bench", HERE / "oracle_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(summary: dict[str, Any]) -> dict[str, Any]:
    pct = {k: round(100 * float(summary[k]), 1) for k in ("hit", "hits@1", "f1", "kgr", "faithful_f1")}
    return {**pct, "n": summary["n"], "method": summary["method"], "errors": summary.get("errors", 0),
            "seconds_per_question": round(float(summary.get("latency_s_mean") or 0.0), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freebase-kg", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--scorer", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--types", action="append", default=[], metavar="NAME=DIR",
                        help="an answer-type model for the scorer NAME (kgqa train answer-types --like ITS_DIR)")
    parser.add_argument("--method-config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=Path, default=Path("benchmarks/runs/fog_zero_label"))
    parser.add_argument("--out-dir", type=Path, default=HERE / "results")
    parser.add_argument("--name", default="fog_zero_label")
    args = parser.parse_args()
    from kgqa.methods import parse_method_config

    extra = parse_method_config(args.method_config, method="fog")
    scorers = dict(s.split("=", 1) for s in args.scorer)
    types = dict(t.split("=", 1) for t in args.types)
    bench = _oracle_bench()
    cells: list[dict[str, Any]] = []
    ceilings: dict[str, Any] = {}
    for dataset in DATASETS:
        sample = bench.held_out(dataset, args.n, args.seed, args.data_dir)
        ceilings[dataset] = bench.ceiling(sample, args.freebase_kg)
        print(f"{dataset}: {len(sample)} held-out questions, ceiling {ceilings[dataset]['ceiling']}%", flush=True)
        for name, directory in scorers.items():
            out = args.runs / f"{name}-{dataset}"
            done = out / "summary.json"
            if not done.is_file():
                run_eval(dataset, out=out, split="test", method="fog", questions=sample, kg=args.freebase_kg,
                         data_dir=args.data_dir, progress=False,
                         method_config={"scorer": directory, "mode": "graph", **extra,
                                        **({"answer_types": types[name]} if name in types else {})})
            summary = json.loads(done.read_text(encoding="utf-8"))
            cells.append({"scorer": name, "scorer_dir": directory, "answer_types": types.get(name), "dataset": dataset,
                          **_cell(summary)})
            print(f"  {name}: hit {cells[-1]['hit']} F1 {cells[-1]['f1']} KGR {cells[-1]['kgr']}", flush=True)
    record = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "kgqa_commit": source_commit(),
              "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "n": args.n, "seed": args.seed,
              "method_config": extra, "ceilings": ceilings, "cells": cells}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [f"Command: `{record['command']}` at {record['kgqa_commit']}; {args.n} held-out questions per dataset "
             f"(seed {args.seed}, the oracle benchmark's sample); graph mode, reported as fog[graph].", "",
             "| scorer | dataset | hit | Hits@1 | F1 | KGR | Faithful-F1 | ceiling | s/q |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        lines.append(f"| {c['scorer']} | {c['dataset']} | {c['hit']} | {c['hits@1']} | {c['f1']} | {c['kgr']} | "
                     f"{c['faithful_f1']} | {ceilings[c['dataset']]['ceiling']} | {c['seconds_per_question']} |")
    (args.out_dir / f"{args.name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
