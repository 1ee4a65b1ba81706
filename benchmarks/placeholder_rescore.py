"""What the reply format's echoed placeholders cost a finished run: its recorded answers rescored without them.

Small models copy the ``["<answer>", ...]`` of a prompt's reply format into their answer lists, and strict Hits@1
scores the first item. ccadff1 drops such items when a reply is read (:func:`kgqa.llm.structured.drop_placeholders`).
This script applies the same rule to the answers a run recorded before that, and scores them again with the strict
rule. It does not re-run anything. A method that would have acted differently on a reply left empty (a sufficiency
check that then goes on exploring) is not covered, so the rescored figures are an estimate for those methods.

    python benchmarks/placeholder_rescore.py RUNDIR [RUNDIR ...]

Writes ``benchmarks/results/placeholder_rescore.{json,md}`` (``--out-dir``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _run_readers import run_reader_main
from kgqa.core import AnswerItem, GoldAnswer
from kgqa.eval.metrics import match_answers
from kgqa.eval.report import reported_method
from kgqa.eval.rundir import CONFIG_FILE, RESULTS_FILE
from kgqa.llm.structured import drop_placeholders
from kgqa.provenance import short_commit


def rescore(run: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines() if line]
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    with_placeholder = 0
    totals = {"hit1_recorded": 0.0, "hit1_rescored": 0.0, "f1_recorded": 0.0, "f1_rescored": 0.0}
    for row in rows:
        golds = [GoldAnswer(id=i, name=n, aliases=[]) for i, n in zip(row["gold_ids"], row["gold"], strict=True)]
        items = [AnswerItem(id=i, name=n) for i, n in zip(row["answer_ids"], row["answers"], strict=True)]
        names = set(drop_placeholders([a.name for a in items]))
        kept = [a for a in items if a.name in names]
        with_placeholder += len(kept) != len(items)
        before, after = match_answers(golds, items), match_answers(golds, kept)
        totals["hit1_recorded"] += before.hit1
        totals["hit1_rescored"] += after.hit1
        totals["f1_recorded"] += before.f1
        totals["f1_rescored"] += after.f1
    n = max(len(rows), 1)
    return {"run": str(run), "method": reported_method(config), "dataset": config.get("dataset"),
            "commit": config.get("kgqa_commit"), "n": len(rows), "questions_with_placeholder": with_placeholder,
            **{k: round(100 * v / n, 1) for k, v in totals.items()}}


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of the rows."""
    lines = ["| run | method | dataset | run commit | n | questions with a placeholder | Hits@1 recorded | Hits@1 "
             "rescored | F1 recorded | F1 rescored |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {Path(r['run']).name} | {r['method']} | {r['dataset']} | {short_commit(r['commit'])} | {r['n']} | "
                     f"{r['questions_with_placeholder']} | {r['hit1_recorded']} | {r['hit1_rescored']} | "
                     f"{r['f1_recorded']} | {r['f1_rescored']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return run_reader_main(argv, name="placeholder_rescore", description=__doc__.split("\n\n")[0],
                           runs_help="run directories (kgqa eval --out)", read_run=rescore, table=table,
                           title="Recorded answers rescored without echoed placeholders",
                           about="Not a re-run: the same answers, the placeholders dropped.",
                           needs=(CONFIG_FILE, RESULTS_FILE))


if __name__ == "__main__":
    raise SystemExit(main())
