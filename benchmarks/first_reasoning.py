"""ToG's and PoG's LLM calls per question, split by what their first reasoning reply said, read from finished runs.

Since ccadff1 a reasoning reply that says "sufficient" but whose answer list is empty once the echoed format
placeholders are dropped no longer ends the question: the search goes on. This script shows what that costs: each
question is put in one group by its first ``tog.reason`` / ``pog.reason`` step (sufficient with answers, sufficient
with an empty list, not sufficient or unreadable, no reasoning step at all) and the group's mean calls are taken from
``results.jsonl``. It re-runs nothing.

    python benchmarks/first_reasoning.py RUNDIR [RUNDIR ...]

Writes ``benchmarks/results/first_reasoning.{json,md}`` (``--out-dir``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from _run_readers import run_reader_main
from kgqa.eval.rundir import TRACES_FILE, parse_lines, read_config, read_results
from kgqa.provenance import short_commit

GROUPS = ("sufficient, answers", "sufficient, empty list", "not sufficient or unreadable", "no reasoning step")


def group_of(trace: list[dict[str, Any]], method: str) -> str:
    """The group of one question by its first reasoning reply."""
    first = next((e for e in trace if e.get("step") == f"{method}.reason"), None)
    if first is None:
        return GROUPS[3]
    if not first.get("sufficient"):
        return GROUPS[2]
    return GROUPS[0] if first.get("answers") else GROUPS[1]


def read_run(run: Path) -> dict[str, Any]:
    """Questions and mean calls per group for the ToG or PoG run in ``run`` (questions with a result only)."""
    config = read_config(run)
    method = config.get("method")
    if method not in ("tog", "pog"):
        raise ValueError(f"{run}: a {method!r} run, not a tog or pog run")
    calls = {r["id"]: int(r.get("llm_calls") or 0) for r in read_results(run)}
    by_group: dict[str, list[int]] = defaultdict(list)
    for trace in parse_lines(run / TRACES_FILE, repair=False):
        if trace["id"] in calls:
            by_group[group_of(trace.get("trace") or [], method)].append(calls[trace["id"]])
    groups = {g: {"questions": len(by_group[g]),
                  "calls_per_q": round(sum(by_group[g]) / len(by_group[g]), 2) if by_group[g] else None}
              for g in GROUPS}
    return {"run": str(run), "method": method, "dataset": config.get("dataset"), "split": config.get("split"),
            "commit": config.get("kgqa_commit"), "n": len(calls),
            "calls_per_q": round(sum(calls.values()) / len(calls), 2) if calls else None, "groups": groups}


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of the rows."""
    lines = ["| run | method | dataset | run commit | n | calls/q | " + " | ".join(GROUPS) + " |",
             "|---|---|---|---|---:|---:|" + "---:|" * len(GROUPS)]
    for r in rows:
        cells = [f"{g['questions']} ({g['calls_per_q']:.2f})" if g["questions"] else "0"
                 for g in r["groups"].values()]
        lines.append(f"| {Path(r['run']).name} | {r['method']} | {r['dataset']} {r['split']} | {short_commit(r['commit'])} "
                     f"| {r['n']} | {r['calls_per_q']} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return run_reader_main(argv, name="first_reasoning", description=__doc__.split("\n\n")[0],
                           runs_help="ToG or PoG run directories (kgqa eval --out)", read_run=read_run, table=table,
                           title="ToG's and PoG's calls by their first reasoning reply",
                           about="Questions (mean LLM calls per question) in each group; not a re-run.")


if __name__ == "__main__":
    raise SystemExit(main())
