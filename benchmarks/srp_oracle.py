"""SRP's pipeline ceiling: a scripted oracle writes the gold relation chain of each MetaQA question as SRP's plan, the
judge keeps every sequence and the answer step copies the sequences' last nodes. What is lost is lost in
instantiation, the walk's bounds or answer linking, never in a model.

    python benchmarks/srp_oracle.py --kg /tmp/kgs/metaqa --data-dir ../shared/data --split dev --per-hop 300

Writes benchmarks/results/srp_oracle.json and .md: per hop, strict Hits@1 and hit, F1, instantiation errors, the
judge audit's searching success, and seconds per question (graph side only: the oracle answers at once).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _oracle(chains: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    """The scripted policy: the gold chain as the plan, keep everything, copy the tails."""

    def policy(prompt):  # type: ignore[no-untyped-def]
        if prompt.step == "srp.plan":
            text = re.search(r"^Question: (.+)$", prompt.request, re.M).group(1)  # type: ignore[union-attr]
            return {"paths": [chains[text]]}
        if prompt.step == "srp.judge":
            numbers = [int(n) for n in re.findall(r"^(\d+)\. ", prompt.request, re.M)]
            return {"verdict": "have_answer", "keep": numbers, "message": "oracle"}
        if prompt.step == "srp.answer":
            tails = [line.rsplit(" -> ", 1)[-1] for line in re.findall(r"^\d+\. (.+)$", prompt.request, re.M)]
            return {"reasoning": "oracle", "answers": list(dict.fromkeys(tails))}
        raise AssertionError(f"the oracle has no reply for {prompt.step}")

    return policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kg", required=True, help="the MetaQA KG (an embedded import of kb.txt)")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--per-hop", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()

    from kgqa.datasets import load_dataset
    from kgqa.datasets.gold_chains import gold_chain
    from kgqa.eval.runner import run_eval
    from kgqa.kg import open_kg
    from kgqa.steps.relations import describe_hop
    from kgqa.testing import PolicyModel

    kg = open_kg(args.kg)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    rows = []
    for hops in (1, 2, 3):
        dataset = f"metaqa-{hops}hop"
        questions = load_dataset(dataset, args.split, data_dir=args.data_dir)
        chains = {}
        for q in questions:
            chain = gold_chain(q)
            if chain is not None:
                chains[q.text] = [describe_hop(h) for h in chain]
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            run = run_eval(dataset, split=args.split, out=Path(tmp) / "run", method="srp",
                           method_config={"relation_check": False}, llm=PolicyModel(_oracle(chains), name="oracle"),
                           kg=kg, embedder=args.embedder, limit=args.per_hop, shuffle=True, seed=args.seed,
                           data_dir=args.data_dir, progress=False, report=False)
            seconds = time.perf_counter() - started
            summary = run.summary
            traces = [json.loads(line) for line in (Path(tmp) / "run" / "traces.jsonl").read_text().splitlines()]
        errors = sum(1 for t in traces for e in t["trace"] if e.get("step") == "srp.instantiate" and e.get("error"))
        audits = summary.get("audits", {})
        rows.append({
            "dataset": dataset, "split": args.split, "n": summary["n"],
            "hits@1": round(100 * summary["hits@1"], 2), "hit": round(100 * summary["hit"], 2),
            "f1": round(100 * summary["f1"], 2), "legacy_hits@1": round(100 * summary["legacy_hits@1"], 2),
            "kgr": round(100 * summary["kgr"], 2),
            "instantiation_errors": errors,
            "searching_success": audits.get("srp.retrieved", {}).get("searching_success"),
            "seconds_per_question": round(seconds / max(summary["n"], 1), 4),
        })
        print(rows[-1], flush=True)
    payload = {"benchmark": "srp_oracle", "commit": commit, "kg": args.kg, "per_hop": args.per_hop,
               "seed": args.seed, "command": "python benchmarks/srp_oracle.py " + " ".join(
                   f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "srp_oracle.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    header = "| dataset | n | Hits@1 | hit | F1 | legacy Hits@1 | KGR | instantiation errors | searching success | s/q |"
    lines = [f"SRP oracle (gold chain as the plan), commit {commit}, `{payload['command']}`", "", header,
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        success = "-" if r["searching_success"] is None else f"{100 * r['searching_success']:.2f}"
        lines.append(f"| {r['dataset']} {r['split']} | {r['n']} | {r['hits@1']:.2f} | {r['hit']:.2f} | {r['f1']:.2f} | "
                     f"{r['legacy_hits@1']:.2f} | {r['kgr']:.2f} | {r['instantiation_errors']} | {success} | "
                     f"{r['seconds_per_question']} |")
    (RESULTS / "srp_oracle.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
