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

import argparse
import datetime as dt
import json
import shlex
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from kgqa.errors import KGQAError
from kgqa.eval.rundir import CONFIG_FILE, TRACES_FILE, parse_lines, read_config, read_results
from kgqa.provenance import source_commit

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="ToG or PoG run directories (kgqa eval --out)")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / TRACES_FILE).is_file() or not (r / CONFIG_FILE).is_file()]
    if missing:
        parser.error(f"not a run directory (no config.json or traces.jsonl): {', '.join(missing)}")
    try:
        rows = [read_run(run) for run in args.runs]
    except (ValueError, KGQAError) as exc:  # not a tog/pog run; a damaged results or traces line
        parser.error(str(exc))
    command = "python benchmarks/first_reasoning.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"benchmark": "first_reasoning", "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "commit": source_commit(), "command": command, "runs": rows}
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "first_reasoning.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    lines = [f"# ToG's and PoG's calls by their first reasoning reply ({record['when']}, commit {record['commit']})", "",
             f"Command: `{command}`. Questions (mean LLM calls per question) in each group; not a re-run.", "",
             "| run | method | dataset | run commit | n | calls/q | " + " | ".join(GROUPS) + " |",
             "|---|---|---|---|---:|---:|" + "---:|" * len(GROUPS)]
    for r in rows:
        cells = [f"{g['questions']} ({g['calls_per_q']:.2f})" if g["questions"] else "0"
                 for g in r["groups"].values()]
        lines.append(f"| {Path(r['run']).name} | {r['method']} | {r['dataset']} {r['split']} | {str(r['commit'])[:7]} "
                     f"| {r['n']} | {r['calls_per_q']} | " + " | ".join(cells) + " |")
    (out / "first_reasoning.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
